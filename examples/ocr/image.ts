/**
 * Images as the OCR pipeline sees them: 8-bit RGB, row-major. Decoding of PNG (`pngjs`) and
 * JPEG (`jpeg-js`) — both pure JavaScript, so the Workers need no native codec — and bilinear
 * resizing.
 *
 * @module
 */

// @ts-types="@types/pngjs"
import { PNG } from "pngjs";
import jpeg from "jpeg-js";
import { Buffer } from "node:buffer";
import { InferenceError } from "../../mod.ts";

/** An 8-bit RGB image, 3 bytes per pixel, rows top to bottom. */
export interface RgbImage {
  /** Width in pixels. */
  readonly width: number;
  /** Height in pixels. */
  readonly height: number;
  /** `width * height * 3` bytes: R, G, B. */
  readonly data: Uint8Array;
}

/** The largest image accepted, in pixels (a 64-megapixel image decodes to 192 MB of RGB). */
export const MAX_PIXELS = 64_000_000;

const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const JPEG_MAGIC = [0xff, 0xd8, 0xff];

function startsWith(bytes: Uint8Array, magic: readonly number[]): boolean {
  return bytes.length >= magic.length && magic.every((byte, i) => bytes[i] === byte);
}

function invalid(message: string, cause?: unknown): InferenceError {
  return new InferenceError(message, { code: "INVALID_ARG", cause });
}

function checkSize(width: number, height: number): void {
  if (width < 1 || height < 1 || width * height > MAX_PIXELS) {
    throw invalid(
      `Cannot decode image: ${width}x${height} pixels is outside 1 to ${MAX_PIXELS} pixels`,
    );
  }
}

/** Drops the alpha channel of RGBA data, laying the pixels over white (transparent = paper). */
function rgbaToRgb(rgba: Uint8Array, width: number, height: number): Uint8Array {
  const rgb = new Uint8Array(width * height * 3);
  for (let p = 0; p < width * height; p++) {
    const q = p * 3;
    const alpha = rgba[p * 4 + 3]!;
    for (let c = 0; c < 3; c++) {
      rgb[q + c] = (rgba[p * 4 + c]! * alpha + 255 * (255 - alpha) + 127) / 255;
    }
  }
  return rgb;
}

/**
 * Decodes a PNG or JPEG file (recognised by its signature) to RGB.
 *
 * @param bytes The encoded file.
 * @returns The decoded image.
 * @throws {InferenceError} INVALID_ARG for anything else, a corrupt file or an image over
 *   {@linkcode MAX_PIXELS}.
 */
export function decodeImage(bytes: Uint8Array): RgbImage {
  if (startsWith(bytes, PNG_MAGIC)) {
    // Width and height sit in the IHDR chunk right after the signature: refuse a huge image
    // before pngjs allocates it.
    if (bytes.length >= 24) {
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      checkSize(view.getUint32(16), view.getUint32(20));
    }
    let png: { width: number; height: number; data: Uint8Array };
    try {
      png = PNG.sync.read(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    } catch (error) {
      throw invalid(`Cannot decode image: invalid PNG: ${(error as Error).message}`, error);
    }
    return {
      width: png.width,
      height: png.height,
      data: rgbaToRgb(png.data, png.width, png.height),
    };
  }
  if (startsWith(bytes, JPEG_MAGIC)) {
    let decoded: { width: number; height: number; data: Uint8Array };
    try {
      decoded = jpeg.decode(bytes, {
        useTArray: true,
        formatAsRGBA: false,
        maxResolutionInMP: MAX_PIXELS / 1e6,
        maxMemoryUsageInMB: 1024,
      });
    } catch (error) {
      throw invalid(`Cannot decode image: invalid JPEG: ${(error as Error).message}`, error);
    }
    checkSize(decoded.width, decoded.height);
    return decoded;
  }
  const head = Array.from(bytes.subarray(0, 4), (b) => b.toString(16).padStart(2, "0")).join(" ");
  throw invalid(
    `Cannot decode image: expected PNG or JPEG data, got ${bytes.length} bytes starting ${
      head || "(empty)"
    }`,
  );
}

/**
 * Resizes an RGB image bilinearly, sampling at pixel centres (like OpenCV's `INTER_LINEAR`).
 *
 * @param image The source.
 * @param width Target width.
 * @param height Target height.
 * @returns The resized image.
 */
export function resizeBilinear(image: RgbImage, width: number, height: number): RgbImage {
  const out = new Uint8Array(width * height * 3);
  const sx = image.width / width;
  const sy = image.height / height;
  const src = image.data;
  const stride = image.width * 3;
  for (let y = 0; y < height; y++) {
    const fy = Math.min(Math.max((y + 0.5) * sy - 0.5, 0), image.height - 1);
    const y0 = Math.floor(fy);
    const y1 = Math.min(y0 + 1, image.height - 1);
    const wy = fy - y0;
    for (let x = 0; x < width; x++) {
      const fx = Math.min(Math.max((x + 0.5) * sx - 0.5, 0), image.width - 1);
      const x0 = Math.floor(fx);
      const x1 = Math.min(x0 + 1, image.width - 1);
      const wx = fx - x0;
      const a = y0 * stride + x0 * 3;
      const b = y0 * stride + x1 * 3;
      const c = y1 * stride + x0 * 3;
      const d = y1 * stride + x1 * 3;
      const o = (y * width + x) * 3;
      for (let ch = 0; ch < 3; ch++) {
        const top = src[a + ch]! + (src[b + ch]! - src[a + ch]!) * wx;
        const bottom = src[c + ch]! + (src[d + ch]! - src[c + ch]!) * wx;
        out[o + ch] = Math.round(top + (bottom - top) * wy);
      }
    }
  }
  return { width, height, data: out };
}
