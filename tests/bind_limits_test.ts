// Combinations the Triton core refuses are refused by bind() on both engines, with a clear
// error naming the field, before the model reaches an engine (the core's own answer would be
// "failed to poll from model repository").

import assert from "node:assert/strict";
import type { BindOptions } from "../mod.ts";
import { ENGINES, startServer } from "./_helpers.ts";

function model(extra: Partial<BindOptions> = {}): BindOptions {
  return {
    modelName: "Limits",
    inferFunc: (requests) => requests.map(({ data: { x } }) => ({ y: x! })),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    ...extra,
  };
}

const REFUSED: [string, Partial<BindOptions>, string, string][] = [
  [
    "preserveOrdering with two priority levels",
    { config: { batcher: { preserveOrdering: true, priorityLevels: 2, defaultPriorityLevel: 1 } } },
    "TritonBadParameterError",
    "Invalid model config: batcher.preserveOrdering allows one priority level at most, got priorityLevels 2",
  ],
  [
    "maxBatchSize beyond the core's int32",
    { config: { maxBatchSize: 2 ** 31 } },
    "TritonBadParameterError",
    "Invalid model config: maxBatchSize must be an integer within [1, 2147483647] when batching is on, got 2147483648",
  ],
  [
    "an input without dimensions",
    { inputs: [{ name: "x", dtype: "float32", shape: [] }] },
    "TritonValidationError",
    "Invalid input 'x': shape [] has no dimensions; give at least one ([1] for a single value)",
  ],
  [
    "an output without dimensions, not batching",
    { outputs: [{ name: "y", dtype: "float32", shape: [] }], config: { batching: false } },
    "TritonValidationError",
    "Invalid output 'y': shape [] has no dimensions; give at least one ([1] for a single value)",
  ],
  [
    "an empty dimension",
    { inputs: [{ name: "x", dtype: "float32", shape: [2, 0] }] },
    "TritonValidationError",
    "Invalid input 'x': dimension 0 in shape [2,0] must be -1 or an integer >= 1",
  ],
  [
    "the model name '..'",
    { modelName: ".." },
    "TritonValidationError",
    "Cannot bind model '..': the name must match /^[a-zA-Z0-9._-]+$/",
  ],
];

for (const engine of ENGINES) {
  Deno.test(`bind() refuses what the Triton core refuses [${engine}]`, async (t) => {
    await using triton = await startServer({ engine });
    for (const [what, extra, name, message] of REFUSED) {
      await t.step(what, () => {
        assert.throws(() => triton.bind(model(extra)), { name, message });
      });
    }
    await t.step("the accepted neighbours load and the server serves", async () => {
      await triton.bind(model({
        config: { batcher: { preserveOrdering: true, priorityLevels: 1, defaultPriorityLevel: 1 } },
      }));
      const response = await fetch(`${triton.urls.http}/v2/models/Limits/infer`, {
        method: "POST",
        body: JSON.stringify({
          inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], data: [1, 2] }],
        }),
      });
      assert.deepEqual((await response.json()).outputs[0].data, [1, 2]);
    });
  });
}
