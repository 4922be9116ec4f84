/**
 * Device memory through the CUDA driver (`ffi.ts` opens it): the CUDA IPC handles of a client's
 * CUDA shared-memory regions, opened and closed, and the copies between host and device memory
 * that the CUDA shared-memory and device-tensor paths make. Every call runs in the device's
 * primary context (the one the CUDA runtime, cuBLAS and the Triton core use), pushed for the call
 * and popped after it, so it works on any thread, whatever context that thread has current.
 *
 * A copy into device memory is complete when its call returns (the context is synchronized after
 * it), so a client that reads its region once the response arrived reads the result.
 *
 * Every copy is counted ({@linkcode deviceCopyCounts}): the measurement of how many copies each
 * path makes reads these counters beside the Triton core's own copies (`tests/_gpu/`).
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import { type CudaDriverLibrary, openCuda } from "./ffi.ts";

/** The size of a `CUipcMemHandle`. */
export const IPC_HANDLE_BYTES = 64;

/** `cuIpcMemLazyEnablePeerAccess`: a handle of another GPU's memory is mapped with peer access. */
const LAZY_ENABLE_PEER_ACCESS = 1;

/** Copies of one direction: how many, and their bytes. */
export interface CopyCount {
  /** Copies made. */
  calls: number;
  /** Bytes they copied. */
  bytes: number;
}

/** The copies this isolate made through {@linkcode CudaMemory}, by direction. */
export interface DeviceCopyCounts {
  /** Host memory to device memory. */
  readonly hostToDevice: CopyCount;
  /** Device memory to host memory. */
  readonly deviceToHost: CopyCount;
  /** Device memory to device memory. */
  readonly deviceToDevice: CopyCount;
}

const counts: DeviceCopyCounts = {
  hostToDevice: { calls: 0, bytes: 0 },
  deviceToHost: { calls: 0, bytes: 0 },
  deviceToDevice: { calls: 0, bytes: 0 },
};

/**
 * The copies between host and device memory this isolate made so far (a snapshot).
 *
 * @returns The counts by direction.
 *
 * @example A snapshot by direction
 * ```ts
 * import { deviceCopyCounts } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const counts = deviceCopyCounts();
 * assert.deepEqual(Object.keys(counts), ["hostToDevice", "deviceToHost", "deviceToDevice"]);
 * // A snapshot: changing it changes nothing in the counters.
 * counts.deviceToHost.calls += 5;
 * assert.equal(deviceCopyCounts().deviceToHost.calls, counts.deviceToHost.calls - 5);
 * ```
 */
export function deviceCopyCounts(): DeviceCopyCounts {
  return structuredClone(counts);
}

/**
 * `CUDA_ERROR_INVALID_VALUE (1)`, or the bare code when the driver cannot name it.
 *
 * @param driver The driver.
 * @param code A `CUresult`.
 * @returns Its name and number.
 */
export function cudaErrorName(driver: CudaDriverLibrary, code: number): string {
  const slot = new BigUint64Array(1);
  if (driver.cuGetErrorName(code, slot) !== 0 || slot[0] === 0n) return `CUDA error ${code}`;
  return `${Deno.UnsafePointerView.getCString(Deno.UnsafePointer.create(slot[0]!)!)} (${code})`;
}

/** A driver call that failed: its name and `CUresult`, for the caller's message. */
export class CudaCallError extends Error {
  /** The `CUresult`. */
  readonly result: number;

  /**
   * @param call The function's name.
   * @param result Its `CUresult`.
   * @param name What the driver calls the result.
   */
  constructor(call: string, result: number, name: string) {
    super(`${call} failed: ${name}`);
    this.name = "CudaCallError";
    this.result = result;
  }
}

const opened = new Map<string, CudaMemory>();

/**
 * Device memory through one CUDA driver library. {@linkcode CudaMemory.open} it once per library
 * and process (the instance is shared).
 *
 * @example Needs a GPU (or the stand-in driver of `tests/_gpu/`)
 * ```ts ignore
 * import { CudaMemory } from "./cuda_memory.ts";
 *
 * const memory = CudaMemory.open("libcuda.so.1");
 * const host = new Uint8Array(16);
 * memory.copyToHost(0, host, 0x7f0000000000n); // a device pointer of cuda:0
 * ```
 */
