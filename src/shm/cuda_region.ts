/**
 * One CUDA shared-memory region: a client's CUDA IPC handle opened with `cuIpcOpenMemHandle` in
 * the primary context of the device it names (`native/cuda_memory.ts`), with a count of the
 * requests that hold it, so that {@linkcode CudaRegion.close} closes the mapping
 * (`cuIpcCloseMemHandle`) at once when nothing holds it, otherwise when the last
 * {@linkcode CudaRegionView} is released. Errors follow Triton 2.51's `shared_memory_manager.cc`
 * and `http_server.cc`, with what went wrong after their words.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import { CudaCallError, CudaMemory, IPC_HANDLE_BYTES } from "../native/cuda_memory.ts";
import type { DeviceBuffer } from "../tensor/device_tensor.ts";

/** A CUDA region as a client registers it. */
export interface CudaRegionSpec {
  /** The region's name. */
  readonly name: string;
  /** The `cudaIpcMemHandle_t` of the client's allocation (64 bytes). */
  readonly rawHandle: Uint8Array;
  /** The device the allocation is on. */
  readonly deviceId: number;
  /** The region's size in bytes: at most the allocation's. */
  readonly byteSize: number;
}

/** Bytes of a CUDA region held by one request; release it once the request is done. */
export interface CudaRegionView {
  /** Always `"cuda"`. */
  readonly kind: "cuda";
  /** The held bytes, in the server's mapping of the client's allocation. */
  readonly buffer: DeviceBuffer;
  /** Gives the hold back; the second call does nothing. */
  release(): void;
}

/** Triton's words for a handle the driver refuses (it logs the driver's and answers these). */
const BAD_HANDLE = "failed to register shared memory region: invalid args";

/**
 * A registered CUDA region. Create it with {@linkcode CudaRegion.open}; take views with
 * {@linkcode CudaRegion.view}; {@linkcode CudaRegion.close} it on unregister.
 *
 * @example Errors before the driver is asked
 * ```ts
 * import { CudaRegion } from "./cuda_region.ts";
 * import assert from "node:assert/strict";
 *
 * assert.throws(
 *   () => CudaRegion.open({ name: "r", rawHandle: new Uint8Array(8), deviceId: 0, byteSize: 4 }, "libcuda.so.1"),
 *   /failed to register shared memory region: invalid args: 'raw_handle' holds 8 bytes, a cudaIpcMemHandle_t 64/,
 * );
 * assert.throws(
 *   () => CudaRegion.open({ name: "r", rawHandle: new Uint8Array(64), deviceId: 0, byteSize: 0 }, "libcuda.so.1"),
 *   /failed to register shared memory region 'r': invalid args: 'byte_size' must be above 0/,
 * );
 * ```
 */
export class CudaRegion {
  /** What the client registered. */
  readonly spec: CudaRegionSpec;
  #memory: CudaMemory;
  #pointer: bigint;
  #holds = 0;
  #closed = false;
  #unmapped = false;

  private constructor(spec: CudaRegionSpec, memory: CudaMemory, pointer: bigint) {
    this.spec = spec;
    this.#memory = memory;
    this.#pointer = pointer;
  }

