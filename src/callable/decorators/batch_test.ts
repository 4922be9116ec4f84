import assert from "node:assert/strict";
import { TritonRuntimeError, TritonValidationError } from "../../errors.ts";
import { type NDArray, ndarray } from "../../tensor/ndarray.ts";
import type { InferContext, InferResult } from "../types.ts";
import { batch } from "./batch.ts";
import type { BatchOutput, Inputs } from "./types.ts";
import { column, makeContext, makeRequest, values } from "./_test_util.ts";

const context = makeContext({
  inputs: [
    { name: "a", dtype: "float32", shape: [1] },
    { name: "b", dtype: "float32", shape: [1] },
  ],
  outputs: [
    { name: "sum", dtype: "float32", shape: [1] },
    { name: "diff", dtype: "float32", shape: [1] },
  ],
  config: { maxBatchSize: 16 },
});

function addSub({ a, b }: Inputs): Record<string, NDArray> {
  const x = a!.data as Float32Array;
  const y = b!.data as Float32Array;
  return {
    sum: ndarray(x.map((v, i) => v + y[i]!), a!.shape),
    diff: ndarray(x.map((v, i) => v - y[i]!), a!.shape),
  };
}

const requests = () => [
  makeRequest({ a: column([1, 2]), b: column([10, 20]) }),
  makeRequest({ a: column([3]), b: column([30]) }),
  makeRequest({ a: column([4, 5, 6]), b: column([40, 50, 60]) }),
];

Deno.test("batch() concatenates inputs and splits outputs by each request's batch size", () => {
  let seen: Inputs | undefined;
  let seenContext: InferContext | undefined;
  const infer = batch((inputs, ctx) => {
    seen = inputs;
    seenContext = ctx;
    return addSub(inputs);
  });
  const results = infer(requests(), context) as InferResult[];
  assert.deepEqual(Object.keys(seen!).sort(), ["a", "b"]);
  assert.deepEqual(seen!.a!.shape, [6, 1]);
  assert.deepEqual(values(seen!.a), [1, 2, 3, 4, 5, 6]);
  assert.equal(seenContext, context);
  assert.equal(results.length, 3);
  assert.deepEqual(results.map((r) => r.sum!.shape), [[2, 1], [1, 1], [3, 1]]);
  assert.deepEqual(results.map((r) => values(r.sum)), [[11, 22], [33], [44, 55, 66]]);
  assert.deepEqual(results.map((r) => values(r.diff)), [[-9, -18], [-27], [-36, -45, -54]]);
});

Deno.test("batch() maps an array of outputs positionally onto the declared outputs", () => {
  const infer = batch((inputs) => {
    const { sum, diff } = addSub(inputs);
    return [sum!, diff!];
  });
  const results = infer(requests(), context) as InferResult[];
  assert.deepEqual(Object.keys(results[0]!), ["sum", "diff"]);
  assert.deepEqual(values(results[1]!.diff), [-27]);
});

Deno.test("batch() rejects an output array whose length differs from the declared outputs", () => {
  const infer = batch((inputs) => [addSub(inputs).sum!]);
  assert.throws(
    () => infer(requests(), context),
    (error) =>
      error instanceof TritonValidationError && /got 1 tensors/.test(error.message) &&
      /declares 2 outputs \(sum, diff\)/.test(error.message),
  );
});

Deno.test("batch() rejects requests with different sets of inputs", () => {
  const infer = batch(addSub);
  assert.throws(
    () =>
      infer([
        makeRequest({ a: column([1]), b: column([2]) }),
        makeRequest({ a: column([1]) }),
      ], context),
    (error) =>
      error instanceof TritonValidationError &&
      error.message ===
        "Cannot batch requests with different sets of inputs: request 0 has [a,b], request 1 has [a]",
  );
});

Deno.test("batch() accepts the same inputs given in a different order", () => {
  const infer = batch(addSub);
  const results = infer([
    makeRequest({ a: column([1]), b: column([2]) }),
    makeRequest({ b: column([4]), a: column([3]) }),
  ], context) as InferResult[];
  assert.deepEqual(results.map((r) => values(r.sum)), [[3], [7]]);
});

Deno.test("batch() names every output whose axis 0 differs from the total batch size", () => {
  const infer = batch(({ a }) => ({
    sum: a!,
    diff: ndarray(new Float32Array(2), [2, 1]),
    other: ndarray(new Float32Array(1), []),
  }));
  assert.throws(
    () => infer(requests(), context),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message ===
        "Received output tensors with different batch sizes: diff: [2,1], other: []; expected batch size: 6",
  );
});

