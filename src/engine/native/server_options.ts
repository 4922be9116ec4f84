/**
 * The Triton-core engine's options, and the `TRITONSERVER_ServerOptions` they become when the
 * core's in-process server is created: explicit model control over a temporary repository, our
 * backend directory, the pinned pool (only where there are GPUs), metrics, readiness, exit and log settings, and the
 * response cache.
 *
 * @module
 */

import { parseMetricsSetting } from "../../config/metrics_config.ts";
import type { GpuInventory } from "../../gpu/devices.ts";
import type { LogFormat } from "../../log.ts";
import type { CacheConfig, CommonEngineOptions } from "../engine.ts";
import type { CoreLibrary } from "./ffi.ts";
import type { TritonInstall } from "./install.ts";
import { check, cString, pointerOf } from "./status.ts";

/** Options of {@linkcode NativeEngine}: the options both engines take, and the core's own. */
export interface NativeEngineOptions extends CommonEngineOptions {
  /**
   * Whether the core exits when a model fails to load while it starts (the facade loads
   * models after start, so this matters only to the core's own start-up).
   *
   * @default {true}
   */
  exitOnError?: boolean;
  /**
   * Where the core's log lines go when the engine has no `logger` (they go through the logger
   * otherwise, `core_log.ts`); stderr when undefined too. `createServer` points the core at it.
   *
   * @default {undefined}
   */
  logFile?: string;
  /**
   * Triton's verbose log level.
   *
   * @default {0}
   */
  logVerbose?: number;
  /**
   * Whether Triton logs info messages (its start-up tables and load/unload lines).
   *
   * @default {false}
   */
  logInfo?: boolean;
  /**
   * The install to use.
   *
   * @default {the install found in the default home}
   */
  install?: TritonInstall;
}

const MODEL_CONTROL_EXPLICIT = 2;
/** `tritonserver`'s `--pinned-memory-pool-byte-size` default. */
const DEFAULT_PINNED_POOL_BYTES = 268435456;

/** `TRITONSERVER_LogFormat` values. */
export const LOG_FORMAT_CODES: Readonly<Record<LogFormat, number>> = { default: 0, ISO8601: 1 };

/**
 * Creates a `TRITONSERVER_ServerOptions`; delete it with {@linkcode deleteServerOptions}.
 *
 * @param core The core library.
 * @returns The options object.
 * @throws {InferenceError} When the core cannot create it.
 */
export function newServerOptions(core: CoreLibrary): Deno.PointerValue {
  const slot = new BigUint64Array(1);
  check(core, core.TRITONSERVER_ServerOptionsNew(slot));
  return pointerOf(slot);
}

/**
 * Deletes a `TRITONSERVER_ServerOptions` (a failure to do so is ignored: nothing is left to do).
 *
 * @param core The core library.
 * @param options The options object.
 */
export function deleteServerOptions(core: CoreLibrary, options: Deno.PointerValue): void {
  const failure = core.TRITONSERVER_ServerOptionsDelete(options);
  if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
}

/** The cache the options ask for: `cacheConfig`, or the local cache of the given size. */
function cacheOf(options: NativeEngineOptions): CacheConfig | undefined {
  if (options.cacheConfig !== undefined) return options.cacheConfig;
  const size = options.responseCacheByteSize ?? 0;
  return size > 0 ? { name: "local", config: { size: String(size) } } : undefined;
}

/**
 * Creates the core's in-process server.
 *
 * @param core The core library.
 * @param install The install (backend and cache directories).
 * @param repository The temporary model repository.
 * @param options The engine's options.
 * @param gpus The host's GPUs (the pinned pool and GPU metrics default on where there are any).
 * @returns The `TRITONSERVER_Server*`.
 * @throws {InferenceError} When an option is refused or the server cannot start (the core's
 *   message).
 */
