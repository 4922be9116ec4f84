/**
 * `inference.InferParameter` ↔ a plain parameter value, for request and response parameters
 * on both sides of the gRPC wire: the front end reads requests and writes responses, the client
 * writes requests and reads responses.
 *
 * @module
 */

import type { ParameterValue } from "../callable/types.ts";
import type { InferParameter } from "./grpc_codec.ts";

/** The field of an `InferParameter` that holds its value. */
export type InferParameterChoice = NonNullable<InferParameter["parameter_choice"]>;

const CHOICES: readonly InferParameterChoice[] = [
  "bool_param",
  "int64_param",
  "string_param",
  "double_param",
  "uint64_param",
];

/**
 * The field an `InferParameter` sets: `parameter_choice` on decoded messages, else the first
 * field present (messages built by hand).
 *
 * @param parameter The parameter.
 * @returns The field, or `undefined` when none is set.
 *
 * @example The marked field, the first set field, and none
 * ```ts
 * import { inferParameterChoice } from "./infer_parameter.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(inferParameterChoice({ uint64_param: "5", parameter_choice: "uint64_param" }), "uint64_param");
 * assert.equal(inferParameterChoice({ bool_param: false }), "bool_param");
 * assert.equal(inferParameterChoice({}), undefined);
 * ```
 */
export function inferParameterChoice(parameter: InferParameter): InferParameterChoice | undefined {
  return parameter.parameter_choice ?? CHOICES.find((key) => parameter[key] !== undefined);
}

/**
 * The value of an `InferParameter`; 64-bit integers (decimal strings once decoded) become
 * numbers.
 *
 * @param parameter The parameter.
 * @returns Its value, or `undefined` when no field is set.
 *
 * @example A decoded int64, an empty string, and no value
 * ```ts
 * import { inferParameterValue } from "./infer_parameter.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(inferParameterValue({ int64_param: "7", parameter_choice: "int64_param" }), 7);
 * assert.equal(inferParameterValue({ string_param: "", parameter_choice: "string_param" }), "");
 * assert.equal(inferParameterValue({}), undefined);
 * ```
 */
export function inferParameterValue(parameter: InferParameter): ParameterValue | undefined {
  switch (inferParameterChoice(parameter)) {
    case "bool_param":
      return Boolean(parameter.bool_param);
    case "string_param":
      return String(parameter.string_param);
    case "double_param":
      return Number(parameter.double_param);
    case "int64_param":
      return Number(parameter.int64_param);
    case "uint64_param":
      return Number(parameter.uint64_param);
    default:
      return undefined;
  }
}

/**
 * Encodes a parameter value as an `InferParameter`: booleans and strings as themselves, safe
 * integers as `int64_param`, other numbers as `double_param` (Triton's own choice).
 *
 * @param value The value.
 * @returns The parameter.
 * @throws {TypeError} For a value that is not a string, number or boolean.
 *
 * @example An integer, a fraction and a string; null refused
 * ```ts
 * import { toInferParameter } from "./infer_parameter.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(toInferParameter(3), { int64_param: 3 });
 * assert.deepEqual(toInferParameter(1.5), { double_param: 1.5 });
 * assert.deepEqual(toInferParameter("x"), { string_param: "x" });
 * assert.throws(() => toInferParameter(null as never), TypeError);
 * ```
 */
export function toInferParameter(value: ParameterValue): InferParameter {
  switch (typeof value) {
    case "boolean":
      return { bool_param: value };
    case "string":
      return { string_param: value };
    case "number":
      return Number.isSafeInteger(value) ? { int64_param: value } : { double_param: value };
    default:
      throw new TypeError(
        `expected a string, number or boolean, got ${value === null ? "null" : typeof value}`,
      );
  }
}

/**
 * Encodes a record of parameter values.
 *
 * @param values The values by name.
 * @returns The `parameters` map of a message.
 * @throws {TypeError} For a value that is not a string, number or boolean; the message names it.
 *
 * @example Encode a boolean; an array refused
 * ```ts
 * import { toInferParameters } from "./infer_parameter.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(toInferParameters({ k: true }), { k: { bool_param: true } });
 * assert.throws(() => toInferParameters({ k: [] as never }), {
 *   message: "Invalid parameter 'k': expected a string, number or boolean, got object",
 * });
 * ```
 */
export function toInferParameters(
  values: Readonly<Record<string, ParameterValue>>,
): Record<string, InferParameter> {
  const parameters: Record<string, InferParameter> = {};
  for (const [name, value] of Object.entries(values)) {
    try {
      parameters[name] = toInferParameter(value);
    } catch (error) {
      throw new TypeError(`Invalid parameter '${name}': ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
  return parameters;
}

/**
 * Decodes a `parameters` map; parameters without a value are left out.
 *
 * @param parameters The map, as decoded.
 * @returns The values by name.
 *
 * @example A double kept, an empty parameter left out
 * ```ts
 * import { fromInferParameters } from "./infer_parameter.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(
 *   fromInferParameters({ a: { double_param: 0.5, parameter_choice: "double_param" }, b: {} }),
 *   { a: 0.5 },
 * );
 * ```
 */
export function fromInferParameters(
  parameters: Readonly<Record<string, InferParameter>> | undefined,
): Record<string, ParameterValue> {
  const values: Record<string, ParameterValue> = {};
  for (const [name, parameter] of Object.entries(parameters ?? {})) {
    const value = inferParameterValue(parameter);
    if (value !== undefined) values[name] = value;
  }
  return values;
}
