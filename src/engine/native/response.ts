/**
 * Reading a `TRITONSERVER_InferenceResponse` into a protocol-neutral
 * {@linkcode InferenceResponse}: the C bridge describes it as JSON (error, model, id,
 * parameters, outputs with addresses), and the outputs are copied out before the response is
 * deleted.
 *
 * @module
 */

import type { ParameterValue } from "../../callable/types.ts";
import { InferenceError } from "../../errors.ts";
import type { NDArray } from "../../tensor/ndarray.ts";
import type { InferenceResponse } from "../engine.ts";
import type { BridgeLibrary } from "./ffi.ts";
import { errorCodeName, readCString } from "./status.ts";
import { dtypeOfTriton, tensorCopy, viewAt } from "./tensors.ts";

/** A typed parameter as the bridge describes it. */
export interface DescribedParameter {
  /** `s`tring, `i`nt, `b`ool or `d`ouble. */
  t: "s" | "i" | "b" | "d";
  /** The value; ints and doubles come as strings to keep their precision. */
  v: string | boolean;
}

/** A tensor as the bridge describes it. */
export interface DescribedTensor {
  /** Tensor name. */
  name: string;
  /** `TRITONSERVER_DataType` value. */
  datatype: number;
  /** Dimensions. */
  shape: number[];
  /** Address of the data. */
  ptr: number;
  /** Byte size of the data. */
  size: number;
  /** Whether the data is in GPU memory. */
  gpu: boolean;
}

interface DescribedResponse {
  error: { code: number; message: string } | null;
  model: string;
  version: number;
  id: string;
  parameters: Record<string, DescribedParameter | null>;
  outputs: DescribedTensor[];
}

/**
 * Converts described parameters to JavaScript values.
 *
 * @param described The bridge's parameter map.
 * @returns Strings, numbers and booleans by name.
 *
 * @example
 * ```ts
 * import { parameterValues } from "./response.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parameterValues({ a: { t: "i", v: "3" }, b: { t: "b", v: true } }), { a: 3, b: true });
 * ```
 */
export function parameterValues(
  described: Record<string, DescribedParameter | null>,
): Record<string, ParameterValue> {
  const values: Record<string, ParameterValue> = {};
  for (const [key, parameter] of Object.entries(described)) {
    if (parameter === null) continue;
    values[key] = parameter.t === "s" || parameter.t === "b" ? parameter.v : Number(parameter.v);
  }
  return values;
}

/**
 * Reads a response: throws its error, or copies its outputs out.
 *
 * @param bridge The bridge library.
 * @param response The response (still owned by the caller, who deletes it afterwards).
 * @param order Output names in the model's declared order (the response follows it).
 * @returns The response.
 * @throws {InferenceError} The response's error, with the core's code.
 */
export function readResponse(
  bridge: BridgeLibrary,
  response: Deno.PointerValue,
  order: readonly string[],
): InferenceResponse {
  const text = bridge.dt_response_describe(response);
  let described: DescribedResponse;
  try {
    described = JSON.parse(readCString(text));
  } finally {
    bridge.dt_free(text);
  }
  if (described.error !== null) {
    throw new InferenceError(described.error.message, {
      code: errorCodeName(described.error.code),
    });
  }
  const byName = new Map<string, NDArray>();
  for (const output of described.outputs) {
    if (output.gpu) {
      throw InferenceError.internal(`Cannot read output '${output.name}': it is in GPU memory`);
    }
    byName.set(
      output.name,
      tensorCopy(dtypeOfTriton(output.datatype), output.shape, viewAt(output.ptr, output.size)),
    );
  }
  const outputs = new Map<string, NDArray>();
  for (const name of order) {
    const array = byName.get(name);
    if (array !== undefined) outputs.set(name, array);
  }
  for (const [name, array] of byName) if (!outputs.has(name)) outputs.set(name, array);
  const parameters = parameterValues(described.parameters);
  return {
    modelName: described.model,
    modelVersion: String(described.version),
    ...(described.id === "" ? {} : { id: described.id }),
    outputs,
    ...(Object.keys(parameters).length === 0 ? {} : { parameters }),
  };
}
