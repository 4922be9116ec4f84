/**
 * The core's log lines, forwarded through the server's {@linkcode Logger} with their levels, so
 * they go where ours go (stderr, the log file, a notebook cell) in one format. The core writes
 * them to a temporary regular file (`TRITONSERVER_ServerOptionsSetLogFile`); this side reads
 * what was added now and then, and after each engine step. A regular file never blocks the
 * core's writers, whatever this side does (a FIFO would, once full), and needs no thread. Past
 * {@linkcode ROTATE_BYTES} the core is pointed at a fresh file and the old one is read to its
 * end and removed, so the file stays small.
 *
 * The core's log target is process-wide, across isolates too (several test files of
 * `deno test --parallel`, Workers): the bridge keeps the targets of the whole process
 * (`ffi/dt_server.c`). The latest engine's file receives the lines of every core server in the
 * process, except while a server is created or a model is loaded, when the engine doing it
 * receives them (so a failed load's reasons reach the engine that loads); when an engine stops,
 * the previous engine's file takes over again.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { type LibcLibrary, type NativeLibraries, openLibc } from "../../native/ffi.ts";
import { check, cString } from "./status.ts";

/** The size past which the core is pointed at a fresh file. */
export const ROTATE_BYTES = 1 << 20;

/** How often new lines are looked for between engine steps, in milliseconds. */
const POLL_MS = 250;

/** One record of the core's log: a prefixed line and the lines that continue it (a table). */
export interface CoreLogRecord {
  /** `E`, `W`, `I` or `V`. */
  readonly level: string;
  /** The source location, e.g. `server.cc:241`. */
  readonly location: string;
  /** The message, unquoted when the core quoted it. */
  readonly message: string;
}

/**
 * Core lines that are known to be harmless, demoted to verbose level 1 (they show with
 * `logVerbose >= 1`) so a first run shows only lines that mean something.
 */
export const HARMLESS_CORE_LINES: readonly { readonly pattern: RegExp; readonly why: string }[] = [
  {
    pattern: /^CudaDriverHelper has not been initialized\.?$/,
    why:
      "the core asks the CUDA driver at start and logs this where there is none (a CPU host); GPU discovery reports what DenoTriton found, and no instance is placed on a GPU without one",
  },
  {
    pattern:
      /^unable to create stream for .+: CUDA driver version is insufficient for CUDA runtime version$/,
    why:
      "logged at each ensemble's load where there is no usable CUDA driver (a CPU host): the ensemble's CUDA stream only serves copies of GPU tensors between its steps, and there are none",
  },
  {
    pattern:
      /^failed to allocate pinned system memory: no pinned memory pool, falling back to non-pinned system memory$/,
    why:
      "logged by an ensemble's first requests where the pinned pool has 0 bytes (pinnedMemoryPoolByteSize's default without GPUs): the tensors between its steps then live in plain memory, which serves as well without GPUs",
  },
  {
    pattern: /^Failed to set config modification time: model_config_content_name_ is empty$/,
    why:
      "logged at each load of a model whose config comes as a parameter, not a file: the time only serves to notice a changed config file when polling the repository, which DenoTriton never does",
  },
];

// `E1123 13:58:02.362457 8613 server.cc:241] "text"` and, ISO8601,
// `2026-11-23T13:58:02Z E 8613 server.cc:241] "text"`.
const DEFAULT_LINE = /^([EWIV])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ([^\]\s]+)\] ?(.*)$/;
const ISO_LINE = /^\d{4}-\d\d-\d\dT\S+ ([EWIV]) +\d+ ([^\]\s]+)\] ?(.*)$/;

function unquote(text: string): string {
  if (text.length >= 2 && text.startsWith('"') && text.endsWith('"')) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed === "string") return parsed;
    } catch {
      // Not JSON after all: keep the text as the core wrote it.
    }
  }
  return text;
}

