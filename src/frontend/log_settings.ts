/**
 * The logging extension shared by both front ends: the log settings in Triton's names
 * (`log_file`, `log_info`, `log_warning`, `log_error`, `log_verbose_level`, `log_format`, as
 * Triton 2.51 answers them), read from and applied to the server's {@linkcode Logger}.
 * HTTP `/v2/logging` carries them as JSON values, gRPC `LogSettings` as typed `SettingValue`s;
 * both convert to plain values and come here, so they validate and answer alike.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import { LOG_FORMATS, type LogFormat, type Logger, type LogSettingsChange } from "../log.ts";

/** The log settings as the logging extension names them. */
export interface TritonLogSettings {
  /** The log file; empty when logging to stderr. */
  log_file: string;
  /** Whether info messages are logged. */
  log_info: boolean;
  /** Whether warnings are logged. */
  log_warning: boolean;
  /** Whether errors are logged. */
  log_error: boolean;
  /** The verbose level; 0 logs no verbose messages. */
  log_verbose_level: number;
  /** The line layout. */
  log_format: LogFormat;
}

/** The value type of a setting, which gRPC carries as `bool_param`, `uint32_param` or `string_param`. */
export type LogSettingKind = "bool" | "uint32" | "string";

/** Every log setting and its value type, in the order responses list them. */
export const LOG_SETTING_KINDS: Readonly<Record<keyof TritonLogSettings, LogSettingKind>> = {
  log_file: "string",
  log_info: "bool",
  log_warning: "bool",
  log_error: "bool",
  log_verbose_level: "uint32",
  log_format: "string",
};

// The wire's field is a uint32, but the Triton core takes the level as a C int: a level it
// cannot hold is refused here, on both engines, before the logger or the core changes.
const MAX_VERBOSE_LEVEL = 2 ** 31 - 1;

/** The logger setting behind each on/off setting. */
const SWITCHES = { log_info: "info", log_warning: "warning", log_error: "error" } as const;

/**
 * The logger's settings in the extension's names.
 *
 * @param logger The server's logger.
 * @returns The settings.
 *
 * @example Defaults
 * ```ts
 * import { tritonLogSettings } from "./log_settings.ts";
 * import { Logger } from "../log.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(tritonLogSettings(new Logger()), {
 *   log_file: "",
 *   log_info: true,
 *   log_warning: true,
 *   log_error: true,
 *   log_verbose_level: 0,
 *   log_format: "default",
 * });
 * ```
 */
export function tritonLogSettings(logger: Logger): TritonLogSettings {
  const { file, info, warning, error, verbose, format } = logger.settings;
  return {
    log_file: file ?? "",
    log_info: info,
    log_warning: warning,
    log_error: error,
    log_verbose_level: verbose,
    log_format: format,
  };
}

function toChange(changes: Readonly<Record<string, unknown>>): LogSettingsChange {
  const change: { -readonly [K in keyof LogSettingsChange]: LogSettingsChange[K] } = {};
  for (const [name, value] of Object.entries(changes)) {
    if (!Object.hasOwn(LOG_SETTING_KINDS, name)) {
      throw InferenceError.invalidArg(
        `Unknown log setting '${name}': expected one of ${
          Object.keys(LOG_SETTING_KINDS).join(", ")
        }`,
      );
    }
    // Like Triton, a null leaves the setting as it is.
    if (value === null || value === undefined) continue;
    const setting = name as keyof TritonLogSettings;
    switch (setting) {
      case "log_file":
        if (typeof value !== "string") {
          throw InferenceError.invalidArg(`Invalid '${name}': expected a string`);
        }
        // Like Triton: a network peer must not choose where the server writes files.
        throw InferenceError.unsupported(
          "Cannot change 'log_file' over the network: set logFile in the server's TritonConfig",
        );
      case "log_info":
      case "log_warning":
      case "log_error":
        if (typeof value !== "boolean") {
          throw InferenceError.invalidArg(`Invalid '${name}': expected a boolean`);
        }
        change[SWITCHES[setting]] = value;
        break;
      case "log_verbose_level":
        if (
          typeof value !== "number" || !Number.isInteger(value) || value < 0 ||
          value > MAX_VERBOSE_LEVEL
        ) {
          throw InferenceError.invalidArg(
            `Invalid 'log_verbose_level': expected an integer from 0 to ${MAX_VERBOSE_LEVEL}`,
          );
        }
        change.verbose = value;
        break;
      case "log_format":
        if (typeof value !== "string" || !LOG_FORMATS.includes(value as LogFormat)) {
          throw InferenceError.invalidArg(
            `Invalid 'log_format' ${JSON.stringify(value)}: expected ${
              LOG_FORMATS.map((format) => JSON.stringify(format)).join(" or ")
            }`,
          );
        }
        change.format = value as LogFormat;
        break;
    }
  }
  return change;
}

/**
 * Validates and applies a logging-extension request: every named setting must exist and have
 * its type (or be null, which leaves it as it is), else nothing changes. `log_file` cannot
 * change over the network (Triton refuses it too).
 *
 * @param logger The server's logger; engines follow its changes.
 * @param changes The settings to change, by extension name, as plain values.
 * @returns The settings after the change.
 * @throws {InferenceError} `INVALID_ARG` for an unknown setting or a wrong value,
 *   `UNSUPPORTED` for `log_file`.
 *
 * @example Raise the verbose level
 * ```ts
 * import { changeLogSettings } from "./log_settings.ts";
 * import { Logger } from "../log.ts";
 * import assert from "node:assert/strict";
 *
 * const logger = new Logger();
 * assert.equal(changeLogSettings(logger, { log_verbose_level: 2 }).log_verbose_level, 2);
 * assert.equal(logger.verbose, 2);
 * assert.throws(() => changeLogSettings(logger, { log_info: "yes" }), {
 *   message: "Invalid 'log_info': expected a boolean",
 * });
 * ```
 */
export function changeLogSettings(
  logger: Logger,
  changes: Readonly<Record<string, unknown>>,
): TritonLogSettings {
  logger.update(toChange(changes));
  return tritonLogSettings(logger);
}
