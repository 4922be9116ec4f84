/**
 * The one place DenoTriton calls `Deno.dlopen`: the Triton core (`libtritonserver-<hash>.so`,
 * after its bundled dependencies, leaves first), DenoTriton's own backend/bridge library, the
 * CUDA driver (`libcuda.so.1`, for GPU discovery, each GPU Worker's device, and the device memory
 * of CUDA shared memory and device tensors: `cuda_memory.ts`), and the C library
 * (`shm_open`/`mmap` for system shared memory). Libraries are opened once per isolate (module
 * state) and closed by Deno when that isolate ends (a Worker, a test file of `deno test`): the
 * core stays loaded while any isolate of the process holds it (the bridge's globals with it), and
 * is unloaded after the last one, once its servers were deleted (its own threads end then).
 *
 * It is the ground floor of the layers (ARCHITECTURE.md): the GPU discovery (`gpu/cuda.ts`), system
 * shared memory (`shm/system_region.ts`) and the Triton engine (`engine/native/`) open their
 * libraries through it, and it imports only the errors and where the install is (`setup/`).
 *
 * Functions that block while Triton waits for backend code (the bridge's `dt_server_new` and
 * `dt_server_load`, model unload, `ServerStop`, the bridge's `dt_server_delete`) and the
 * bridge's waits are declared `nonblocking`, so the event loop stays free to serve the batches
 * those calls wait for, and to wait for the bridge's process-wide lock.
 *
 * @module
 */

import { TritonError } from "../errors.ts";
import { setupCommand, type TritonInstall } from "../setup/install.ts";

const P = "pointer" as const;
const B = "buffer" as const;