/**
 * Splits the core's log text into records. A line that does not start like a core line
 * continues the record before it (the core's tables span lines); one with no record before it
 * is a record of level `I` without location.
 *
 * @param text Complete lines of the core's log.
 * @returns The records, in order.
 *
 * @example Split an error line and a multi-line table
 * ```ts
 * import { parseCoreLog } from "./core_log.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(
 *   parseCoreLog('E1123 13:58:02.362457 8613 server.cc:241] "Not initialized."\nI1123 13:58:02.4 8613 server.cc:604] \n+---+\n| a |\n\n'),
 *   [
 *     { level: "E", location: "server.cc:241", message: "Not initialized." },
 *     { level: "I", location: "server.cc:604", message: "+---+\n| a |" },
 *   ],
 * );
 * ```
 */
export function parseCoreLog(text: string): CoreLogRecord[] {
  const records: { level: string; location: string; lines: string[] }[] = [];
  for (const line of text.split("\n")) {
    const match = DEFAULT_LINE.exec(line) ?? ISO_LINE.exec(line);
    if (match !== null) {
      records.push({ level: match[1]!, location: match[2]!, lines: [match[3]!] });
    } else if (records.length > 0) {
      records.at(-1)!.lines.push(line);
    } else if (line.trim() !== "") {
      records.push({ level: "I", location: "", lines: [line] });
    }
  }
  return records.map(({ level, location, lines }) => ({
    level,
    location,
    message: unquote(lines.join("\n").trim()),
  }));
}

/**
 * Logs one core record through the logger at its level, or at verbose level 1 when it is
 * {@linkcode HARMLESS_CORE_LINES known to be harmless}.
 *
 * @param logger The server's logger.
 * @param record The record.
 *
 * @example Forward a warning; a known start-up error goes to verbose
 * ```ts
 * import { forwardCoreRecord } from "./core_log.ts";
 * import { Logger } from "../../log.ts";
 * import assert from "node:assert/strict";
 *
 * const file = await Deno.makeTempFile();
 * const logger = new Logger({ file, prefix: "t" });
 * forwardCoreRecord(logger, { level: "W", location: "a.cc:1", message: "careful" });
 * forwardCoreRecord(logger, {
 *   level: "E",
 *   location: "server.cc:241",
 *   message: "CudaDriverHelper has not been initialized.",
 * });
 * logger.close();
 * assert.match(await Deno.readTextFile(file), /^W\S+ \S+ t\] Triton core \(a\.cc:1\): careful\n$/);
 * ```
 */
export function forwardCoreRecord(logger: Logger, record: CoreLogRecord): void {
  const text = `Triton core${
    record.location === "" ? "" : ` (${record.location})`
  }: ${record.message}`;
  if (HARMLESS_CORE_LINES.some(({ pattern }) => pattern.test(record.message))) {
    logger.debug(1, text);
    return;
  }
  switch (record.level) {
    case "E":
      return logger.error(text);
    case "W":
      return logger.warn(text);
    case "V":
      return logger.debug(1, text);
    default:
      return logger.info(text);
  }
}

/** The records a {@linkcode CoreLog.watch} collected. */
export interface CoreLogWatch extends Disposable {
  /** The records forwarded since the watch began. */
  readonly records: readonly CoreLogRecord[];
}

/**
 * Adds what the core logged about a model's failed load to the load's error: the core's answer
 * to a load is often only `failed to poll from model repository`, and the reason is in its log.
 *
 * @param error The load's error.
 * @param name The model name.
 * @param records The core's records during the load.
 * @returns The error, with the core's error and warning lines that name the model appended.
 *
 * @example Add the core's reason for this model only
 * ```ts
 * import { withCoreReasons } from "./core_log.ts";
 * import { InferenceError } from "../../errors.ts";
 * import assert from "node:assert/strict";
 *
 * const error = withCoreReasons(InferenceError.internal("failed to load 'm'"), "m", [
 *   { level: "E", location: "a.cc:1", message: "Poll failed for model directory 'm': bad" },
 *   { level: "E", location: "a.cc:1", message: "Poll failed for model directory 'other': bad" },
 * ]);
 * assert.equal(
 *   (error as Error).message,
 *   "failed to load 'm' (the Triton core: Poll failed for model directory 'm': bad)",
 * );
 * ```
 */
