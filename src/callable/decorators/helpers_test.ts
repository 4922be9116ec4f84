import assert from "node:assert/strict";
import { TritonRuntimeError, TritonValidationError } from "../../errors.ts";
import { ndarray } from "../../tensor/ndarray.ts";
import { convertOutput, getInferenceRequestBatchSize } from "./helpers.ts";
import { column, makeContext, makeRequest } from "./_test_util.ts";

const { model } = makeContext({
  inputs: [{ name: "x", dtype: "float32", shape: [1] }],
  outputs: [
    { name: "a", dtype: "float32", shape: [1] },
    { name: "b", dtype: "float32", shape: [1] },
  ],
});

Deno.test("getInferenceRequestBatchSize() reads axis 0 of the first input", () => {
  assert.equal(getInferenceRequestBatchSize(makeRequest({ x: column([1, 2, 3]) })), 3);
  assert.equal(getInferenceRequestBatchSize({ data: column([1, 2]) }), 2);
  assert.equal(
    getInferenceRequestBatchSize({ a: ndarray(new Int8Array(4), [4, 1]), b: column([1]) }),
    4,
  );
});

Deno.test("getInferenceRequestBatchSize() rejects requests without inputs or batch axis", () => {
  assert.throws(
    () => getInferenceRequestBatchSize(makeRequest({})),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message === "Cannot get the batch size of a request: it has no inputs",
  );
  assert.throws(
    () => getInferenceRequestBatchSize({ x: ndarray(new Float32Array([1]), []) }),
    /scalar without a batch axis/,
  );
});

Deno.test("convertOutput() passes objects through and names arrays by the declared outputs", () => {
  const a = column([1]);
  const b = column([2]);
  const named = { a, b };
  assert.equal(convertOutput(named, model), named);
  assert.deepEqual(convertOutput([a, b], model), { a, b });
});

Deno.test("convertOutput() rejects arrays of the wrong length and other values", () => {
  const a = column([1]);
  assert.throws(
    () => convertOutput([a, a, a], model),
    (error) =>
      error instanceof TritonValidationError &&
      error.message ===
        "Cannot map positional outputs: got 3 tensors but the model declares 2 outputs (a, b)",
  );
  assert.throws(() => convertOutput([a, a], undefined), /not bound to a model/);
  assert.throws(() => convertOutput(a, model), /a single NDArray/);
  assert.throws(() => convertOutput(42, model), /Unsupported output type: number/);
  assert.throws(() => convertOutput(null, model), TritonValidationError);
  assert.throws(
    () => convertOutput(Promise.resolve({ a }), model),
    /Unsupported output type: a promise/,
  );
  assert.throws(
    () => convertOutput((function* (): Generator<never> {})(), model),
    /Unsupported output type: an iterable/,
  );
});

Deno.test("convertOutput() rejects outputs that are not NDArrays", () => {
  assert.throws(
    () => convertOutput({ a: [1, 2, 3] }, model),
    (error) =>
      error instanceof TritonValidationError &&
      error.message === "Invalid output 'a': expected an NDArray, got Array",
  );
  assert.throws(
    () => convertOutput([column([1]), 2], model),
    (error) =>
      error instanceof TritonValidationError &&
      error.message === "Invalid output 'b': expected an NDArray, got number",
  );
});