export class CudaMemory {
  /** The driver library it calls. */
  readonly driverLibrary: string;
  #driver: CudaDriverLibrary;
  #contexts = new Map<number, Deno.PointerValue>();
  #initialized = false;

  private constructor(driverLibrary: string, driver: CudaDriverLibrary) {
    this.driverLibrary = driverLibrary;
    this.#driver = driver;
  }

  /**
   * Opens the driver (once per library and process).
   *
   * @param driverLibrary A name the dynamic loader searches for, or a path.
   * @returns The device memory of that driver.
   * @throws {TritonError} When the library cannot be opened.
   */
  static open(driverLibrary: string): CudaMemory {
    let memory = opened.get(driverLibrary);
    if (memory === undefined) {
      memory = new CudaMemory(driverLibrary, openCuda(driverLibrary));
      opened.set(driverLibrary, memory);
    }
    return memory;
  }

  #check(call: string, result: number): void {
    if (result !== 0) throw new CudaCallError(call, result, cudaErrorName(this.#driver, result));
  }

  /** Device `device`'s primary context, retained once and kept for the life of the process. */
  #context(device: number): Deno.PointerValue {
    let context = this.#contexts.get(device);
    if (context !== undefined) return context;
    const driver = this.#driver;
    if (!this.#initialized) {
      this.#check("cuInit", driver.cuInit(0));
      this.#initialized = true;
    }
    const handle = new Int32Array(1);
    this.#check("cuDeviceGet", driver.cuDeviceGet(handle, device));
    const slot = new BigUint64Array(1);
    this.#check("cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain(slot, handle[0]!));
    context = Deno.UnsafePointer.create(slot[0]!);
    this.#contexts.set(device, context);
    return context;
  }

