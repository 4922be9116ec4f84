/**
 * Builders shared by the decorator tests: real requests and a real context built with
 * `resolveTensorSpecs` and `resolveModelConfig`.
 *
 * @module
 */

import { type ModelConfig, resolveModelConfig } from "../../config/model_config.ts";
import { resolveTensorSpecs, type TensorSpec } from "../../config/tensor_spec.ts";
import { type NDArray, ndarray } from "../../tensor/ndarray.ts";
import type { InferContext, ParameterValue, Request } from "../types.ts";

/** What {@linkcode makeContext} needs to know about the model. */
export interface TestModel {
  /** Model name. */
  name?: string;
  /** Declared inputs. */
  inputs: TensorSpec[];
  /** Declared outputs. */
  outputs: TensorSpec[];
  /** Serving configuration. */
  config?: ModelConfig;
}

/** A context for a model, as an instance would pass it. */
export function makeContext(model: TestModel): InferContext {
  return {
    model: {
      name: model.name ?? "Model",
      version: 1,
      inputs: resolveTensorSpecs(model.inputs, "input"),
      outputs: resolveTensorSpecs(model.outputs, "output"),
      config: resolveModelConfig(model.config ?? {}),
      strict: false,
    },
    instanceIndex: 0,
    device: "cpu",
  };
}

/** A request carrying `data`, with optional parameters and its own abort signal. */
export function makeRequest(
  data: Record<string, NDArray>,
  parameters: Record<string, ParameterValue> = {},
): Request {
  return {
    data,
    parameters,
    requestedOutputNames: [],
    signal: new AbortController().signal,
  };
}

/** A float32 tensor of `rows` rows of one value each (shape `[rows, 1]`). */
export function column(values: readonly number[]): NDArray {
  return ndarray(new Float32Array(values), [values.length, 1]);
}

/** The elements of a tensor as plain numbers (or decoded strings for bytes). */
export function values(array: NDArray | undefined): (number | string)[] {
  if (array === undefined) throw new Error("No tensor");
  if (array.dtype === "bytes") {
    return array.data.map((element) => new TextDecoder().decode(element));
  }
  return Array.from(array.data as ArrayLike<number | bigint>, (value) => Number(value));
}
