import assert from "node:assert/strict";
import { TritonRuntimeError, TritonValidationError } from "../../errors.ts";
import { type NDArray, ndarray, sliceBatch } from "../../tensor/ndarray.ts";
import type { InferContext } from "../types.ts";
import { batch } from "./batch.ts";
import { padBatch } from "./pad_batch.ts";
import type { Inputs } from "./types.ts";
import { column, makeContext, makeRequest, values } from "./_test_util.ts";

const spec = {
  inputs: [
    { name: "x", dtype: "float32", shape: [1] },
    { name: "text", dtype: "bytes", shape: [1] },
  ],
  outputs: [{ name: "y", dtype: "float32", shape: [1] }],
} as const;
const context = makeContext({
  ...spec,
  config: { maxBatchSize: 16, batcher: { preferredBatchSize: [8, 4] } },
});

function sizesSeen(ctx: InferContext, rows: number): number[] {
  const seen: number[] = [];
  const infer = padBatch(({ x }) => {
    seen.push(x!.shape[0]!);
    return { y: x! };
  });
  infer({ x: column(Array.from({ length: rows }, (_, i) => i)) }, ctx);
  return seen;
}

Deno.test("padBatch() pads up to the smallest preferred batch size that fits", () => {
  assert.deepEqual(sizesSeen(context, 1), [4]);
  assert.deepEqual(sizesSeen(context, 4), [4]);
  assert.deepEqual(sizesSeen(context, 5), [8]);
  assert.deepEqual(sizesSeen(context, 9), [16]);
  assert.deepEqual(sizesSeen(context, 16), [16]);
});

Deno.test("padBatch() pads up to maxBatchSize without preferred sizes", () => {
  assert.deepEqual(sizesSeen(makeContext({ ...spec, config: { maxBatchSize: 6 } }), 2), [6]);
});

Deno.test("padBatch() repeats the last row of every input", () => {
  let seen: Inputs | undefined;
  const infer = padBatch((inputs) => {
    seen = inputs;
    return {};
  });
  infer({ x: column([1, 2, 3]), text: ndarray(["a", "b", "c"], [3, 1]) }, context);
  assert.deepEqual(values(seen!.x), [1, 2, 3, 3]);
  assert.deepEqual(values(seen!.text), ["a", "b", "c", "c"]);
  assert.deepEqual(seen!.text!.shape, [4, 1]);
});

Deno.test("padBatch() does not trim outputs, so batch() rejects padded outputs", () => {
  const padded = batch(padBatch(({ x }) => ({ y: x! })));
  assert.throws(
    () => padded([makeRequest({ x: column([1, 2, 3]) })], context),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message ===
        "Received output tensors with different batch sizes: y: [4,1]; expected batch size: 3",
  );
  const trimmed = batch(
    padBatch(({ x }): Record<string, NDArray> => ({ y: sliceBatch(x!, 0, 3) })),
  );
  assert.doesNotThrow(() => trimmed([makeRequest({ x: column([1, 2, 3]) })], context));
});

Deno.test("padBatch() rejects a batch larger than maxBatchSize", () => {
  assert.throws(
    () => sizesSeen(context, 17),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message === "Cannot pad the batch: its size 17 exceeds maxBatchSize 16",
  );
});

Deno.test("padBatch() rejects models without batching, lists of requests and missing contexts", () => {
  assert.throws(
    () => sizesSeen(makeContext({ ...spec, config: { batching: false } }), 1),
    /does not support batching/,
  );
  const infer = padBatch(({ x }) => ({ y: x! }));
  assert.throws(
    // deno-lint-ignore no-explicit-any
    () => (infer as any)([makeRequest({ x: column([1]) })], context),
    TritonRuntimeError,
  );
  assert.throws(
    () => infer({ x: column([1]) }, undefined as unknown as InferContext),
    TritonValidationError,
  );
});
