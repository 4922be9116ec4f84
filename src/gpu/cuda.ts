/**
 * GPU discovery and the device a Worker runs on, through the CUDA driver API (`libcuda.so.1`,
 * opened by `openCuda` in `native/ffi.ts`). No CUDA toolkit or runtime is needed: the
 * driver comes with every NVIDIA driver install, and a host without it simply has no GPUs.
 *
 * @module
 */

import { openCuda } from "../native/ffi.ts";
import { cudaErrorName } from "../native/cuda_memory.ts";
import type { CudaDriverLibrary } from "../native/ffi.ts";
import { TritonError } from "../errors.ts";
import type { GpuDevice, GpuInventory } from "./devices.ts";

/** The driver's usual name; the dynamic loader finds it where the NVIDIA driver put it. */
export const CUDA_DRIVER_LIBRARY = "libcuda.so.1";

const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
const NAME_BYTES = 256;

/** Options of {@linkcode discoverGpus}. */
export interface DiscoverGpusOptions {
  /**
   * The CUDA driver library to open: a name the dynamic loader searches for, or a path.
   *
   * @default {"libcuda.so.1"}
   */
  driverLibrary?: string;
}

const discovered = new Map<string, GpuInventory>();

function call(driver: CudaDriverLibrary, name: string, code: number): void {
  if (code !== 0) throw new TritonError(`${name} failed: ${cudaErrorName(driver, code)}`);
}

function uuidOf(driver: CudaDriverLibrary, device: number): string {
  if (driver.cuDeviceGetUuid === null) return "";
  const bytes = new Uint8Array(16);
  if (driver.cuDeviceGetUuid(bytes, device) !== 0) return "";
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `GPU-${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${
    hex.slice(20)
  }`;
}

function describe(driver: CudaDriverLibrary, index: number): GpuDevice {
  const handle = new Int32Array(1);
  call(driver, "cuDeviceGet", driver.cuDeviceGet(handle, index));
  const device = handle[0]!;
  const name = new Uint8Array(NAME_BYTES);
  call(driver, "cuDeviceGetName", driver.cuDeviceGetName(name, NAME_BYTES, device));
  const end = name.indexOf(0);
  const memory = new BigUint64Array(1);
  call(driver, "cuDeviceTotalMem_v2", driver.cuDeviceTotalMem_v2(memory, device));
  const attribute = (which: number): number => {
    const value = new Int32Array(1);
    call(driver, "cuDeviceGetAttribute", driver.cuDeviceGetAttribute(value, which, device));
    return value[0]!;
  };
  return {
    index,
    name: new TextDecoder().decode(name.subarray(0, end < 0 ? NAME_BYTES : end)),
    totalMemoryBytes: Number(memory[0]),
    computeCapability: [
      attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
      attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
    ],
    uuid: uuidOf(driver, device),
  };
}

function discover(driverLibrary: string): GpuInventory {
  const path = driverLibrary.includes("/") ? driverLibrary : undefined;
  const permission = path === undefined ? { name: "ffi" as const } : { name: "ffi" as const, path };
  if (Deno.permissions.querySync(permission).state !== "granted") {
    return { devices: [], reason: "GPU discovery needs --allow-ffi" };
  }
  let driver: CudaDriverLibrary;
  try {
    driver = openCuda(driverLibrary);
  } catch (error) {
    return { devices: [], reason: (error as Error).message };
  }
  try {
    call(driver, "cuInit", driver.cuInit(0));
    const count = new Int32Array(1);
    call(driver, "cuDeviceGetCount", driver.cuDeviceGetCount(count));
    if (count[0] === 0) {
      return { devices: [], driverLibrary, reason: "the CUDA driver reports no devices" };
    }
    const devices = Array.from({ length: count[0]! }, (_, index) => describe(driver, index));
    return { devices, driverLibrary };
  } catch (error) {
    return { devices: [], driverLibrary, reason: (error as Error).message };
  }
}

/**
 * Finds the GPUs of this host through the CUDA driver (once per process and library; honours
 * `CUDA_VISIBLE_DEVICES` as every CUDA program does). A host without the driver, without
 * devices, or without `--allow-ffi` has no GPUs: the inventory is empty and says why, and
 * nothing throws.
 *
 * @param options The driver library.
 * @returns The GPUs, or none with the reason.
 *
 * @example On any host
 * ```ts
 * import { discoverGpus } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const gpus = discoverGpus();
 * assert.ok(gpus.devices.length > 0 || typeof gpus.reason === "string");
 * ```
 */
export function discoverGpus(options: DiscoverGpusOptions = {}): GpuInventory {
  const driverLibrary = options.driverLibrary ?? CUDA_DRIVER_LIBRARY;
  let inventory = discovered.get(driverLibrary);
  if (inventory === undefined) {
    inventory = discover(driverLibrary);
    // Only a definite answer is kept: a missing grant may be given to a later caller.
    if (inventory.reason !== "GPU discovery needs --allow-ffi") {
      discovered.set(driverLibrary, inventory);
    }
  }
  return inventory;
}

/**
 * Makes GPU `index` current on the calling thread: retains the device's primary context (the one
 * the CUDA runtime, cuBLAS, cuDNN, TensorRT and ONNX Runtime use) and sets it current, so CUDA
 * work this thread then issues runs on that GPU. Worker instances call it before their factory;
 * FFI calls marked `nonblocking` run on other threads, where it is not current.
 *
 * @param driverLibrary The CUDA driver library the device was discovered through.
 * @param index The device ordinal.
 * @throws {TritonError} When the driver cannot be opened or refuses the device.
 *
 * @example Needs a GPU
 * ```ts ignore
 * import { makeGpuCurrent } from "./cuda.ts";
 *
 * makeGpuCurrent("libcuda.so.1", 0);
 * ```
 */
export function makeGpuCurrent(driverLibrary: string, index: number): void {
  try {
    const driver = openCuda(driverLibrary);
    call(driver, "cuInit", driver.cuInit(0));
    const handle = new Int32Array(1);
    call(driver, "cuDeviceGet", driver.cuDeviceGet(handle, index));
    const slot = new BigUint64Array(1);
    call(driver, "cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain(slot, handle[0]!));
    call(
      driver,
      "cuCtxSetCurrent",
      driver.cuCtxSetCurrent(Deno.UnsafePointer.create(slot[0]!)),
    );
  } catch (error) {
    throw new TritonError(`Cannot make cuda:${index} current: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/**
 * The GPU current on the calling thread, or `undefined` when none is (no context, or no driver).
 *
 * @param driverLibrary The CUDA driver library.
 * @returns The device ordinal of the current context.
 *
 * @example Without a current GPU
 * ```ts
 * import { currentGpu } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(currentGpu("libdoes-not-exist.so"), undefined);
 * ```
 */
export function currentGpu(driverLibrary: string = CUDA_DRIVER_LIBRARY): number | undefined {
  let driver: CudaDriverLibrary;
  try {
    driver = openCuda(driverLibrary);
  } catch {
    return undefined;
  }
  const device = new Int32Array(1);
  return driver.cuCtxGetDevice(device) === 0 ? device[0] : undefined;
}
