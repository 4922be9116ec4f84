/**
 * Keeps the core's log settings in step with the server's {@linkcode Logger}: each change made
 * through `/v2/logging` or gRPC `LogSettings` is applied to the core. The core's log settings
 * are process-wide and settable only through server options (Triton's own `/v2/logging` handler
 * calls the same setters), so a throwaway options object carries them. Only what changed is
 * applied: the core's info logging stays off until it is asked for.
 *
 * @module
 */

import type { Logger, LogSettingsChange } from "../../log.ts";
import type { CoreLibrary } from "../../native/ffi.ts";
import { deleteServerOptions, LOG_FORMAT_CODES, newServerOptions } from "./server_options.ts";
import { check } from "./status.ts";

/**
 * Applies one change of the logger's settings to the core.
 *
 * @param core The core library.
 * @param change What changed.
 * @throws {InferenceError} When the core refuses a setting.
 */
export function applyLogChange(core: CoreLibrary, change: LogSettingsChange): void {
  const options = newServerOptions(core);
  try {
    const set = (error: Deno.PointerValue): void =>
      check(core, error, "Cannot change the Triton core's log settings");
    if (change.info !== undefined) {
      set(core.TRITONSERVER_ServerOptionsSetLogInfo(options, change.info));
    }
    if (change.warning !== undefined) {
      set(core.TRITONSERVER_ServerOptionsSetLogWarn(options, change.warning));
    }
    if (change.error !== undefined) {
      set(core.TRITONSERVER_ServerOptionsSetLogError(options, change.error));
    }
    if (change.verbose !== undefined) {
      set(core.TRITONSERVER_ServerOptionsSetLogVerbose(options, change.verbose));
    }
    if (change.format !== undefined) {
      set(core.TRITONSERVER_ServerOptionsSetLogFormat(options, LOG_FORMAT_CODES[change.format]));
    }
  } finally {
    deleteServerOptions(core, options);
  }
}

/**
 * Applies every later change of `logger`'s settings to the core.
 *
 * @param core The core library.
 * @param logger The server's logger.
 * @returns Disposing it stops following the logger.
 */
export function bridgeLogSettings(core: CoreLibrary, logger: Logger): Disposable {
  return logger.onChange((change) => applyLogChange(core, change));
}