/** The core symbols DenoTriton calls (TRITONSERVER API 1.34). */
export const CORE_SYMBOLS = {
  TRITONSERVER_ApiVersion: { parameters: [B, B], result: P },
  TRITONSERVER_ErrorCode: { parameters: [P], result: "i32" },
  TRITONSERVER_ErrorMessage: { parameters: [P], result: P },
  TRITONSERVER_ErrorDelete: { parameters: [P], result: "void" },
  TRITONSERVER_MessageSerializeToJson: { parameters: [P, B, B], result: P },
  TRITONSERVER_MessageDelete: { parameters: [P], result: P },
  TRITONSERVER_ParameterNew: { parameters: [B, "i32", B], result: P },
  TRITONSERVER_ParameterDelete: { parameters: [P], result: "void" },
  TRITONSERVER_ServerOptionsNew: { parameters: [B], result: P },
  TRITONSERVER_ServerOptionsDelete: { parameters: [P], result: P },
  TRITONSERVER_ServerOptionsSetServerId: { parameters: [P, B], result: P },
  TRITONSERVER_ServerOptionsSetModelRepositoryPath: { parameters: [P, B], result: P },
  TRITONSERVER_ServerOptionsSetModelControlMode: { parameters: [P, "i32"], result: P },
  TRITONSERVER_ServerOptionsSetStrictModelConfig: { parameters: [P, "bool"], result: P },
  TRITONSERVER_ServerOptionsSetBackendDirectory: { parameters: [P, B], result: P },
  TRITONSERVER_ServerOptionsSetRepoAgentDirectory: { parameters: [P, B], result: P },
  TRITONSERVER_ServerOptionsSetCacheConfig: { parameters: [P, B, B], result: P },
  TRITONSERVER_ServerOptionsSetCacheDirectory: { parameters: [P, B], result: P },
  TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize: { parameters: [P, "u64"], result: P },
  TRITONSERVER_ServerOptionsSetExitOnError: { parameters: [P, "bool"], result: P },
  TRITONSERVER_ServerOptionsSetStrictReadiness: { parameters: [P, "bool"], result: P },
  TRITONSERVER_ServerOptionsSetExitTimeout: { parameters: [P, "u32"], result: P },
  TRITONSERVER_ServerOptionsSetLogFile: { parameters: [P, B], result: P },
  TRITONSERVER_LogMessage: { parameters: ["i32", B, "i32", B], result: P },
  TRITONSERVER_ServerOptionsSetLogInfo: { parameters: [P, "bool"], result: P },
  TRITONSERVER_ServerOptionsSetLogWarn: { parameters: [P, "bool"], result: P },
  TRITONSERVER_ServerOptionsSetLogError: { parameters: [P, "bool"], result: P },
  TRITONSERVER_ServerOptionsSetLogVerbose: { parameters: [P, "i32"], result: P },
  TRITONSERVER_ServerOptionsSetLogFormat: { parameters: [P, "i32"], result: P },
  TRITONSERVER_ServerOptionsSetModelLoadRetryCount: { parameters: [P, "u32"], result: P },
  TRITONSERVER_ServerOptionsSetMetrics: { parameters: [P, "bool"], result: P },
  TRITONSERVER_ServerOptionsSetGpuMetrics: { parameters: [P, "bool"], result: P },
  TRITONSERVER_ServerOptionsSetCpuMetrics: { parameters: [P, "bool"], result: P },
  TRITONSERVER_ServerOptionsSetMetricsInterval: { parameters: [P, "u64"], result: P },
  TRITONSERVER_ServerOptionsSetMetricsConfig: { parameters: [P, B, B, B], result: P },
  TRITONSERVER_ServerStop: { parameters: [P], result: P, nonblocking: true },
  TRITONSERVER_ServerSetExitTimeout: { parameters: [P, "u32"], result: P },
  TRITONSERVER_ServerIsLive: { parameters: [P, B], result: P },
  TRITONSERVER_ServerIsReady: { parameters: [P, B], result: P },
  TRITONSERVER_ServerModelIsReady: { parameters: [P, B, "i64", B], result: P },
  TRITONSERVER_ServerModelTransactionProperties: { parameters: [P, B, "i64", B, B], result: P },
  TRITONSERVER_ServerMetadata: { parameters: [P, B], result: P },
  TRITONSERVER_ServerModelMetadata: { parameters: [P, B, "i64", B], result: P },
  TRITONSERVER_ServerModelConfig: { parameters: [P, B, "i64", "u32", B], result: P },
  TRITONSERVER_ServerModelStatistics: { parameters: [P, B, "i64", B], result: P },
  TRITONSERVER_ServerModelIndex: { parameters: [P, "u32", B], result: P },
  TRITONSERVER_ServerUnloadModel: { parameters: [P, B], result: P, nonblocking: true },
  TRITONSERVER_ServerMetrics: { parameters: [P, B], result: P },
  TRITONSERVER_MetricsFormatted: { parameters: [P, "i32", B, B], result: P },
  TRITONSERVER_MetricsDelete: { parameters: [P], result: P },
  TRITONSERVER_InferenceRequestDelete: { parameters: [P], result: P },
  TRITONSERVER_InferenceRequestCancel: { parameters: [P], result: P },
  TRITONSERVER_InferenceResponseDelete: { parameters: [P], result: P },
  // The models' own metrics (`context.metrics`): families and metrics in the core's registry,
  // which `TRITONSERVER_ServerMetrics` renders beside the core's own.
  TRITONSERVER_MetricFamilyNew: { parameters: [B, "i32", B, B], result: P },
  TRITONSERVER_MetricFamilyDelete: { parameters: [P], result: P },
  TRITONSERVER_MetricArgsNew: { parameters: [B], result: P },
  TRITONSERVER_MetricArgsSetHistogram: { parameters: [P, B, "u64"], result: P },
  TRITONSERVER_MetricArgsDelete: { parameters: [P], result: P },
  TRITONSERVER_MetricNewWithArgs: { parameters: [B, P, B, "u64", P], result: P },
  TRITONSERVER_MetricDelete: { parameters: [P], result: P },
  TRITONSERVER_MetricIncrement: { parameters: [P, "f64"], result: P },
  TRITONSERVER_MetricSet: { parameters: [P, "f64"], result: P },
  TRITONSERVER_MetricObserve: { parameters: [P, "f64"], result: P },
} as const;

