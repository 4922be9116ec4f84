/**
 * Where an instance's inputs live when its callable runs: the one rule both instance kinds (main
 * thread and Workers) and both engines follow. An input that came as a `DeviceTensor` (a client's
 * CUDA shared-memory region) stays one for an instance placed on that GPU whose spec says
 * `deviceTensor: true`; every other instance (a CPU instance, another GPU, a spec without it) gets
 * a host copy, one device-to-host copy, made in the main isolate before the batch runs.
 *
 * @module
 */

import type { AnyTensors, InferRequest } from "../callable/types.ts";
import type { ModelInfo } from "../config/model_info.ts";
import { deviceMemoryError } from "../native/cuda_memory.ts";
import { isDeviceTensor } from "../tensor/device_tensor.ts";

/**
 * The requests as an instance's callable receives them: device tensors kept where the rule above
 * allows, copied to the host elsewhere. Requests without device tensors are returned as they
 * are.
 *
 * @param requests The batch, as the engine built it.
 * @param model The model (its input specs).
 * @param gpu The GPU the instance is placed on; `undefined` for the CPU.
 * @returns The batch with its inputs placed.
 * @throws {InferenceError} (INTERNAL) When the driver refuses a copy.
 *
 * @example Without device tensors nothing changes
 * ```ts
 * import { placeInputs } from "./device_inputs.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "m", version: 1, strict: false, outputs: [],
 *   inputs: [{ name: "x", dtype: "float64" as const, shape: [1], optional: false }],
 *   config: resolveModelConfig({ batching: false }),
 * };
 * const requests = [{
 *   data: { x: ndarray([1]) }, parameters: {}, requestedOutputNames: [],
 *   signal: new AbortController().signal,
 * }];
 * assert.equal(placeInputs(requests, model, undefined)[0], requests[0]);
 * ```
 */
export function placeInputs(
  requests: readonly InferRequest<AnyTensors>[],
  model: ModelInfo,
  gpu: number | undefined,
): InferRequest<AnyTensors>[] {
  return requests.map((request) => {
    const entries = Object.entries(request.data);
    if (!entries.some(([, tensor]) => isDeviceTensor(tensor))) return request;
    const data: AnyTensors = {};
    for (const [name, tensor] of entries) {
      if (!isDeviceTensor(tensor)) {
        data[name] = tensor;
        continue;
      }
      const spec = model.inputs.find((input) => input.name === name);
      if (spec?.deviceTensor === true && gpu === tensor.device) {
        data[name] = tensor;
        continue;
      }
      try {
        data[name] = tensor.toHost();
      } catch (error) {
        throw deviceMemoryError(`Cannot copy input '${name}' to the host`, error);
      }
    }
    return { ...request, data };
  });
}
