import assert from "node:assert/strict";
import { TritonRuntimeError } from "../../errors.ts";
import { ndarray } from "../../tensor/ndarray.ts";
import type { InferRequest, InferResult } from "../types.ts";
import { batch } from "./batch.ts";
import { groupByKeys } from "./group_by_keys.ts";
import { column, makeContext, makeRequest, values } from "./_test_util.ts";

const context = makeContext({
  inputs: [
    { name: "x", dtype: "float32", shape: [1] },
    { name: "bias", dtype: "float32", shape: [1], optional: true },
    { name: "scale", dtype: "float32", shape: [1], optional: true },
  ],
  outputs: [{ name: "y", dtype: "float32", shape: [1] }],
});

const mixed = (): InferRequest[] => [
  makeRequest({ x: column([1]), scale: column([2]) }),
  makeRequest({ x: column([2]) }),
  makeRequest({ bias: column([5]), x: column([3]) }),
  makeRequest({ x: column([4]), scale: column([3]) }),
  makeRequest({ x: column([5]) }),
];

Deno.test("groupByKeys() calls once per set of input names, in sorted order, and restores the order", () => {
  const calls: string[][] = [];
  const infer = groupByKeys((requests: InferRequest[]) => {
    calls.push(requests.map((r) => `${Object.keys(r.data).sort()}:${values(r.data.x)}`));
    return requests.map((r) => ({ y: r.data.x! }));
  });
  const results = infer(mixed(), context) as InferResult[];
  assert.deepEqual(calls, [
    ["bias,x:3"],
    ["scale,x:1", "scale,x:4"],
    ["x:2", "x:5"],
  ]);
  assert.deepEqual(results.map((r) => values(r.y)), [[1], [2], [3], [4], [5]]);
});

Deno.test("groupByKeys() above batch() lets optional inputs be batched", () => {
  const infer = groupByKeys(batch(({ x, bias, scale }) => {
    const out = (x!.data as Float32Array).map((v, i) =>
      v * ((scale?.data as Float32Array | undefined)?.[i] ?? 1) +
      ((bias?.data as Float32Array | undefined)?.[i] ?? 0)
    );
    return { y: ndarray(out, x!.shape) };
  }));
  const results = infer(mixed(), context) as InferResult[];
  assert.deepEqual(results.map((r) => values(r.y)), [[2], [2], [8], [12], [5]]);
});

Deno.test("groupByKeys() passes the requests themselves, with parameters and signals", () => {
  const original = makeRequest({ x: column([1]) }, { mode: "fast" });
  let seen: InferRequest | undefined;
  const infer = groupByKeys((requests: InferRequest[]) => {
    seen = requests[0];
    return [{}];
  });
  infer([original], context);
  assert.equal(seen, original);
  assert.equal(seen!.parameters.mode, "fast");
});

Deno.test("groupByKeys() runs async groups one after another", async () => {
  const events: string[] = [];
  const infer = groupByKeys(async (requests: InferRequest[]) => {
    const name = Object.keys(requests[0]!.data).sort().join("+");
    events.push(`start ${name}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
    events.push(`end ${name}`);
    return requests.map((r) => ({ y: r.data.x! }));
  });
  const results = await (infer(mixed(), context) as Promise<InferResult[]>);
  assert.deepEqual(events, [
    "start bias+x",
    "end bias+x",
    "start scale+x",
    "end scale+x",
    "start x",
    "end x",
  ]);
  assert.deepEqual(results.map((r) => values(r.y)), [[1], [2], [3], [4], [5]]);
});

Deno.test("groupByKeys() rejects a group answered with the wrong number of results", () => {
  const infer = groupByKeys((requests: InferRequest[]) => requests.slice(1).map(() => ({})));
  assert.throws(
    () => infer(mixed(), context),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message ===
        "Cannot group requests by keys: the wrapped callable returned 0 results for 1 requests",
  );
});

Deno.test("groupByKeys() rejects streams", () => {
  const infer = groupByKeys(function* (requests: InferRequest[]): Generator<InferResult[]> {
    yield requests.map(() => ({}));
  });
  assert.throws(() => infer(mixed(), context), /returned a stream/);
});

Deno.test("groupByKeys() refuses an inputs object", () => {
  const infer = groupByKeys((requests: InferRequest[]) => requests.map(() => ({})));
  // deno-lint-ignore no-explicit-any
  assert.throws(() => infer({ x: column([1]) } as any, context), TritonRuntimeError);
});