Deno.test("batch() resolves a promise from an async function", async () => {
  const infer = batch(async (inputs) => {
    await Promise.resolve();
    return addSub(inputs);
  });
  const pending = infer(requests(), context);
  assert.ok(pending instanceof Promise);
  const results = await pending;
  assert.deepEqual(results.map((r) => values(r.sum)), [[11, 22], [33], [44, 55, 66]]);
});

Deno.test("batch() splits every step of a generator, lazily", () => {
  let steps = 0;
  const infer = batch(function* ({ a }): Generator<BatchOutput> {
    for (const scale of [1, 2]) {
      steps++;
      yield { sum: ndarray((a!.data as Float32Array).map((v) => v * scale), a!.shape) };
    }
  });
  const stream = infer(requests(), context) as Iterable<InferResult[]>;
  assert.ok(!Array.isArray(stream));
  assert.equal(steps, 0);
  const collected = [...stream];
  assert.equal(steps, 2);
  assert.deepEqual(
    collected.map((step) => step.map((r) => values(r.sum))),
    [[[1, 2], [3], [4, 5, 6]], [[2, 4], [6], [8, 10, 12]]],
  );
});

Deno.test("batch() splits every step of an async generator", async () => {
  const infer = batch(async function* ({ a }): AsyncGenerator<BatchOutput> {
    yield [a!, a!];
    await Promise.resolve();
    yield { sum: a! };
  });
  const stream = infer(requests(), context) as AsyncIterable<InferResult[]>;
  const collected: InferResult[][] = [];
  for await (const step of stream) collected.push(step);
  assert.equal(collected.length, 2);
  assert.deepEqual(Object.keys(collected[0]![0]!), ["sum", "diff"]);
  assert.deepEqual(collected[1]!.map((r) => values(r.sum)), [[1, 2], [3], [4, 5, 6]]);
});

Deno.test("batch() fails a stream at the step whose outputs have a wrong batch size", () => {
  const infer = batch(function* ({ a }): Generator<BatchOutput> {
    yield { sum: a! };
    yield { sum: ndarray(new Float32Array(1), [1, 1]) };
  });
  const iterator = (infer(requests(), context) as Iterable<InferResult[]>)[Symbol.iterator]();
  assert.equal(iterator.next().done, false);
  assert.throws(() => iterator.next(), TritonRuntimeError);
});

Deno.test("batch() accepts an object with an infer method", () => {
  class Model {
    #offset = 100;
    infer({ a }: Inputs): Record<string, NDArray> {
      return { sum: ndarray((a!.data as Float32Array).map((v) => v + this.#offset), a!.shape) };
    }
  }
  const infer = batch(new Model());
  const results = infer(requests(), context) as InferResult[];
  assert.deepEqual(values(results[1]!.sum), [103]);
});

Deno.test("batch() concatenates bytes inputs", () => {
  const infer = batch(({ text }) => ({ echo: text! }));
  const results = infer([
    makeRequest({ text: ndarray(["a", "b"], [2, 1]) }),
    makeRequest({ text: ndarray(["c"], [1, 1]) }),
  ], context) as InferResult[];
  assert.deepEqual(results.map((r) => values(r.echo)), [["a", "b"], ["c"]]);
});

Deno.test("batch() gives the function tensors only, not request parameters", () => {
  let names: string[] = [];
  const infer = batch((inputs) => {
    names = Object.keys(inputs);
    return { sum: inputs.a! };
  });
  infer([makeRequest({ a: column([1]) }, { temperature: 0.5 })], context);
  assert.deepEqual(names, ["a"]);
});

Deno.test("batch() returns no results for no requests", () => {
  assert.deepEqual(batch(addSub)([], context), []);
});

Deno.test("batch() refuses an inputs object (used below another batch)", () => {
  const infer = batch(addSub);
  assert.throws(
    // deno-lint-ignore no-explicit-any
    () => infer({ a: column([1]) } as any, context),
    (error) =>
      error instanceof TritonRuntimeError && /must be used above batch/.test(error.message),
  );
});

Deno.test("batch() rejects something that is not callable", () => {
  // deno-lint-ignore no-explicit-any
  assert.throws(() => batch(42 as any), TritonValidationError);
});
