/**
 * Renders lines of text into a PNG or JPEG, black on white, with DejaVu Sans (Debian's
 * `fonts-dejavu-core`) through `pureimage`, a pure-JavaScript canvas: the OCR test, the client
 * and the benchmark make their own images of known text.
 *
 * @module
 */

// @ts-types="@types/pngjs"
import { PNG } from "pngjs";
import jpeg from "jpeg-js";
import * as PImage from "pureimage";

/** Where Debian's `fonts-dejavu-core` puts DejaVu Sans (`DENOTRITON_OCR_FONT` overrides). */
export const FONT_PATH: string = Deno.env.get("DENOTRITON_OCR_FONT") ??
  "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/** Options of {@linkcode renderText}. */
export interface RenderOptions {
  /**
   * Glyph size in pixels.
   *
   * @default {32}
   */
  fontSize?: number;
  /**
   * `"png"` or `"jpeg"` (quality 90).
   *
   * @default {"png"}
   */
  format?: "png" | "jpeg";
}

let fontLoaded = false;

/**
 * Whether the font file is there.
 *
 * @returns `true` when {@linkcode FONT_PATH} is a readable file.
 */
export function fontAvailable(): boolean {
  try {
    return Deno.statSync(FONT_PATH).isFile;
  } catch {
    return false;
  }
}

/**
 * Draws each line on its own row with a margin around the block.
 *
 * @param lines The text lines.
 * @param options Size and format.
 * @returns The encoded image.
 */
export function renderText(lines: readonly string[], options: RenderOptions = {}): Uint8Array {
  if (!fontLoaded) {
    if (!fontAvailable()) {
      throw new Error(
        `Cannot render text: font ${FONT_PATH} is missing (apt-get install fonts-dejavu-core, or set DENOTRITON_OCR_FONT)`,
      );
    }
    PImage.registerFont(FONT_PATH, "DejaVu Sans").loadSync();
    fontLoaded = true;
  }
  const size = options.fontSize ?? 32;
  const margin = size;
  const lineHeight = Math.round(size * 1.75);
  // DejaVu Sans averages about 0.62 em per character.
  const width = margin * 2 + Math.ceil(Math.max(1, ...lines.map((l) => l.length)) * size * 0.62);
  const height = margin * 2 + lineHeight * lines.length;
  const bitmap = PImage.make(width, height);
  const ctx = bitmap.getContext("2d");
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = "#000000";
  ctx.font = `${size}px 'DejaVu Sans'`;
  lines.forEach((line, i) => ctx.fillText(line, margin, margin + lineHeight * i + size));
  const rgba = bitmap.data;
  if (options.format === "jpeg") {
    return new Uint8Array(jpeg.encode({ width, height, data: rgba }, 90).data);
  }
  const png = new PNG({ width, height });
  png.data.set(rgba);
  return new Uint8Array(PNG.sync.write(png));
}
