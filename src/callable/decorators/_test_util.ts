/**
 * Builders shared by the decorator tests: real requests and a real context, built with the
 * public `inferRequest` and `inferContext`.
 *
 * @module
 */

import type { ModelConfig } from "../../config/model_config.ts";
import type { TensorSpec } from "../../config/tensor_spec.ts";
import { type NDArray, ndarray } from "../../tensor/ndarray.ts";
import { inferContext } from "../context.ts";
import { inferRequest } from "../request.ts";
import type { InferContext, InferRequest, ParameterValue } from "../types.ts";

/** What {@linkcode makeContext} needs to know about the model. */
export interface TestModel {
  /** Model name. */
  name?: string;
  /** Declared inputs. */
  inputs: readonly TensorSpec[];
  /** Declared outputs. */
  outputs: readonly TensorSpec[];
  /** Serving configuration. */
  config?: ModelConfig;
}

/** A context for a model, as an instance would pass it. */
export function makeContext(model: TestModel): InferContext {
  const options: Parameters<typeof inferContext>[0] = {
    modelName: model.name ?? "Model",
    inputs: model.inputs,
    outputs: model.outputs,
  };
  if (model.config !== undefined) options.config = model.config;
  return inferContext(options);
}

/** A request carrying `data`, with optional parameters and its own abort signal. */
export function makeRequest(
  data: Record<string, NDArray>,
  parameters: Record<string, ParameterValue> = {},
): InferRequest {
  return inferRequest(data, { parameters });
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
