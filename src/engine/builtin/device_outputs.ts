/**
 * The built-in engine's copies of a callable's device-tensor outputs, made right after the
 * instance answered and before it gets its next batch (the callable's memory is valid until
 * then): into the client's CUDA region when the request named one for the output (one
 * device-to-device copy, the response then holds a device tensor over that region, which the
 * front end leaves alone), else to the host (one device-to-host copy). The Triton engine makes
 * the same copies in its backend (`native/backend_bridge.ts`), into the buffers the core's
 * allocator hands out.
 *
 * @module
 */

import type { AnyTensors, InferResult } from "../../callable/types.ts";
import { InferenceError } from "../../errors.ts";
import { CudaMemory, deviceMemoryError } from "../../native/cuda_memory.ts";
import { type DeviceBuffer, DeviceTensor, isDeviceTensor } from "../../tensor/device_tensor.ts";

/**
 * A result with its device tensors copied out: into the request's CUDA output buffers, or to the
 * host. A result without device tensors is returned as it is.
 *
 * @param result What the instance answered for one request.
 * @param buffers The request's output buffers (`InferenceRequest.outputBuffers`).
 * @returns The result to respond with.
 * @throws {InferenceError} (INTERNAL) For a region smaller than the output (Triton's message),
 *   or a copy the driver refuses.
 *
 * @example Without device tensors nothing changes
 * ```ts
 * import { settleDeviceOutputs } from "./device_outputs.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const result = { y: ndarray([1]) };
 * assert.equal(settleDeviceOutputs(result, undefined), result);
 * ```
 */
export function settleDeviceOutputs(
  result: InferResult<AnyTensors>,
  buffers: ReadonlyMap<string, Uint8Array | DeviceBuffer> | undefined,
): InferResult<AnyTensors> {
  let settled: InferResult<AnyTensors> | undefined;
  // for...in, not Object.entries: no pair per output on the usual path (no device tensors).
  for (const name in result) {
    const tensor = result[name];
    if (!isDeviceTensor(tensor)) continue;
    settled ??= { ...result };
    const target = buffers?.get(name);
    try {
      if (target !== undefined && !(target instanceof Uint8Array)) {
        if (tensor.byteSize > target.byteSize) {
          throw InferenceError.internal(
            `shared memory size specified with the request for output '${name}' (${target.byteSize} bytes) should be at least ${tensor.byteSize} bytes to hold the results`,
          );
        }
        CudaMemory.open(target.driverLibrary).copyOnDevice(target.device, target.pointer, tensor);
        settled[name] = new DeviceTensor({
          dtype: tensor.dtype,
          shape: tensor.shape,
          pointer: target.pointer,
          device: target.device,
          driverLibrary: target.driverLibrary,
        });
      } else {
        settled[name] = tensor.toHost();
      }
    } catch (error) {
      throw deviceMemoryError(`Cannot copy output '${name}' off ${tensor.deviceName}`, error);
    }
  }
  return settled ?? result;
}