/** DenoTriton's bridge symbols (`ffi/dt_backend.c`, `ffi/dt_client.c`). */
export const BRIDGE_SYMBOLS = {
  dt_bridge_version: { parameters: [], result: "u32" },
  dt_channel_open: { parameters: ["u32", "i32"], result: "u64" },
  dt_channel_close: { parameters: ["u64"], result: "void" },
  dt_channel_notify: { parameters: ["u64", "function"], result: "void" },
  dt_take_batch: { parameters: ["u64", "u32"], result: "i32" },
  dt_batch_read: { parameters: ["u64", "u32", B, "u64"], result: "u64" },
  dt_slot_error: { parameters: ["u64", "u32"], result: P },
  dt_output: {
    parameters: ["u64", "u32", "u32", B, "i32", B, "u32", B, "u64", "u32", "u64", "i32", B],
    result: "i32",
  },
  dt_response_delete: { parameters: [P, B, "i32"], result: "i32" },
  dt_send: { parameters: ["u64", "u32", "u32", "i32", "i32", B], result: "i32" },
  dt_batch_done: { parameters: ["u64", "u32"], result: "i32" },
  dt_batch_fail: { parameters: ["u64", "u32", "i32", B], result: "i32" },
  dt_request_cancelled: { parameters: ["u64", "u32", "u32"], result: "i32" },
  dt_events_open: { parameters: [], result: "u64" },
  dt_events_close: { parameters: ["u64"], result: "void" },
  dt_wait_events: { parameters: ["u64", "i32"], result: "i32", nonblocking: true },
  dt_wake_events: { parameters: ["u64"], result: "void" },
  dt_poll_events: { parameters: ["u64", B, "i32"], result: "i32" },
  dt_events_signal: { parameters: ["u64", "u32"], result: "void" },
  dt_events_signals: { parameters: [B, "i32"], result: "i32" },
  dt_infer: { parameters: [P, B, "u64", "u64", B], result: P },
  dt_response_read: { parameters: [P, B, "u64"], result: "u64" },
  dt_free: { parameters: [P], result: "void" },
  dt_now_ns: { parameters: [], result: "u64" },
  // Tests only: makes the bridge fail sends or corrupt batch descriptions on purpose.
  dt_debug_fault: { parameters: ["i32", "u32"], result: "i32" },
  // Creating and deleting servers and loading models touch the core's process-wide state:
  // through the bridge, which serializes them across the process (`ffi/dt_server.c`).
  dt_server_new: { parameters: [B, P, "u64"], result: P, nonblocking: true },
  dt_server_delete: { parameters: [P], result: P, nonblocking: true },
  dt_server_load: { parameters: [P, B, B, "u64", "u64"], result: P, nonblocking: true },
  dt_log_open: { parameters: [B, B], result: P },
  dt_log_move: { parameters: ["u64", B], result: P },
  dt_log_close: { parameters: ["u64"], result: "void" },
} as const;

/** The opened core library. */
export type CoreLibrary = Deno.DynamicLibrary<typeof CORE_SYMBOLS>["symbols"];
/** The opened bridge library. */
export type BridgeLibrary = Deno.DynamicLibrary<typeof BRIDGE_SYMBOLS>["symbols"];

/** Both libraries, opened. */
export interface NativeLibraries {
  /** The install they came from. */
  readonly install: TritonInstall;
  /** Triton's C API. */
  readonly core: CoreLibrary;
  /** DenoTriton's bridge. */
  readonly bridge: BridgeLibrary;
  /** `[major, minor]` of `TRITONSERVER_ApiVersion`. */
  readonly apiVersion: readonly [number, number];
}