export function withCoreReasons(
  error: unknown,
  name: string,
  records: readonly CoreLogRecord[],
): unknown {
  const reasons = records
    .filter((record) =>
      (record.level === "E" || record.level === "W") && record.message.includes(`'${name}'`) &&
      !HARMLESS_CORE_LINES.some(({ pattern }) => pattern.test(record.message))
    )
    .map((record) => record.message);
  if (!(error instanceof InferenceError) || reasons.length === 0) return error;
  return new InferenceError(`${error.message} (the Triton core: ${reasons.join("; ")})`, {
    code: error.code,
    cause: error,
  });
}

/** Options of {@linkcode CoreLog.open}. */
export interface CoreLogOptions {
  /**
   * The size past which the core is pointed at a fresh file.
   *
   * @default {ROTATE_BYTES}
   */
  rotateBytes?: number;
}

/** `O_RDONLY | O_CLOEXEC` (Linux): child processes do not inherit the descriptor. */
const READ_ONLY = 0o2000000;

function openForReading(path: string): number {
  const fd = openLibc().open(cString(path), READ_ONLY);
  if (fd < 0) throw new Error(`Cannot open the Triton core's log file ${path}`);
  return fd;
}

/**
 * Forwards the core's log to a {@linkcode Logger}: created before the core's server, disposed
 * after it is deleted.
 *
 * @example Forward, then stop
 * ```ts ignore
 * import { CoreLog } from "./core_log.ts";
 *
 * using log = await CoreLog.open(libraries, logger);
 * const server = await createServer(libraries, options, {
 *   install,
 *   repository,
 *   gpus,
 *   logTarget: log.target,
 * });
 * log.drain(); // after each step, to keep the order of our lines and the core's
 * ```
 */
export class CoreLog implements Disposable {
  #libraries: NativeLibraries;
  /** The bridge's id of this forwarder's target (0 once disposed). */
  #target = 0n;
  #logger: Logger;
  #path: string;
  #libc: LibcLibrary;
  /** The file's descriptor, read through the C library (see `LIBC_SYMBOLS`). */
  #fd: number;
  /** An incomplete last line, kept until its end arrives. */
  #partial = "";
  /** Where each read lands: reads are synchronous, so one buffer serves them all. */
  #buffer = new Uint8Array(64 * 1024);
  #read = 0;
  #timer: ReturnType<typeof setInterval>;
  #rotateBytes: number;
  #decoder = new TextDecoder();
  /** The record lists of the watches in progress. */
  #watches = new Set<CoreLogRecord[]>();

