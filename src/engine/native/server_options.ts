/**
 * The Triton-core engine's options, and the `TRITONSERVER_ServerOptions` they become when the
 * core's in-process server is created: explicit model control over a temporary repository, our
 * backend and cache directories, the pinned pool (only where there are GPUs), metrics,
 * readiness, exit and log settings, and the response cache. The server is created through the
 * bridge, which serializes it with the rest of the process's core calls (`ffi/dt_server.c`).
 *
 * @module
 */

import { parseMetricsSetting } from "../../config/metrics_config.ts";
import type { GpuInventory } from "../../gpu/devices.ts";
import type { LogFormat } from "../../log.ts";
import type { CacheConfig, CommonEngineOptions } from "../engine.ts";
import type { CoreLibrary, NativeLibraries } from "../../native/ffi.ts";
import type { TritonInstall } from "../../setup/install.ts";
import { InferenceError } from "../../errors.ts";
import { check, cString, pointerOf, takeError } from "./status.ts";

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
   * otherwise, `core_log.ts`): the engine's own logger writes them there; stderr when undefined.
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

/** The core's words when the process's one response cache is taken (`cache_manager.cc`). */
const CACHE_TAKEN = "TritonCacheManager already holds a cache";

/** Where {@linkcode createServer}'s server lives: its install, repository, GPUs and log. */
export interface ServerSetup {
  /** The install (backend and cache directories). */
  readonly install: TritonInstall;
  /** The temporary model repository. */
  readonly repository: string;
  /** The host's GPUs (the pinned pool and GPU metrics default on where there are any). */
  readonly gpus: GpuInventory;
  /**
   * The bridge's log target of the engine (`CoreLog.target`): the core's lines while the server
   * starts go there; 0n leaves the core's log where it is.
   *
   * @default {0n}
   */
  readonly logTarget?: bigint;
}

/**
 * Creates the core's in-process server.
 *
 * @param libraries The core and the bridge.
 * @param options The engine's options.
 * @param setup The install, the temporary model repository, the host's GPUs and the log target.
 * @returns The `TRITONSERVER_Server*`.
 * @throws {InferenceError} When an option is refused or the server cannot start (the core's
 *   message); UNAVAILABLE when another server of this process holds the core's one response
 *   cache.
 */
export async function createServer(
  libraries: NativeLibraries,
  options: NativeEngineOptions,
  setup: ServerSetup,
): Promise<Deno.PointerValue> {
  const { install, repository, gpus, logTarget = 0n } = setup;
  const { core, bridge } = libraries;
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
    // The core's log file is set by CoreLog through the bridge, which keeps the process's
    // targets: a file set here would take the log from the engines of other isolates.
    // The directory even without a cache: the first server alive in the process creates the
    // core's one cache manager with its directory, and a later server's cache is looked for
    // there (with the core's default, /opt/tritonserver/caches, it is not found).
    set(core.TRITONSERVER_ServerOptionsSetCacheDirectory(handle, cString(install.cacheDirectory)));
    const cache = cacheOf(o);
    if (cache !== undefined) {
      set(core.TRITONSERVER_ServerOptionsSetCacheConfig(
        handle,
        cString(cache.name),
        cString(JSON.stringify(cache.config)),
      ));
    }
    const slot = new BigUint64Array(1);
    const failure = takeError(
      core,
      await bridge.dt_server_new(slot, handle, logTarget),
      "Cannot start the Triton server",
    );
    if (failure?.message.endsWith(CACHE_TAKEN)) {
      throw InferenceError.unavailable(
        `Cannot start the Triton server with a response cache: the Triton core holds one response cache per process, and another server of this process holds it (it stays taken until no Triton-engine server is left in the process); stop the other Triton-engine servers of this process first, or serve this one from a process of its own`,
        { cause: failure },
      );
    }
    if (failure !== undefined) throw failure;
    return pointerOf(slot);
  } finally {
    deleteServerOptions(core, handle);
  }
}
