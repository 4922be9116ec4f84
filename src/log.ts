/**
 * DenoTriton's one logger. Messages go to stderr, or to `logFile` when configured; verbose
 * messages appear only at `logVerbose >= level`.
 *
 * @module
 */

/** Logger settings. */
export interface LoggerOptions {
  /**
   * Verbosity: 0 logs info/warn/error only; higher levels add verbose messages.
   *
   * @default {0}
   */
  verbose?: number;
  /**
   * A file to append log lines to instead of stderr.
   *
   * @default {undefined}
   */
  file?: string;
  /**
   * A prefix naming the server, e.g. its id.
   *
   * @default {"denotriton"}
   */
  prefix?: string;
}

const encoder = new TextEncoder();

/**
 * A small levelled logger writing one line per message.
 *
 * @example Log to a file
 * ```ts
 * import { Logger } from "./log.ts";
 * import assert from "node:assert/strict";
 *
 * const file = await Deno.makeTempFile();
 * const log = new Logger({ file });
 * log.info("hello");
 * log.close();
 * assert.match(await Deno.readTextFile(file), /I .*hello/);
 * await Deno.remove(file);
 * ```
 */
export class Logger {
  #verbose: number;
  #prefix: string;
  #file: Deno.FsFile | undefined;

  /**
   * Creates a logger.
   *
   * @param options Verbosity, file and prefix.
   */
  constructor(options: LoggerOptions = {}) {
    this.#verbose = options.verbose ?? 0;
    this.#prefix = options.prefix ?? "denotriton";
    this.#file = options.file === undefined
      ? undefined
      : Deno.openSync(options.file, { append: true, create: true });
  }

  /** The verbosity level. */
  get verbose(): number {
    return this.#verbose;
  }

  set verbose(level: number) {
    this.#verbose = level;
  }

  #write(level: string, message: string): void {
    const line = `${level} ${new Date().toISOString()} ${this.#prefix}] ${message}\n`;
    const bytes = encoder.encode(line);
    try {
      if (this.#file) this.#file.writeSync(bytes);
      else Deno.stderr.writeSync(bytes);
    } catch {
      // A closed stderr or file must never break serving.
    }
  }

  /**
   * Logs an informational message.
   *
   * @param message The message.
   */
  info(message: string): void {
    this.#write("I", message);
  }

  /**
   * Logs a warning.
   *
   * @param message The message.
   */
  warn(message: string): void {
    this.#write("W", message);
  }

  /**
   * Logs an error.
   *
   * @param message The message.
   */
  error(message: string): void {
    this.#write("E", message);
  }

  /**
   * Logs a verbose message when verbosity is at least `level`.
   *
   * @param level The needed verbosity.
   * @param message The message, or a function building it (only called when logged).
   */
  debug(level: number, message: string | (() => string)): void {
    if (this.#verbose >= level) this.#write("V", typeof message === "string" ? message : message());
  }

  /** Closes the log file, if any. */
  close(): void {
    this.#file?.close();
    this.#file = undefined;
  }
}