  /**
   * Opens a client's IPC handle on its device, with Triton's errors.
   *
   * @param spec Name, handle, device and size.
   * @param driverLibrary The CUDA driver to open it through.
   * @returns The open region.
   * @throws {InferenceError} (INVALID_ARG) For a handle of the wrong size or one the driver
   *   refuses, a device the driver does not have, a size of 0 or beyond the allocation, a server
   *   without a CUDA driver (Triton's "GPUs not supported"); (UNSUPPORTED) without `--allow-ffi`.
   */
  static open(spec: CudaRegionSpec, driverLibrary: string): CudaRegion {
    const { name, rawHandle, deviceId, byteSize } = spec;
    if (rawHandle.byteLength !== IPC_HANDLE_BYTES) {
      throw InferenceError.invalidArg(
        `${BAD_HANDLE}: 'raw_handle' holds ${rawHandle.byteLength} bytes, a cudaIpcMemHandle_t ${IPC_HANDLE_BYTES}`,
      );
    }
    if (byteSize <= 0) {
      throw InferenceError.invalidArg(
        `failed to register shared memory region '${name}': invalid args: 'byte_size' must be above 0`,
      );
    }
    let memory: CudaMemory;
    try {
      memory = CudaMemory.open(driverLibrary);
    } catch (error) {
      if (error instanceof Deno.errors.NotCapable) {
        throw InferenceError.unsupported(
          "CUDA shared memory needs --allow-ffi (to open CUDA IPC handles through the CUDA driver)",
          { cause: error },
        );
      }
      throw InferenceError.invalidArg(
        `failed to register CUDA shared memory region: '${name}', GPUs not supported: ${
          (error as Error).message
        }`,
        { cause: error },
      );
    }
    try {
      memory.checkDevice(deviceId);
    } catch (error) {
      throw InferenceError.invalidArg(
        `${BAD_HANDLE}: region '${name}': device_id ${deviceId} is not a GPU of this server: ${
          (error as Error).message
        }`,
        { cause: error },
      );
    }
    let opened: { pointer: bigint; allocationBytes: number };
    try {
      // A copy: the client's bytes may be a view into a larger message.
      opened = memory.openIpcHandle(rawHandle.slice(), deviceId);
    } catch (error) {
      if (!(error instanceof CudaCallError)) throw error;
      throw InferenceError.invalidArg(
        `${BAD_HANDLE}: region '${name}': the CUDA IPC handle cannot be opened on cuda:${deviceId}: ${error.message}`,
        { cause: error },
      );
    }
    if (byteSize > opened.allocationBytes) {
      memory.closeIpcHandle(deviceId, opened.pointer);
      throw InferenceError.invalidArg(
        `failed to register shared memory region '${name}': invalid args: byte_size ${byteSize} is beyond the ${opened.allocationBytes} bytes of the allocation the handle maps`,
      );
    }
    return new CudaRegion(spec, memory, opened.pointer);
  }

  /**
   * Holds `byteSize` bytes from `offset` for one request. The caller checked the bounds (see
   * `SharedMemoryRegistry.acquire`).
   *
   * @param offset Offset in the region.
   * @param byteSize Bytes.
   * @returns The view and its release.
   */
  view(offset: number, byteSize: number): CudaRegionView {
    if (this.#closed) {
      throw InferenceError.notFound(`Unable to find shared memory region: '${this.spec.name}'`);
    }
    this.#holds++;
    let released = false;
    return {
      kind: "cuda",
      buffer: {
        pointer: this.#pointer + BigInt(offset),
        byteSize,
        device: this.spec.deviceId,
        driverLibrary: this.#memory.driverLibrary,
      },
      release: () => {
        if (released) return;
        released = true;
        this.#holds--;
        if (this.#closed && this.#holds === 0) {
          // Deferred past an unregister that succeeded: a refusal now has no one to answer.
          try {
            this.#unmap();
          } catch {
            // The region is out of the registry; the driver keeps what it refused to close.
          }
        }
      },
    };
  }

  /**
   * Closes the mapping now, or when the last view is released. Idempotent.
   *
   * @throws {InferenceError} (INTERNAL) When the driver refuses to close it now, with Triton's
   *   words.
   */
  close(): void {
    this.#closed = true;
    if (this.#holds === 0) this.#unmap();
  }

  #unmap(): void {
    if (this.#unmapped) return;
    this.#unmapped = true;
    try {
      this.#memory.closeIpcHandle(this.spec.deviceId, this.#pointer);
    } catch (error) {
      throw InferenceError.internal(
        `failed to close CUDA IPC handle: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }
}
