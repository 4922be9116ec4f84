/**
 * DenoTriton's one logger. Messages go to stderr (in a Jupyter kernel, to the running cell's
 * stderr output), to `logFile` when configured, or to a logger of the user's own
 * ({@linkcode LogSink}); verbose messages appear only at `logVerbose >= level`. Its settings can change while serving (`/v2/logging`, gRPC
 * `LogSettings`); engines that log on their own follow them through
 * {@linkcode Logger.prototype.onChange}.
 *
 * @module
 */

import { inJupyterKernel, writeToCell } from "./jupyter.ts";

/**
 * Line layouts, named as Triton names them: `default` starts with the level letter and the
 * date (`I1122 12:47:48.123 prefix] message`), `ISO8601` with an ISO 8601 time
 * (`2026-11-22T12:47:48.123Z I prefix] message`).
 */
export type LogFormat = "default" | "ISO8601";

/** The log formats, in the order Triton documents them. */
export const LOG_FORMATS: readonly LogFormat[] = ["default", "ISO8601"];

/**
 * A logger of your own that DenoTriton's lines go to, instead of stderr or `logFile`: `console`,
 * or any object with these four methods (a `@std/log` logger, pino, winston, ...). Each line
 * arrives as its message alone (no time, level or server id: the logger adds its own), at its
 * level, once DenoTriton's own settings let it through (`logVerbose`, and what `/v2/logging`
 * turns on and off); the Triton core's lines and those of the HTTP threads come the same way.
 * The methods must not block; a line whose method throws is lost, and serving goes on.
 */
export interface LogSink {
  /** Receives an error line. */
  error(message: string): void;
  /** Receives a warning line. */
  warn(message: string): void;
  /** Receives an informational line. */
  info(message: string): void;
  /** Receives a verbose line (those of levels 1 to `logVerbose`). */
  debug(message: string): void;
}

/** The level of a line, as {@linkcode Logger.prototype.relay} takes it. */
export type LogLevel = "error" | "warning" | "info" | "verbose";

/** What a logger writes and where. */
export interface LogSettings {
  /** The file log lines are appended to; `undefined` means stderr. Fixed at construction. */
  readonly file: string | undefined;
  /** Whether info messages are written. */
  readonly info: boolean;
  /** Whether warnings are written. */
  readonly warning: boolean;
  /** Whether errors are written. */
  readonly error: boolean;
  /** Verbosity: verbose messages of level `1..verbose` are written; 0 writes none. */
  readonly verbose: number;
  /** The line layout. */
  readonly format: LogFormat;
}

/** A change of the settings that can change while serving (all but the file). */
export type LogSettingsChange = Partial<Omit<LogSettings, "file">>;

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
   * The line layout.
   *
   * @default {"default"}
   */
  format?: LogFormat;
  /**
   * A prefix naming the server, e.g. its id.
   *
   * @default {"denotriton"}
   */
  prefix?: string;
  /**
   * A logger of the user's own to hand each line to, instead of writing it (not with `file`).
   *
   * @default {undefined}
   */
  sink?: LogSink;
}

const encoder = new TextEncoder();

const LETTERS: Readonly<Record<LogLevel, string>> = {
  error: "E",
  warning: "W",
  info: "I",
  verbose: "V",
};

function checkChange(change: LogSettingsChange): void {
  const { verbose, format } = change;
  if (verbose !== undefined && (!Number.isInteger(verbose) || verbose < 0)) {
    throw new RangeError(`Cannot set log verbosity ${verbose}: expected a non-negative integer`);
  }
  if (format !== undefined && !LOG_FORMATS.includes(format)) {
    throw new RangeError(
      `Cannot set log format ${JSON.stringify(format)}: expected one of ${LOG_FORMATS.join(", ")}`,
    );
  }
}

const pad = (value: number, width = 2): string => String(value).padStart(width, "0");

function timestamp(level: string, format: LogFormat): string {
  const now = new Date();
  if (format === "ISO8601") return `${now.toISOString()} ${level}`;
  return `${level}${pad(now.getUTCMonth() + 1)}${pad(now.getUTCDate())} ` +
    `${pad(now.getUTCHours())}:${pad(now.getUTCMinutes())}:${pad(now.getUTCSeconds())}.` +
    pad(now.getUTCMilliseconds(), 3);
}

/**
 * A small levelled logger writing one line per message.
 *
 * @example Log to a file
 * ```ts
 * import { Logger } from "./log.ts";
 * import assert from "node:assert/strict";
 *
 * const file = await Deno.makeTempFile();
 * const log = new Logger({ file, prefix: "demo" });
 * log.info("hello");
 * log.update({ format: "ISO8601", info: false });
 * log.info("not written");
 * log.warn("careful");
 * log.close();
 * const lines = (await Deno.readTextFile(file)).trim().split("\n");
 * assert.equal(lines.length, 2);
 * assert.match(lines[0]!, /^I\d{4} \d\d:\d\d:\d\d\.\d{3} demo\] hello$/);
 * assert.match(lines[1]!, /^\d{4}-\d\d-\d\dT[\d:.]+Z W demo\] careful$/);
 * await Deno.remove(file);
 * ```
 *
 * @example Hand the lines to a logger of your own
 * ```ts
 * import { Logger } from "./log.ts";
 * import assert from "node:assert/strict";
 *
 * const lines: string[] = [];
 * const sink = {
 *   error: (message: string) => lines.push(`error: ${message}`),
 *   warn: (message: string) => lines.push(`warn: ${message}`),
 *   info: (message: string) => lines.push(`info: ${message}`),
 *   debug: (message: string) => lines.push(`debug: ${message}`),
 * };
 * const log = new Logger({ sink, verbose: 1 });
 * log.info("listening");
 * log.debug(1, "a request");
 * log.debug(2, "not written: above logVerbose");
 * log.update({ warning: false });
 * log.warn("not written: warnings are off");
 * log.error("failed");
 * assert.deepEqual(lines, ["info: listening", "debug: a request", "error: failed"]);
 * ```
 */
