/**
 * Direct calls into the stand-in CUDA driver for tests: device 0's context made current, device
 * memory filled and read back, and the stand-in's count of live allocations.
 *
 * @module
 */

import assert from "node:assert/strict";

const SYMBOLS = {
  cuInit: { parameters: ["u32"], result: "i32" },
  cuDeviceGet: { parameters: ["buffer", "i32"], result: "i32" },
  cuDevicePrimaryCtxRetain: { parameters: ["buffer", "i32"], result: "i32" },
  cuCtxSetCurrent: { parameters: ["pointer"], result: "i32" },
  cuMemAlloc_v2: { parameters: ["buffer", "usize"], result: "i32" },
  cuMemFree_v2: { parameters: ["u64"], result: "i32" },
  cuMemcpyHtoD_v2: { parameters: ["u64", "buffer", "usize"], result: "i32" },
  cuMemcpyDtoH_v2: { parameters: ["buffer", "u64", "usize"], result: "i32" },
  cuModuleLoadData: { parameters: ["buffer", "buffer"], result: "i32" },
  cuModuleGetFunction: { parameters: ["buffer", "pointer", "buffer"], result: "i32" },
  cuLaunchKernel: {
    parameters: [
      "pointer",
      "u32",
      "u32",
      "u32",
      "u32",
      "u32",
      "u32",
      "u32",
      "pointer",
      "buffer",
      "pointer",
    ],
    result: "i32",
  },
  stand_in_memory_live_count: { parameters: [], result: "usize" },
} as const;

/** The stand-in driver's functions the tests call. */
export type StandInDriver = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

/**
 * Opens the stand-in driver and makes device 0's primary context current on this thread.
 *
 * @param path The stand-in driver library.
 * @returns Its functions.
 */
export function openStandInDriver(path: string): StandInDriver {
  const driver = Deno.dlopen(path, SYMBOLS).symbols;
  assert.equal(driver.cuInit(0), 0);
  const context = new BigUint64Array(1);
  assert.equal(driver.cuDevicePrimaryCtxRetain(context, 0), 0);
  assert.equal(driver.cuCtxSetCurrent(Deno.UnsafePointer.create(context[0]!)), 0);
  return driver;
}

/**
 * Allocates device memory and copies values into its start.
 *
 * @param driver The stand-in driver.
 * @param values What to copy.
 * @param floats How many floats to allocate.
 * @returns The device pointer.
 */
export function upload(
  driver: StandInDriver,
  values: Float32Array,
  floats: number = values.length,
): bigint {
  const slot = new BigUint64Array(1);
  assert.equal(driver.cuMemAlloc_v2(slot, BigInt(floats * 4)), 0);
  if (values.length > 0) {
    assert.equal(driver.cuMemcpyHtoD_v2(slot[0]!, values, BigInt(values.byteLength)), 0);
  }
  return slot[0]!;
}

/**
 * Copies floats back from device memory.
 *
 * @param driver The stand-in driver.
 * @param pointer The device pointer.
 * @param floats How many.
 * @returns The values.
 */
export function download(driver: StandInDriver, pointer: bigint, floats: number): Float32Array {
  const out = new Float32Array(floats);
  assert.equal(driver.cuMemcpyDtoH_v2(out, pointer, BigInt(out.byteLength)), 0);
  return out;
}
