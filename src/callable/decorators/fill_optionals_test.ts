import assert from "node:assert/strict";
import {
  TritonBadParameterError,
  TritonRuntimeError,
  TritonValidationError,
} from "../../errors.ts";
import { ndarray } from "../../tensor/ndarray.ts";
import type { InferContext, InferRequest } from "../types.ts";
import { fillOptionals } from "./fill_optionals.ts";
import type { TensorSpec } from "../../config/tensor_spec.ts";
import { column, makeContext, makeRequest, values } from "./_test_util.ts";

const inputs: TensorSpec[] = [
  { name: "x", dtype: "float32", shape: [1] },
  { name: "threshold", dtype: "float32", shape: [1], optional: true },
  { name: "labels", dtype: "bytes", shape: [-1], optional: true },
  { name: "window", dtype: "int32", shape: [2, -1], optional: true },
];
const outputs: TensorSpec[] = [{ name: "y", dtype: "float32", shape: [1] }];
const context = makeContext({ inputs, outputs });

function capture(): { seen: InferRequest[][]; infer: (requests: InferRequest[]) => [] } {
  const seen: InferRequest[][] = [];
  return {
    seen,
    infer: (requests: InferRequest[]) => {
      seen.push(requests);
      return [];
    },
  };
}

Deno.test("fillOptionals() tiles defaults to each request's batch size and keeps given inputs", () => {
  const { seen, infer } = capture();
  const filled = fillOptionals({
    threshold: new Float32Array([0.5]),
    labels: ["a", "b"],
    window: ndarray(new Int32Array([1, 2, 3, 4, 5, 6]), [2, 3]),
  }, infer);
  filled([
    makeRequest({ x: column([1, 2, 3]) }),
    makeRequest({ x: column([4]), threshold: column([0.25]) }),
  ], context);
  const [first, second] = seen[0]!;
  assert.deepEqual(first!.data.threshold!.shape, [3, 1]);
  assert.deepEqual(values(first!.data.threshold), [0.5, 0.5, 0.5]);
  assert.deepEqual(first!.data.labels!.shape, [3, 2]);
  assert.deepEqual(values(first!.data.labels), ["a", "b", "a", "b", "a", "b"]);
  assert.deepEqual(first!.data.window!.shape, [3, 2, 3]);
  assert.deepEqual(values(first!.data.window).slice(0, 8), [1, 2, 3, 4, 5, 6, 1, 2]);
  assert.deepEqual(values(second!.data.threshold), [0.25]);
  assert.deepEqual(second!.data.labels!.shape, [1, 2]);
});

Deno.test("fillOptionals() leaves the original requests unchanged and keeps parameters and signals", () => {
  const { seen, infer } = capture();
  const original = makeRequest({ x: column([1]) }, { temperature: 0.7 });
  const complete = makeRequest({ x: column([1]), threshold: column([1]) });
  fillOptionals({ threshold: new Float32Array([0.5]) }, infer)([original, complete], context);
  assert.deepEqual(Object.keys(original.data), ["x"]);
  const copy = seen[0]![0]!;
  assert.notEqual(copy, original);
  assert.equal(copy.parameters, original.parameters);
  assert.equal(copy.signal, original.signal);
  assert.equal(copy.requestedOutputNames, original.requestedOutputNames);
  assert.equal(seen[0]![1], complete);
});

Deno.test("fillOptionals() inserts defaults as given for models without batching", () => {
  const { seen, infer } = capture();
  const unbatched = makeContext({ inputs, outputs, config: { batching: false } });
  fillOptionals({ threshold: [0.5] }, infer)(
    [makeRequest({ x: ndarray(new Float32Array([1])) })],
    unbatched,
  );
  const threshold = seen[0]![0]!.data.threshold!;
  assert.equal(threshold.dtype, "float32");
  assert.deepEqual(threshold.shape, [1]);
});

Deno.test("fillOptionals() converts plain arrays to the declared dtype", () => {
  const { seen, infer } = capture();
  fillOptionals({ window: [[1, 2], [3, 4]] }, infer)([makeRequest({ x: column([1]) })], context);
  const window = seen[0]![0]!.data.window!;
  assert.equal(window.dtype, "int32");
  assert.deepEqual(window.shape, [1, 2, 2]);
});

Deno.test("fillOptionals() rejects defaults for undeclared inputs", () => {
  const infer = fillOptionals({ temp: [1], bias: [0] }, capture().infer);
  assert.throws(
    () => infer([makeRequest({ x: column([1]) })], context),
    (error) =>
      error instanceof TritonBadParameterError &&
      error.message ===
        "Cannot fill optional inputs: model 'Model' has no inputs named bias, temp (declared: x, threshold, labels, window)",
  );
});

Deno.test("fillOptionals() rejects defaults of another dtype", () => {
  const infer = fillOptionals({ threshold: new Float64Array([0.5]) }, capture().infer);
  assert.throws(
    () => infer([makeRequest({ x: column([1]) })], context),
    (error) =>
      error instanceof TritonBadParameterError &&
      error.message ===
        "Cannot use defaults whose dtypes differ from the declared inputs: threshold: dtype=float64 expected_dtype=float32",
  );
});

Deno.test("fillOptionals() rejects defaults of another shape, with -1 as a wildcard", () => {
  const infer = fillOptionals({
    threshold: new Float32Array([0.5, 0.5]),
    window: ndarray(new Int32Array(3), [3, 1]),
  }, capture().infer);
  assert.throws(
    () => infer([makeRequest({ x: column([1]) })], context),
    (error) =>
      error instanceof TritonBadParameterError &&
      error.message ===
        "Cannot use defaults whose shapes differ from the declared inputs: threshold: shape=[2] expected_shape=[1], window: shape=[3,1] expected_shape=[2,-1]",
  );
  const wildcard = fillOptionals({ window: ndarray(new Int32Array(10), [2, 5]) }, capture().infer);
  wildcard([makeRequest({ x: column([1]) })], context);
});

Deno.test("fillOptionals() rejects values that cannot be converted", () => {
  const infer = fillOptionals({ window: ["a"] }, capture().infer);
  assert.throws(
    () => infer([makeRequest({ x: column([1]) })], context),
    (error) =>
      error instanceof TritonBadParameterError &&
      /Cannot use the default of input 'window': Cannot build int32 ndarray/.test(error.message),
  );
});

Deno.test("fillOptionals() rejects defaults that are not tensor-like at once", () => {
  assert.throws(
    // deno-lint-ignore no-explicit-any
    () => fillOptionals({ threshold: 0.5 as any }, capture().infer),
    (error) =>
      error instanceof TritonBadParameterError &&
      error.message ===
        "Cannot use the default of input 'threshold': expected an NDArray, a TypedArray or an array, got number",
  );
});

Deno.test("fillOptionals() needs a context and the list of requests", () => {
  const infer = fillOptionals({ threshold: [0.5] }, capture().infer);
  assert.throws(
    () => infer([makeRequest({ x: column([1]) })], undefined as unknown as InferContext),
    (error) => error instanceof TritonValidationError && /not bound to a model/.test(error.message),
  );
  // deno-lint-ignore no-explicit-any
  assert.throws(() => infer({ x: column([1]) } as any, context), TritonRuntimeError);
});