export class Logger {
  #settings: LogSettings;
  #prefix: string;
  #file: Deno.FsFile | undefined;
  #sink: LogSink | undefined;
  // A Jupyter kernel shows IOPub streams in the cell, not writes to Deno.stderr.
  #cell = inJupyterKernel();
  #sent: Promise<void> = Promise.resolve();
  #listeners = new Set<(change: LogSettingsChange) => void>();

  /**
   * Creates a logger.
   *
   * @param options Verbosity, file, format, prefix, or a logger of the user's own.
   * @throws {RangeError} When the verbosity or the format is invalid, or both a file and a sink
   *   are given.
   */
  constructor(options: LoggerOptions = {}) {
    const initial = { verbose: options.verbose ?? 0, format: options.format ?? "default" };
    checkChange(initial);
    if (options.sink !== undefined && options.file !== undefined) {
      throw new RangeError(`Cannot log both to the file ${options.file} and to a logger`);
    }
    this.#sink = options.sink;
    this.#settings = { file: options.file, info: true, warning: true, error: true, ...initial };
    this.#prefix = options.prefix ?? "denotriton";
    this.#file = options.file === undefined
      ? undefined
      : Deno.openSync(options.file, { append: true, create: true });
  }

  /** The verbosity level. */
  get verbose(): number {
    return this.#settings.verbose;
  }

  /** What each line names as its source, e.g. the server id. */
  get prefix(): string {
    return this.#prefix;
  }

  /** The current settings. */
  get settings(): LogSettings {
    return this.#settings;
  }

  /** Whether lines go to a logger of the user's own ({@linkcode LoggerOptions.sink}). */
  get hasSink(): boolean {
    return this.#sink !== undefined;
  }

  /**
   * Changes settings while serving and tells the {@linkcode Logger.prototype.onChange}
   * listeners.
   *
   * @param change The settings to change; the others stay.
   * @throws {RangeError} When the verbosity or the format is invalid; nothing changes then.
   */
  update(change: LogSettingsChange): void {
    checkChange(change);
    const defined = Object.fromEntries(
      Object.entries(change).filter(([, value]) => value !== undefined),
    ) as LogSettingsChange;
    // A read (an empty gRPC LogSettings, an empty POST) must not make listeners do work.
    if (Object.keys(defined).length === 0) return;
    this.#settings = { ...this.#settings, ...defined };
    for (const listener of this.#listeners) listener(defined);
  }

  /**
   * Calls `listener` with every later change of settings, until the returned handle is
   * disposed.
   *
   * @param listener Receives the changed settings only.
   * @returns A handle whose disposal stops the calls.
   *
   * @example Follow verbosity changes
   * ```ts
   * import { Logger } from "./log.ts";
   * import assert from "node:assert/strict";
   *
   * const log = new Logger();
   * const seen: unknown[] = [];
   * {
   *   using _subscription = log.onChange((change) => seen.push(change));
   *   log.update({ verbose: 2 });
   * }
   * log.update({ verbose: 0 });
   * assert.deepEqual(seen, [{ verbose: 2 }]);
   * ```
   */
  onChange(listener: (change: LogSettingsChange) => void): Disposable {
    this.#listeners.add(listener);
    return { [Symbol.dispose]: () => this.#listeners.delete(listener) };
  }

  #write(level: LogLevel, message: string): void {
    if (this.#sink !== undefined) {
      try {
        const sink = this.#sink;
        if (level === "error") sink.error(message);
        else if (level === "warning") sink.warn(message);
        else if (level === "info") sink.info(message);
        else sink.debug(message);
      } catch {
        // The user's logger failing must not break serving either.
      }
      return;
    }
    const line = `${timestamp(LETTERS[level], this.#settings.format)} ${this.#prefix}] ${message}`;
    try {
      if (this.#file) this.#file.writeSync(encoder.encode(`${line}\n`));
      else if (this.#cell) {
        // One send at a time: a refused send is tried again, and later lines must wait for it.
        this.#sent = this.#sent.then(() => writeToCell(`${line}\n`)).catch(() => {});
      } else Deno.stderr.writeSync(encoder.encode(`${line}\n`));
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
    if (this.#settings.info) this.#write("info", message);
  }

  /**
   * Logs a warning.
   *
   * @param message The message.
   */
  warn(message: string): void {
    if (this.#settings.warning) this.#write("warning", message);
  }

  /**
   * Logs an error.
   *
   * @param message The message.
   */
  error(message: string): void {
    if (this.#settings.error) this.#write("error", message);
  }

  /**
   * Logs a verbose message when verbosity is at least `level`.
   *
   * @param level The needed verbosity.
   * @param message The message, or a function building it (only called when logged).
   */
  debug(level: number, message: string | (() => string)): void {
    if (this.#settings.verbose >= level) {
      this.#write("verbose", typeof message === "string" ? message : message());
    }
  }

  /**
   * Writes a line that another logger with the same settings let through: an HTTP thread's,
   * which cannot call a sink of the main isolate itself.
   *
   * @param level The line's level.
   * @param message The message.
   */
  relay(level: LogLevel, message: string): void {
    this.#write(level, message);
  }

  /**
   * Resolves once every line logged so far has left the process. Only a Jupyter kernel sends
   * lines asynchronously; elsewhere it resolves at once.
   *
   * @returns A promise that never rejects.
   */
  flush(): Promise<void> {
    return this.#sent;
  }

  /** Closes the log file, if any. */
  close(): void {
    this.#file?.close();
    this.#file = undefined;
  }
}
