import assert from "node:assert/strict";
import { TritonRuntimeError, TritonValidationError } from "../../errors.ts";
import { ndarray } from "../../tensor/ndarray.ts";
import type { InferResult } from "../types.ts";
import { sample } from "./sample.ts";
import type { BatchOutput, Inputs } from "./types.ts";
import { makeContext, makeRequest, values } from "./_test_util.ts";

const context = makeContext({
  inputs: [{ name: "x", dtype: "int32", shape: [2] }],
  outputs: [
    { name: "y", dtype: "int32", shape: [2] },
    { name: "z", dtype: "int32", shape: [2] },
  ],
  config: { batching: false },
});

const x = (a: number, b: number) => ndarray(new Int32Array([a, b]));

Deno.test("sample() passes the first request's inputs and wraps the result in a list", () => {
  const seen: Inputs[] = [];
  const infer = sample((inputs) => {
    seen.push(inputs);
    return { y: inputs.x!, z: inputs.x! };
  });
  const results = infer([makeRequest({ x: x(1, 2) })], context) as InferResult[];
  assert.equal(seen.length, 1);
  assert.deepEqual(values(seen[0]!.x), [1, 2]);
  assert.equal(results.length, 1);
  assert.deepEqual(values(results[0]!.y), [1, 2]);
});

Deno.test("sample() maps an array of outputs onto the declared outputs", () => {
  const infer = sample(({ x }) => [x!, ndarray((x!.data as Int32Array).map((v) => -v))]);
  const [result] = infer([makeRequest({ x: x(3, 4) })], context) as InferResult[];
  assert.deepEqual(Object.keys(result!), ["y", "z"]);
  assert.deepEqual(values(result!.z), [-3, -4]);
});

Deno.test("sample() rejects an output array that does not match the declared outputs", () => {
  const infer = sample(({ x }) => [x!]);
  assert.throws(() => infer([makeRequest({ x: x(3, 4) })], context), TritonValidationError);
});

Deno.test("sample() ignores requests after the first, like PyTriton", () => {
  let calls = 0;
  const infer = sample(({ x }) => {
    calls++;
    return { y: x! };
  });
  const results = infer([
    makeRequest({ x: x(1, 1) }),
    makeRequest({ x: x(2, 2) }),
  ], context) as InferResult[];
  assert.equal(calls, 1);
  assert.equal(results.length, 1);
});

Deno.test("sample() resolves async functions and wraps every step of a generator", async () => {
  const asyncInfer = sample(async ({ x }) => {
    await Promise.resolve();
    return { y: x! };
  });
  const results = await (asyncInfer([makeRequest({ x: x(5, 6) })], context) as Promise<
    InferResult[]
  >);
  assert.deepEqual(values(results[0]!.y), [5, 6]);

  const streaming = sample(function* ({ x }): Generator<BatchOutput> {
    yield { y: x! };
    yield [x!, x!];
  });
  const steps = [
    ...(streaming([makeRequest({ x: x(7, 8) })], context) as Iterable<
      InferResult[]
    >),
  ];
  assert.equal(steps.length, 2);
  assert.deepEqual(steps.map((step) => step.length), [1, 1]);
  assert.deepEqual(Object.keys(steps[1]![0]!), ["y", "z"]);
});

Deno.test("sample() refuses an inputs object", () => {
  const infer = sample(({ x }) => ({ y: x! }));
  // deno-lint-ignore no-explicit-any
  assert.throws(() => infer({ x: x(1, 2) } as any, context), TritonRuntimeError);
});
