/**
 * The models the OpenAPI tests serve, so that the document has a path of each kind to describe
 * and schemathesis a body of each kind to fuzz: AddSub (batched FP32, the README's example),
 * `Text` (BYTES, fixed shape, not batched), `Mixed` (INT8 and an optional BOOL, batched, several
 * outputs of other dtypes) and `Repeat` (decoupled: n responses, at most 4, so that a fuzzed n
 * cannot stream without end).
 *
 * @module
 */

import { type BindOptions, type InferResult, ndarray } from "../mod.ts";
import { addSub, INPUTS, OUTPUTS } from "../examples/add_sub/model.ts";

/** The most responses `Repeat` answers. */
export const REPEAT_LIMIT = 4;

/**
 * The models, as bind options.
 *
 * @returns Fresh options of each.
 */
export function openApiModels(): BindOptions[] {
  return [
    {
      modelName: "AddSub",
      inferFunc: addSub,
      inputs: INPUTS,
      outputs: OUTPUTS,
      config: { maxBatchSize: 8 },
      strict: true,
    },
    {
      modelName: "Text",
      inferFunc: (requests) => requests.map((request) => ({ echo: request.data.text! })),
      inputs: [{ name: "text", dtype: "bytes", shape: [2] }],
      outputs: [{ name: "echo", dtype: "bytes", shape: [2] }],
      config: { batching: false },
      strict: true,
    },
    {
      modelName: "Mixed",
      inferFunc: (requests) =>
        requests.map((request) => {
          const x = request.data.x!;
          const values = Array.from(x.data as Int8Array, (value) => value * 2);
          return {
            doubled: ndarray(values, x.shape, { dtype: "int16" }),
            any: ndarray([values.some((value) => value !== 0) ? 1 : 0], [x.shape[0]!, 1], {
              dtype: "bool",
            }),
          };
        }),
      inputs: [
        { name: "x", dtype: "int8", shape: [2, -1] },
        { name: "flag", dtype: "bool", shape: [1], optional: true },
      ],
      outputs: [
        { name: "doubled", dtype: "int16", shape: [2, -1] },
        { name: "any", dtype: "bool", shape: [1] },
      ],
      config: { maxBatchSize: 1 },
    },
    {
      modelName: "Repeat",
      inferFunc: async function* (requests): AsyncGenerator<InferResult[]> {
        const n = Math.min(Number((requests[0]!.data.n!.data as Int32Array)[0]), REPEAT_LIMIT);
        for (let i = 0; i < n; i++) yield [{ i: ndarray([i], [1], { dtype: "int32" }) }];
      },
      inputs: [{ name: "n", dtype: "int32", shape: [1] }],
      outputs: [{ name: "i", dtype: "int32", shape: [1] }],
      config: { decoupled: true, batching: false },
    },
  ];
}
