// Helpers shared by the built-in engine's tests.

import type { InferCallable, InferRequest, InferResult } from "../../callable/types.ts";
import { type ModelConfig, resolveModelConfig } from "../../config/model_config.ts";
import { resolveTensorSpecs, type TensorSpec } from "../../config/tensor_spec.ts";
import { MainThreadInstances } from "../../instances/main_thread.ts";
import { type NDArray, ndarray } from "../../tensor/ndarray.ts";
import type { InferenceRequest, ModelDefinition } from "../engine.ts";
import { hostTensor, type Tensor } from "../../tensor/device_tensor.ts";

export interface DefineOptions {
  name?: string;
  version?: number;
  config?: ModelConfig;
  inputs?: TensorSpec[];
  outputs?: TensorSpec[];
  strict?: boolean;
  devices?: string[];
}

/** A model with input `x` and output `y` (float32, [-1]) unless told otherwise. */
export function define(callables: InferCallable[], options: DefineOptions = {}): ModelDefinition {
  return {
    name: options.name ?? "m",
    version: options.version ?? 1,
    strict: options.strict ?? false,
    inputs: resolveTensorSpecs(
      options.inputs ?? [{ name: "x", dtype: "float32", shape: [-1] }],
      "input",
    ),
    outputs: resolveTensorSpecs(
      options.outputs ?? [{ name: "y", dtype: "float32", shape: [-1] }],
      "output",
    ),
    config: resolveModelConfig(options.config ?? {}),
    instances: new MainThreadInstances(
      callables,
      options.devices === undefined ? {} : { devices: options.devices },
    ),
  };
}

/** Returns `y = x` for every request. */
export function echo(requests: InferRequest[]): InferResult[] {
  return requests.map((request) => ({ y: request.data["x"]! }));
}

/** A request to model `m` with `x` of the given values and shape. */
export function requestOf(
  values: number[],
  shape: number[] = [1, values.length],
  extra: Partial<InferenceRequest> = {},
): InferenceRequest {
  return {
    modelName: "m",
    parameters: {},
    inputs: new Map<string, NDArray>([["x", ndarray(new Float32Array(values), shape)]]),
    ...extra,
  };
}

/** The values of a float32 tensor. */
export function values(array: Tensor | undefined): number[] {
  return [...(hostTensor(array!, "a test's tensor").data as Float32Array)];
}

/** Lets timers and I/O run once (a macrotask turn). */
export function tick(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