  /** Runs `work` with device `device`'s primary context pushed on this thread. */
  #within<T>(device: number, work: (driver: CudaDriverLibrary) => T): T {
    const driver = this.#driver;
    this.#check("cuCtxPushCurrent_v2", driver.cuCtxPushCurrent_v2(this.#context(device)));
    try {
      return work(driver);
    } finally {
      driver.cuCtxPopCurrent_v2(new BigUint64Array(1));
    }
  }

  /**
   * Checks that `device` is a device of this driver (its primary context can be retained).
   *
   * @param device A device ordinal.
   * @throws {CudaCallError} When the driver refuses it (`CUDA_ERROR_INVALID_DEVICE`).
   */
  checkDevice(device: number): void {
    this.#context(device);
  }

  /**
   * Opens a client's CUDA IPC handle in device `device`'s primary context: maps the client's
   * allocation into this process.
   *
   * @param handle The `CUipcMemHandle` (64 bytes).
   * @param device The device to map it on.
   * @returns The mapping's device pointer and the size of the allocation it maps.
   * @throws {CudaCallError} When the driver refuses the handle or the device.
   */
  openIpcHandle(handle: Uint8Array, device: number): { pointer: bigint; allocationBytes: number } {
    return this.#within(device, (driver) => {
      const slot = new BigUint64Array(1);
      this.#check(
        "cuIpcOpenMemHandle",
        driver.cuIpcOpenMemHandle_v2(slot, handle, LAZY_ENABLE_PEER_ACCESS),
      );
      const pointer = slot[0]!;
      const size = new BigUint64Array(1);
      const range = driver.cuMemGetAddressRange_v2(new BigUint64Array(1), size, pointer);
      if (range !== 0) {
        driver.cuIpcCloseMemHandle(pointer);
        this.#check("cuMemGetAddressRange", range);
      }
      return { pointer, allocationBytes: Number(size[0]) };
    });
  }

  /**
   * Closes a mapping {@linkcode CudaMemory.openIpcHandle} made.
   *
   * @param device Its device.
   * @param pointer Its device pointer.
   * @throws {CudaCallError} When the driver refuses.
   */
  closeIpcHandle(device: number, pointer: bigint): void {
    this.#within(device, (driver) => {
      this.#check("cuIpcCloseMemHandle", driver.cuIpcCloseMemHandle(pointer));
    });
  }

  /**
   * Copies device memory into host memory of JavaScript's.
   *
   * @param device The source's device.
   * @param target Where to (its whole length is copied).
   * @param source The device pointer.
   * @throws {CudaCallError} When the driver refuses.
   */
  copyToHost(device: number, target: Uint8Array, source: bigint): void {
    if (target.byteLength === 0) return;
    this.#within(device, (driver) => {
      this.#check(
        "cuMemcpyDtoH",
        driver.cuMemcpyDtoH_v2(target, source, BigInt(target.byteLength)),
      );
    });
    count(counts.deviceToHost, target.byteLength);
  }

  /**
   * Copies device memory into host memory at an address (a buffer the Triton core allocated).
   *
   * @param device The source's device.
   * @param target The host address.
   * @param source The device memory: its pointer and how many bytes (a device tensor is one).
   * @throws {CudaCallError} When the driver refuses.
   */
  copyToHostAt(device: number, target: bigint, source: DeviceSpan): void {
    const bytes = source.byteSize;
    if (bytes === 0) return;
    this.#within(device, (driver) => {
      this.#check(
        "cuMemcpyDtoH",
        driver.cuMemcpyDtoHAt(Deno.UnsafePointer.create(target), source.pointer, BigInt(bytes)),
      );
    });
    count(counts.deviceToHost, bytes);
  }

  /**
   * Copies host memory into device memory, complete when this returns.
   *
   * @param device The target's device.
   * @param target The device pointer.
   * @param source What to copy (its whole length).
   * @throws {CudaCallError} When the driver refuses.
   */
  copyToDevice(device: number, target: bigint, source: Uint8Array): void {
    if (source.byteLength === 0) return;
    this.#within(device, (driver) => {
      this.#check(
        "cuMemcpyHtoD",
        driver.cuMemcpyHtoD_v2(target, source, BigInt(source.byteLength)),
      );
      // From pageable memory the copy may still be on its way to the device when it returns.
      this.#check("cuCtxSynchronize", driver.cuCtxSynchronize());
    });
    count(counts.hostToDevice, source.byteLength);
  }

  /**
   * Copies device memory to device memory (under unified addressing, across devices too),
   * complete when this returns.
   *
   * @param device The device whose context runs the copy (the target's).
   * @param target The target device pointer.
   * @param source The source device memory: its pointer and how many bytes (a device tensor is
   *   one).
   * @throws {CudaCallError} When the driver refuses.
   */
  copyOnDevice(device: number, target: bigint, source: DeviceSpan): void {
    const bytes = source.byteSize;
    if (bytes === 0 || target === source.pointer) return;
    this.#within(device, (driver) => {
      this.#check("cuMemcpyDtoD", driver.cuMemcpyDtoD_v2(target, source.pointer, BigInt(bytes)));
      // A device-to-device copy does not wait for itself to finish.
      this.#check("cuCtxSynchronize", driver.cuCtxSynchronize());
    });
    count(counts.deviceToDevice, bytes);
  }
}

/** Device memory to copy from: its device pointer and byte count. */
export interface DeviceSpan {
  /** The device pointer. */
  readonly pointer: bigint;
  /** How many bytes. */
  readonly byteSize: number;
}

function count(entry: CopyCount, bytes: number): void {
  entry.calls++;
  entry.bytes += bytes;
}

/**
 * Wraps a failed device-memory call as the error a request gets (INTERNAL unless said).
 *
 * @param what What was being done, e.g. `Cannot copy input 'x' to the host`.
 * @param error What was thrown.
 * @returns The error.
 */
export function deviceMemoryError(what: string, error: unknown): InferenceError {
  if (error instanceof InferenceError) return error;
  return InferenceError.internal(`${what}: ${(error as Error).message}`, { cause: error });
}