/** The bridge version this TypeScript code speaks. */
export const BRIDGE_VERSION = 9;

let opened: NativeLibraries | undefined;
// Kept so the preloaded dependencies are never unloaded.
const keepAlive: Deno.DynamicLibrary<Record<string, never>>[] = [];

/**
 * Opens the core (after its dependencies) and the bridge, once per process.
 *
 * @param install The install to open.
 * @returns The libraries.
 * @throws {TritonError} When a library cannot be opened, the API version is too old, or another
 *   install was opened before in this process.
 */
export function openNative(install: TritonInstall): NativeLibraries {
  if (opened) {
    if (opened.install.coreLibrary !== install.coreLibrary) {
      throw new TritonError(
        `Cannot open Triton core ${install.coreLibrary}: ${opened.install.coreLibrary} is already loaded in this process`,
      );
    }
    return opened;
  }
  try {
    for (const path of install.preload) keepAlive.push(Deno.dlopen(path, {}));
  } catch (error) {
    throw new TritonError(
      `Cannot load Triton's bundled libraries from ${install.libDirectory}: ${
        (error as Error).message
      } (run: ${setupCommand()})`,
      { cause: error },
    );
  }
  let core: CoreLibrary;
  try {
    core = Deno.dlopen(install.coreLibrary, CORE_SYMBOLS).symbols;
  } catch (error) {
    throw new TritonError(
      `Cannot load the Triton core ${install.coreLibrary}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const major = new Uint32Array(1);
  const minor = new Uint32Array(1);
  const failure = core.TRITONSERVER_ApiVersion(major, minor);
  if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
  if (major[0] !== 1 || minor[0]! < 34) {
    throw new TritonError(
      `Cannot use the Triton core ${install.coreLibrary}: API version ${major[0]}.${
        minor[0]
      } is not 1.34 or a later 1.x`,
    );
  }
  let bridge: BridgeLibrary;
  try {
    bridge = Deno.dlopen(install.backendLibrary, BRIDGE_SYMBOLS).symbols;
  } catch (error) {
    throw new TritonError(
      `Cannot load the DenoTriton backend ${install.backendLibrary}: ${
        (error as Error).message
      } (run: ${setupCommand()})`,
      { cause: error },
    );
  }
  const version = bridge.dt_bridge_version();
  if (version !== BRIDGE_VERSION) {
    throw new TritonError(
      `Cannot use the DenoTriton backend ${install.backendLibrary}: bridge version ${version}, expected ${BRIDGE_VERSION} (run: ${setupCommand()})`,
    );
  }
  opened = { install, core, bridge, apiVersion: [major[0]!, minor[0]!] };
  return opened;
}

/** `CUipcMemHandle`: 64 opaque bytes, as eight 64-bit words (its size is all FFI needs). */
const IPC_HANDLE = ["u64", "u64", "u64", "u64", "u64", "u64", "u64", "u64"] as const;

/**
 * The CUDA driver API symbols DenoTriton calls (stable since CUDA 4; `CUresult` is an `i32`,
 * `CUdevice` an `int`). The driver, not the runtime, because it comes with every NVIDIA driver
 * install, needs no Triton install, and a context made current through it is the one every
 * CUDA runtime in the process (cuBLAS, ONNX Runtime, TensorRT) then uses on that thread.
 */
export const CUDA_DRIVER_SYMBOLS = {
  cuInit: { parameters: ["u32"], result: "i32" },
  cuGetErrorName: { parameters: ["i32", B], result: "i32" },
  cuDriverGetVersion: { parameters: [B], result: "i32" },
  cuDeviceGetCount: { parameters: [B], result: "i32" },
  cuDeviceGet: { parameters: [B, "i32"], result: "i32" },
  cuDeviceGetName: { parameters: [B, "i32", "i32"], result: "i32" },
  cuDeviceTotalMem_v2: { parameters: [B, "i32"], result: "i32" },
  cuDeviceGetAttribute: { parameters: [B, "i32", "i32"], result: "i32" },
  cuDeviceGetUuid: { parameters: [B, "i32"], result: "i32", optional: true },
  cuDevicePrimaryCtxRetain: { parameters: [B, "i32"], result: "i32" },
  cuCtxSetCurrent: { parameters: [P], result: "i32" },
  cuCtxGetDevice: { parameters: [B], result: "i32" },
  // Device memory (`native/cuda_memory.ts`): a client's CUDA IPC handle opened and closed, and
  // the copies the CUDA shared-memory and device-tensor paths make, in a context pushed for them.
  cuCtxPushCurrent_v2: { parameters: [P], result: "i32" },
  cuCtxPopCurrent_v2: { parameters: [B], result: "i32" },
  cuCtxSynchronize: { parameters: [], result: "i32" },
  // CUipcMemHandle is a 64-byte struct passed by value.
  cuIpcOpenMemHandle_v2: { parameters: [B, { struct: IPC_HANDLE }, "u32"], result: "i32" },
  cuIpcCloseMemHandle: { parameters: ["u64"], result: "i32" },
  cuMemGetAddressRange_v2: { parameters: [B, B, "u64"], result: "i32" },
  cuMemcpyHtoD_v2: { parameters: ["u64", B, "usize"], result: "i32" },
  cuMemcpyDtoH_v2: { parameters: [B, "u64", "usize"], result: "i32" },
  // The same copy into host memory at an address (a buffer the Triton core allocated).
  cuMemcpyDtoHAt: { name: "cuMemcpyDtoH_v2", parameters: [P, "u64", "usize"], result: "i32" },
  cuMemcpyDtoD_v2: { parameters: ["u64", "u64", "usize"], result: "i32" },
} as const;

/** The opened CUDA driver library. */
export type CudaDriverLibrary = Deno.DynamicLibrary<typeof CUDA_DRIVER_SYMBOLS>["symbols"];

const cudaDrivers = new Map<string, CudaDriverLibrary>();

/**
 * Opens the CUDA driver library, once per path and process.
 *
 * @param path The library: a name the dynamic loader searches for, or a path.
 * @returns Its symbols.
 * @throws {TritonError} When it cannot be opened (no NVIDIA driver on this host) or lacks a
 *   symbol.
 */
export function openCuda(path: string): CudaDriverLibrary {
  const known = cudaDrivers.get(path);
  if (known !== undefined) return known;
  let driver: CudaDriverLibrary;
  try {
    driver = Deno.dlopen(path, CUDA_DRIVER_SYMBOLS).symbols;
  } catch (error) {
    // Deno repeats its own prefix before dlerror()'s message.
    const reason = (error as Error).message.replaceAll("Could not open library: ", "");
    throw new TritonError(`Cannot load the CUDA driver ${path}: ${reason}`, { cause: error });
  }
  cudaDrivers.set(path, driver);
  return driver;
}

/**
 * The libc symbols system shared memory needs (POSIX; `shm_open` is in `libc.so.6` since glibc
 * 2.34 and in `librt.so.1` before). A region's size comes from `lseek(fd, 0, SEEK_END)` rather
 * than `fstat`, whose `struct stat` layout differs between architectures.
 *
 * `open` and `read` read the core's log file (`engine/native/core_log.ts`): the core writes it into the
 * temporary directory, and reading it through Deno's file API would need a read grant there that
 * nothing else needs, whereas `--allow-ffi`, which the engine needs anyway, covers these calls.
 * `open`'s optional mode argument is not passed (no file is created).
 *
 * `memcpyFrom` copies an output out of a response (`engine/native/tensors.ts`) without an `ArrayBuffer` over
 * the core's memory: V8 counts every such buffer as external memory, and one of megabytes per
 * request triggers a garbage collection per request. (Results go the other way inside
 * `dt_output`, which copies them in C.)
 *
 * `addressOf` is `memset(bytes, 0, 0)`, which writes nothing and returns its first argument: the
 * address of JavaScript bytes lent to the core (`engine/native/tensors.ts`, each request's
 * inputs). `Deno.UnsafePointer.of` answers the same, but also records every pointer it makes in
 * a `WeakMap` (to keep the buffer alive while the pointer lives, which the lent table does here),
 * and that cost about a microsecond per request on the core's path.
 */
export const LIBC_SYMBOLS = {
  open: { parameters: [B, "i32"], result: "i32" },
  read: { parameters: ["i32", B, "usize"], result: "isize" },
  shm_open: { parameters: [B, "i32", "u32"], result: "i32", optional: true },
  mmap: { parameters: [P, "usize", "i32", "i32", "i32", "i64"], result: P },
  munmap: { parameters: [P, "usize"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  lseek: { parameters: ["i32", "i64", "i32"], result: "i64" },
  __errno_location: { parameters: [], result: P },
  strerror: { parameters: ["i32"], result: P },
  sysconf: { parameters: ["i32"], result: "i64" },
  // The source as a plain address and no result: no pointer object made per call.
  memcpyFrom: { name: "memcpy", parameters: [B, "usize", "usize"], result: "void" },
  addressOf: { name: "memset", parameters: [B, "i32", "usize"], result: "u64" },
} as const;

/** The libc functions DenoTriton calls, `shm_open` always present. */
export interface LibcLibrary {
  /** `open(path, flags)`. */
  readonly open: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["open"];
  /** `read(fd, buffer, count)`. */
  readonly read: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["read"];
  /** `shm_open(name, flags, mode)`. */
  readonly shm_open: (name: BufferSource, flags: number, mode: number) => number;
  /** `mmap(addr, length, prot, flags, fd, offset)`. */
  readonly mmap: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["mmap"];
  /** `munmap(addr, length)`. */
  readonly munmap: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["munmap"];
  /** `close(fd)`. */
  readonly close: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["close"];
  /** `lseek(fd, offset, whence)`. */
  readonly lseek: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["lseek"];
  /** The calling thread's `errno` address. */
  readonly __errno_location: Deno.DynamicLibrary<
    typeof LIBC_SYMBOLS
  >["symbols"]["__errno_location"];
  /** `strerror(errnum)`. */
  readonly strerror: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["strerror"];
  /** `sysconf(name)`. */
  readonly sysconf: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["sysconf"];
  /** `memcpy(destination, source, count)`, out of foreign memory. */
  readonly memcpyFrom: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["memcpyFrom"];
  /** `memset(bytes, 0, 0)`: the address of `bytes`, nothing written. */
  readonly addressOf: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"]["addressOf"];
}

let libc: LibcLibrary | undefined;

/**
 * Opens the C library for system shared memory and the core's log, once per process
 * (Linux/glibc).
 *
 * @returns Its symbols.
 * @throws {TritonError} When it cannot be opened or has no `shm_open` (nor `librt.so.1`).
 */
export function openLibc(): LibcLibrary {
  if (libc !== undefined) return libc;
  let symbols: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"];
  try {
    symbols = Deno.dlopen("libc.so.6", LIBC_SYMBOLS).symbols;
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw error;
    throw new TritonError(
      `Cannot load the C library libc.so.6: ${(error as Error).message}`,
      { cause: error },
    );
  }
  let shmOpen = symbols.shm_open;
  if (shmOpen === null) {
    try {
      shmOpen = Deno.dlopen("librt.so.1", { shm_open: LIBC_SYMBOLS.shm_open }).symbols.shm_open;
    } catch (error) {
      throw new TritonError(
        `Cannot load shm_open from libc.so.6 or librt.so.1: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }
  libc = { ...symbols, shm_open: shmOpen! };
  return libc;
}