  private constructor(
    libraries: NativeLibraries,
    logger: Logger,
    file: { readonly path: string; readonly fd: number; readonly rotateBytes: number },
  ) {
    this.#libc = openLibc();
    this.#fd = file.fd;
    this.#libraries = libraries;
    this.#rotateBytes = file.rotateBytes;
    this.#logger = logger;
    this.#path = file.path;
    this.#timer = setInterval(() => this.drain(), POLL_MS);
    // Forwarding must never keep a process alive.
    Deno.unrefTimer(this.#timer as unknown as number);
  }

  /**
   * Creates the file and registers it with the bridge as the core's newest log target.
   *
   * @param libraries The core and the bridge.
   * @param logger Where the lines go.
   * @param options The size past which the file is replaced.
   * @returns The forwarder.
   * @throws {Deno.errors.NotCapable} Without write access to the temporary directory.
   */
  static async open(
    libraries: NativeLibraries,
    logger: Logger,
    options: CoreLogOptions = {},
  ): Promise<CoreLog> {
    const path = await Deno.makeTempFile({ prefix: "denotriton-core-log-" });
    let log: CoreLog | undefined;
    try {
      log = new CoreLog(libraries, logger, {
        path,
        fd: openForReading(path),
        rotateBytes: options.rotateBytes ?? ROTATE_BYTES,
      });
      const id = new BigUint64Array(1);
      check(
        libraries.core,
        libraries.bridge.dt_log_open(cString(path), id),
        "Cannot set the Triton core's log file",
      );
      log.#target = id[0]!;
    } catch (error) {
      if (log === undefined) await Deno.remove(path).catch(() => {});
      else log.#close();
      throw error;
    }
    return log;
  }

  /** The bridge's id of this forwarder's target: a load or start points the core at it. */
  get target(): bigint {
    return this.#target;
  }

  /** This forwarder's file (the core writes there while it is the newest target, or borrowed). */
  get path(): string {
    return this.#path;
  }

  /** Forwards every complete line the core has added; rotates the file once it is large. */
  drain(): void {
    try {
      this.#readAll();
      if (this.#read >= this.#rotateBytes && this.#target !== 0n) this.#rotate();
    } catch (error) {
      // Forwarding runs on a timer too: it must never throw into serving.
      this.#logger.warn(`Cannot read the Triton core's log: ${(error as Error).message}`);
    }
  }

  #readAll(): void {
    const buffer = this.#buffer;
    let text = this.#partial;
    for (;;) {
      // A log that cannot be read (-1) must never break serving: it ends the reading.
      const count = Number(this.#libc.read(this.#fd, buffer, BigInt(buffer.byteLength)));
      if (count <= 0) break;
      this.#read += count;
      text += this.#decoder.decode(buffer.subarray(0, count), { stream: true });
    }
    const end = text.lastIndexOf("\n");
    this.#partial = text.slice(end + 1);
    if (end < 0) return;
    this.#forward(parseCoreLog(text.slice(0, end + 1)));
  }

  #forward(records: readonly CoreLogRecord[]): void {
    for (const record of records) {
      forwardCoreRecord(this.#logger, record);
      for (const seen of this.#watches) seen.push(record);
    }
  }

  /**
   * Collects the records forwarded from now until the watch is disposed (a load's, say).
   *
   * @returns The watch: its `records` grow as lines are forwarded.
   */
  watch(): CoreLogWatch {
    const records: CoreLogRecord[] = [];
    this.#watches.add(records);
    return { records, [Symbol.dispose]: () => this.#watches.delete(records) };
  }

  #rotate(): void {
    const path = Deno.makeTempFileSync({ prefix: "denotriton-core-log-" });
    let fd: number;
    try {
      fd = openForReading(path);
      check(
        this.#libraries.core,
        this.#libraries.bridge.dt_log_move(this.#target, cString(path)),
        "Cannot set the Triton core's log file",
      );
    } catch (error) {
      Deno.removeSync(path);
      throw error;
    }
    // The core writes to the new file from now on: read the old one to its end.
    this.#readAll();
    this.#closeFile();
    this.#path = path;
    this.#fd = fd;
    this.#read = 0;
  }

  #closeFile(): void {
    if (this.#fd >= 0) this.#libc.close(this.#fd);
    this.#fd = -1;
    try {
      Deno.removeSync(this.#path);
    } catch {
      // Removed already.
    }
  }

  #close(): void {
    clearInterval(this.#timer);
    this.#closeFile();
  }

  /**
   * Forwards what is left and stops; the core's lines go to the previous forwarder of the
   * process, or to stderr when there is none.
   */
  [Symbol.dispose](): void {
    if (this.#target === 0n) return;
    this.#libraries.bridge.dt_log_close(this.#target);
    this.#target = 0n;
    this.#readAll();
    if (this.#partial !== "") this.#forward(parseCoreLog(this.#partial));
    this.#close();
  }
}
