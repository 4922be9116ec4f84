import assert from "node:assert/strict";
import {
  TritonBadParameterError,
  TritonRuntimeError,
  TritonValidationError,
} from "../../errors.ts";
import { type NDArray, ndarray } from "../../tensor/ndarray.ts";
import type { InferContext, InferRequest, InferResult } from "../types.ts";
import { batch } from "./batch.ts";
import { firstValue, type FirstValueOptions } from "./first_value.ts";
import type { BatchFunc, Inputs } from "./types.ts";
import { column, makeContext, makeRequest, values } from "./_test_util.ts";

const spec = {
  inputs: [
    { name: "x", dtype: "float32", shape: [1] },
    { name: "t", dtype: "float32", shape: [1] },
    { name: "pair", dtype: "int32", shape: [2] },
    { name: "mode", dtype: "bytes", shape: [1] },
  ],
  outputs: [{ name: "y", dtype: "float32", shape: [1] }],
} as const;
const context = makeContext(spec);

function capture(
  keys: string[],
  options?: FirstValueOptions,
): { seen: Inputs[]; infer: BatchFunc } {
  const seen: Inputs[] = [];
  const infer = firstValue(keys, (inputs) => {
    seen.push(inputs);
    return { y: inputs.x! };
  }, options);
  return { seen, infer };
}

Deno.test("firstValue() squeezes a first value whose dimensions are all 1 to a 0-d tensor", () => {
  const { seen, infer } = capture(["t", "mode"]);
  infer({ x: column([1, 2]), t: column([0.5, 0.5]), mode: ndarray(["up", "up"], [2, 1]) }, context);
  assert.deepEqual(seen[0]!.t!.shape, []);
  assert.deepEqual(values(seen[0]!.t), [0.5]);
  assert.deepEqual(seen[0]!.mode!.shape, []);
  assert.deepEqual(values(seen[0]!.mode), ["up"]);
  assert.deepEqual(seen[0]!.x!.shape, [2, 1]);
});

Deno.test("firstValue() keeps the trailing shape without squeezing or when a dimension is not 1", () => {
  const { seen, infer } = capture(["t", "pair"], { squeezeSingleValues: false });
  const pair = ndarray(new Int32Array([1, 2, 1, 2]), [2, 2]);
  infer({ x: column([1, 2]), t: column([3, 3]), pair }, context);
  assert.deepEqual(seen[0]!.t!.shape, [1]);
  assert.deepEqual(seen[0]!.pair!.shape, [2]);
  const squeezing = capture(["pair"]);
  squeezing.infer({ x: column([1, 2]), pair }, context);
  assert.deepEqual(squeezing.seen[0]!.pair!.shape, [2]);
  assert.deepEqual(values(squeezing.seen[0]!.pair), [1, 2]);
});

Deno.test("firstValue() in strict mode rejects values that differ along axis 0", () => {
  const { infer } = capture(["t"]);
  assert.throws(
    () => infer({ x: column([1, 2]), t: column([0.5, 0.25]) }, context),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message ===
        "The values of input 't' are not equal: [0.5, 0.25]; disable strict mode in firstValue ({ strict: false }) or send equal values",
  );
  const bytes = capture(["mode"]);
  assert.throws(
    () => bytes.infer({ x: column([1, 2]), mode: ndarray(["a", "a\0"], [2, 1]) }, context),
    /input 'mode' are not equal: \["a", "a\\u0000"\]/,
  );
});

Deno.test("firstValue() without strict mode takes the first value", () => {
  const { seen, infer } = capture(["t"], { strict: false });
  infer({ x: column([1, 2]), t: column([0.5, 0.25]) }, context);
  assert.deepEqual(values(seen[0]!.t), [0.5]);
});

Deno.test("firstValue() skips absent keys", () => {
  const { seen, infer } = capture(["t", "absent"]);
  infer({ x: column([1]) }, context);
  assert.deepEqual(Object.keys(seen[0]!), ["x"]);
});

Deno.test("firstValue() on a list of requests replaces each request's values", () => {
  const seen: InferRequest[][] = [];
  const infer = firstValue(["t"], (requests: InferRequest[]) => {
    seen.push(requests);
    return requests.map((request) => ({ y: request.data.x! }));
  });
  const original = makeRequest({ x: column([1, 2]), t: column([2, 2]) }, { p: 1 });
  infer([original, makeRequest({ x: column([3]), t: column([5]) })], context);
  assert.deepEqual(seen[0]!.map((request) => values(request.data.t)), [[2], [5]]);
  assert.deepEqual(seen[0]!.map((request) => request.data.t!.shape), [[], []]);
  assert.equal(seen[0]![0]!.parameters, original.parameters);
  assert.deepEqual(original.data.t!.shape, [2, 1]);
  assert.throws(
    () => infer([makeRequest({ x: column([1, 2]), t: column([2, 3]) })], context),
    TritonRuntimeError,
  );
});

Deno.test("firstValue() below batch() sees one value for the whole batch", () => {
  const infer = batch(firstValue(["t"], ({ x, t }): Record<string, NDArray> => {
    const factor = (t!.data as Float32Array)[0]!;
    return { y: ndarray((x!.data as Float32Array).map((v) => v * factor), x!.shape) };
  }));
  const results = infer([
    makeRequest({ x: column([1, 2]), t: column([3, 3]) }),
    makeRequest({ x: column([4]), t: column([3]) }),
  ], context) as InferResult[];
  assert.deepEqual(results.map((r) => values(r.y)), [[3, 6], [12]]);
});

Deno.test("firstValue() needs a batching model and a context", () => {
  const { infer } = capture(["t"]);
  const unbatched = makeContext({ ...spec, config: { batching: false } });
  assert.throws(
    () => infer({ x: column([1]), t: column([1]) }, unbatched),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message === "Cannot use firstValue: model 'Model' does not support batching",
  );
  assert.throws(
    () => infer({ x: column([1]) }, undefined as unknown as InferContext),
    TritonValidationError,
  );
});

Deno.test("firstValue() refuses the reserved key tritonContext when decorating", () => {
  assert.throws(
    () => firstValue(["t", "tritonContext"], (inputs) => ({ y: inputs.x! })),
    (error) => error instanceof TritonBadParameterError && /tritonContext/.test(error.message),
  );
});