export async function createServer(
  core: CoreLibrary,
  install: TritonInstall,
  repository: string,
  options: NativeEngineOptions,
  gpus: GpuInventory,
): Promise<Deno.PointerValue> {
  const o = options;
  const handle = newServerOptions(core);
  try {
    const set = (error: Deno.PointerValue): void =>
      check(core, error, "Cannot set a Triton server option");
    set(core.TRITONSERVER_ServerOptionsSetServerId(handle, cString(o.id ?? "triton")));
    set(core.TRITONSERVER_ServerOptionsSetModelRepositoryPath(handle, cString(repository)));
    set(core.TRITONSERVER_ServerOptionsSetModelControlMode(handle, MODEL_CONTROL_EXPLICIT));
    set(core.TRITONSERVER_ServerOptionsSetStrictModelConfig(handle, true));
    set(
      core.TRITONSERVER_ServerOptionsSetBackendDirectory(handle, cString(install.backendDirectory)),
    );
    set(core.TRITONSERVER_ServerOptionsSetRepoAgentDirectory(handle, cString(repository)));
    // tritonserver's defaults where there are GPUs; without them a pinned pool would only make
    // the core try cudaHostAlloc, and GPU metrics start DCGM, which only warns.
    const hasGpus = gpus.devices.length > 0;
    set(core.TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize(
      handle,
      BigInt(o.pinnedMemoryPoolByteSize ?? (hasGpus ? DEFAULT_PINNED_POOL_BYTES : 0)),
    ));
    // Off, the core counts nothing for its models (process-wide: once a core in this process
    // turned metrics on, they stay on).
    set(core.TRITONSERVER_ServerOptionsSetMetrics(handle, o.metrics ?? true));
    set(core.TRITONSERVER_ServerOptionsSetGpuMetrics(handle, o.gpuMetrics ?? hasGpus));
    set(core.TRITONSERVER_ServerOptionsSetCpuMetrics(handle, o.cpuMetrics ?? false));
    set(core.TRITONSERVER_ServerOptionsSetMetricsInterval(
      handle,
      BigInt(o.metricsIntervalMs ?? 2000),
    ));
    for (const entry of o.metricsConfig ?? []) {
      const { group, setting, value } = parseMetricsSetting(entry);
      set(core.TRITONSERVER_ServerOptionsSetMetricsConfig(
        handle,
        cString(group),
        cString(setting),
        cString(value),
      ));
    }
    set(core.TRITONSERVER_ServerOptionsSetStrictReadiness(handle, o.strictReadiness ?? true));
    set(core.TRITONSERVER_ServerOptionsSetExitTimeout(handle, o.exitTimeoutSecs ?? 30));
    set(core.TRITONSERVER_ServerOptionsSetExitOnError(handle, o.exitOnError ?? true));
    // A failed load must fail at once: a retry would find no free slots on its channel.
    set(core.TRITONSERVER_ServerOptionsSetModelLoadRetryCount(handle, 0));
    set(core.TRITONSERVER_ServerOptionsSetLogInfo(handle, o.logInfo ?? false));
    set(core.TRITONSERVER_ServerOptionsSetLogWarn(handle, true));
    set(core.TRITONSERVER_ServerOptionsSetLogError(handle, true));
    set(core.TRITONSERVER_ServerOptionsSetLogVerbose(handle, o.logVerbose ?? 0));
    // The format is process-wide: an earlier server in this process may have changed it.
    set(core.TRITONSERVER_ServerOptionsSetLogFormat(
      handle,
      LOG_FORMAT_CODES[o.logger?.settings.format ?? "default"],
    ));
    if (o.logFile !== undefined) {
      set(core.TRITONSERVER_ServerOptionsSetLogFile(handle, cString(o.logFile)));
    }
    const cache = cacheOf(o);
    if (cache !== undefined) {
      set(
        core.TRITONSERVER_ServerOptionsSetCacheDirectory(handle, cString(install.cacheDirectory)),
      );
      set(core.TRITONSERVER_ServerOptionsSetCacheConfig(
        handle,
        cString(cache.name),
        cString(JSON.stringify(cache.config)),
      ));
    }
    const slot = new BigUint64Array(1);
    check(core, await core.TRITONSERVER_ServerNew(slot, handle), "Cannot start the Triton server");
    return pointerOf(slot);
  } finally {
    deleteServerOptions(core, handle);
  }
}
