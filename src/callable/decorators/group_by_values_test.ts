import assert from "node:assert/strict";
import { TritonRuntimeError } from "../../errors.ts";
import { type NDArray, ndarray } from "../../tensor/ndarray.ts";
import type { InferResult } from "../types.ts";
import { batch } from "./batch.ts";
import { ConstantPadder, groupByValues, type GroupOutputs } from "./group_by_values.ts";
import type { BatchOutput, ContextInputs, Inputs } from "./types.ts";
import { tritonContext } from "./triton_context.ts";
import { column, makeContext, makeRequest, values } from "./_test_util.ts";

const context = makeContext({
  inputs: [
    { name: "x", dtype: "float32", shape: [1] },
    { name: "t", dtype: "float32", shape: [1] },
    { name: "mode", dtype: "bytes", shape: [1] },
  ],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
});

function scale({ x, t }: Inputs): Record<string, NDArray> {
  const factor = (t!.data as Float32Array)[0]!;
  return { y: ndarray((x!.data as Float32Array).map((v) => v * factor), x!.shape) };
}

Deno.test("groupByValues() calls once per value and scatters outputs back in sample order", () => {
  const calls: (number | string)[][] = [];
  const infer = groupByValues(["t"], (inputs) => {
    calls.push(values(inputs.x));
    assert.ok(values(inputs.t).every((v) => v === values(inputs.t)[0]));
    return scale(inputs);
  });
  const out = infer(
    { x: column([1, 2, 3, 4, 5]), t: column([2, 3, 2, 1, 3]) },
    context,
  ) as Record<string, NDArray>;
  // Groups run in the order of their raw little-endian bytes, like PyTriton's `tobytes()` keys:
  // 2 = 00 00 00 40, 3 = 00 00 40 40, 1 = 00 00 80 3f.
  assert.deepEqual(calls, [[1, 3], [2, 5], [4]]);
  assert.deepEqual(out.y!.shape, [5, 1]);
  assert.deepEqual(values(out.y), [2, 6, 6, 4, 15]);
});

Deno.test("groupByValues() groups by the tuple of several inputs", () => {
  const calls: (number | string)[][] = [];
  const infer = groupByValues(["t", "mode"], (inputs) => {
    calls.push(values(inputs.x));
    return { y: inputs.x! };
  });
  infer({
    x: column([1, 2, 3, 4]),
    t: column([1, 1, 1, 2]),
    mode: ndarray(["a", "b", "a", "a"], [4, 1]),
  }, context);
  assert.deepEqual(calls, [[4], [1, 3], [2]]);
});

Deno.test("groupByValues() compares bytes inputs by content", () => {
  const calls: (number | string)[][] = [];
  const infer = groupByValues(["mode"], (inputs) => {
    calls.push(values(inputs.x));
    return { y: inputs.x! };
  });
  const bytes = (...elements: number[][]) =>
    ndarray(elements.map((element) => new Uint8Array(element)), [elements.length, 1]);
  infer({
    x: column([1, 2, 3, 4]),
    mode: bytes([97], [97, 0], [97], [97, 0]),
  }, context);
  assert.deepEqual(calls, [[1, 3], [2, 4]]);
});

Deno.test("groupByValues() below batch() groups samples across requests", () => {
  const infer = batch(groupByValues(["t"], scale));
  const results = infer([
    makeRequest({ x: column([1, 2]), t: column([10, 1]) }),
    makeRequest({ x: column([3]), t: column([10]) }),
  ], context) as InferResult[];
  assert.deepEqual(results.map((r) => values(r.y)), [[10, 2], [30]]);
});

Deno.test("groupByValues() refuses a list of requests (used above batch)", () => {
  const infer = groupByValues(["t"], scale);
  assert.throws(
    // deno-lint-ignore no-explicit-any
    () => (infer as any)([makeRequest({ x: column([1]), t: column([1]) })], context),
    (error) =>
      error instanceof TritonRuntimeError &&
      /groupByValues: it must be used below batch/.test(error.message),
  );
});

Deno.test("groupByValues() rejects a missing key input", () => {
  const infer = groupByValues(["temperature"], scale);
  assert.throws(
    () => infer({ x: column([1]), t: column([1]) }, context),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message ===
        "Cannot group samples by values: input 'temperature' is missing (inputs: x, t)",
  );
});

const ragged = (inputs: Inputs): GroupOutputs => {
  const width = (inputs.t!.data as Float32Array)[0]!;
  const rows = inputs.x!.shape[0]!;
  return { y: ndarray(new Float32Array(rows * width).fill(width), [rows, width]) };
};

Deno.test("groupByValues() asks for padFn when groups return different trailing shapes", () => {
  const infer = groupByValues(["t"], ragged);
  assert.throws(
    () => infer({ x: column([1, 2]), t: column([1, 2]) }, context),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message ===
        "Cannot merge groups: output 'y' has trailing shape [2] in one group and [1] in another; pass padFn (e.g. new ConstantPadder()) to groupByValues",
  );
});

Deno.test("groupByValues() pads groups with a ConstantPadder", () => {
  const infer = groupByValues(["t"], ragged, { padFn: new ConstantPadder(-1) });
  const out = infer({ x: column([1, 2, 3]), t: column([2, 1, 2]) }, context) as Record<
    string,
    NDArray
  >;
  assert.deepEqual(out.y!.shape, [3, 2]);
  assert.deepEqual(values(out.y), [2, 2, 1, -1, 2, 2]);
});

Deno.test("groupByValues() accepts a padding function", () => {
  const seen: number[] = [];
  const infer = groupByValues(["t"], (inputs) => ({ y: inputs.x! }), {
    padFn: (groups) => {
      seen.push(groups.length);
      return [...groups];
    },
  });
  infer({ x: column([1, 2, 3]), t: column([1, 2, 1]) }, context);
  assert.deepEqual(seen, [2]);
});

Deno.test("groupByValues() resolves async functions, one group after another", async () => {
  const events: string[] = [];
  const infer = groupByValues(["t"], async (inputs) => {
    events.push(`start ${values(inputs.t)[0]}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
    events.push(`end ${values(inputs.t)[0]}`);
    return scale(inputs);
  });
  const out = await (infer({ x: column([1, 2]), t: column([2, 1]) }, context) as Promise<
    Record<string, NDArray>
  >);
  assert.deepEqual(events, ["start 2", "end 2", "start 1", "end 1"]);
  assert.deepEqual(values(out.y), [2, 2]);
});

Deno.test("groupByValues() maps array outputs onto the declared outputs", () => {
  const infer = groupByValues(["t"], (inputs) => [inputs.x!]);
  const out = infer({ x: column([1, 2]), t: column([2, 1]) }, context) as Record<string, NDArray>;
  assert.deepEqual(values(out.y), [1, 2]);
});

Deno.test("groupByValues() rejects groups whose outputs differ in names, dtypes or rows", () => {
  const byT = (make: (t: number, inputs: Inputs) => GroupOutputs) =>
    groupByValues(["t"], (inputs) => make((inputs.t!.data as Float32Array)[0]!, inputs));
  const inputs = { x: column([1, 2]), t: column([1, 2]) };
  assert.throws(
    () => byT((t, { x }) => (t === 1 ? { y: x! } : { z: x! }))(inputs, context),
    /outputs differ across groups: \[z\] and \[y\]/,
  );
  assert.throws(
    () =>
      byT((t, { x }) => ({
        y: t === 1 ? x! : ndarray(new Int32Array(x!.data.length), x!.shape),
      }))(inputs, context),
    /output 'y' has dtype int32 in one group and float32 in another/,
  );
  assert.throws(
    () => byT(() => ({ y: column([0, 0]) }))(inputs, context),
    /output 'y' has 2 rows for a group of 1 samples/,
  );
});

Deno.test("groupByValues() rejects streams", () => {
  const infer = groupByValues(["t"], function* (inputs): Generator<BatchOutput> {
    yield { y: inputs.x! };
  });
  assert.throws(() => infer({ x: column([1]), t: column([1]) }, context), /returned a stream/);
});

Deno.test("ConstantPadder pads bytes with empty elements and keeps absent outputs absent", () => {
  const [a, b] = new ConstantPadder().pad([
    { y: ndarray(["a"], [1, 1]), z: column([1]) },
    { y: ndarray(["b", "c"], [1, 2]) },
  ]);
  assert.deepEqual(a!.y!.shape, [1, 2]);
  assert.deepEqual(values(a!.y), ["a", ""]);
  assert.deepEqual(values(b!.y), ["b", "c"]);
  assert.deepEqual(Object.keys(b!), ["y"]);
  assert.deepEqual(values(a!.z), [1]);
});

Deno.test("ConstantPadder pads every trailing dimension to the element-wise maximum", () => {
  const [a, b] = new ConstantPadder(9).pad([
    { y: ndarray(new Int32Array([1, 2, 3, 4]), [1, 2, 2]) },
    { y: ndarray(new Int32Array([5, 6, 7, 8, 9, 10]), [2, 1, 3]) },
  ]);
  assert.deepEqual(a!.y!.shape, [1, 2, 3]);
  assert.deepEqual(values(a!.y), [1, 2, 9, 3, 4, 9]);
  assert.deepEqual(b!.y!.shape, [2, 2, 3]);
  assert.deepEqual(values(b!.y), [5, 6, 7, 9, 9, 9, 8, 9, 10, 9, 9, 9]);
});

Deno.test("ConstantPadder converts the pad value for bigint, bool and bfloat16 tensors", () => {
  const pad = (array: NDArray, value: number) =>
    new ConstantPadder(value).pad([{ y: array }, { y: { ...array, shape: [1, 2] } }])[0]!.y!;
  assert.deepEqual(
    [...pad(ndarray(new BigInt64Array([1n, 2n]), [1, 2]), 0).data],
    [1n, 2n],
  );
  const wide = new ConstantPadder(-1).pad([
    { y: ndarray(new BigInt64Array([1n]), [1, 1]) },
    { y: ndarray(new BigInt64Array([2n, 3n]), [1, 2]) },
  ])[0]!.y!;
  assert.deepEqual([...wide.data], [1n, -1n]);
  const bool = new ConstantPadder(5).pad([
    { y: ndarray([true], [1, 1]) },
    { y: ndarray([false, false], [1, 2]) },
  ])[0]!.y!;
  assert.deepEqual([...bool.data], [1, 1]);
  const bf16 = new ConstantPadder(1).pad([
    { y: ndarray(new Uint16Array([0]), [1, 1], { dtype: "bfloat16" }) },
    { y: ndarray(new Uint16Array([0, 0]), [1, 2], { dtype: "bfloat16" }) },
  ])[0]!.y!;
  assert.deepEqual([...bf16.data], [0, 0x3f80]);
});

Deno.test("ConstantPadder rejects mixed dtypes and ranks", () => {
  assert.throws(
    () =>
      new ConstantPadder().pad([
        { y: column([1]) },
        { y: ndarray(new Int32Array([1]), [1, 1]) },
      ]),
    (error) =>
      error instanceof TritonRuntimeError &&
      error.message ===
        "Cannot pad output 'y': all groups must return the same dtype, got float32, int32",
  );
  assert.throws(
    () => new ConstantPadder().pad([{ y: column([1]) }, { y: ndarray(new Float32Array(1), [1]) }]),
    TritonRuntimeError,
  );
  assert.throws(
    () =>
      new ConstantPadder(0.5).pad([
        { y: ndarray(new BigInt64Array([1n]), [1, 1]) },
        { y: ndarray(new BigInt64Array([2n, 3n]), [1, 2]) },
      ]),
    /pad value 0.5 is not an integer/,
  );
});

Deno.test("groupByValues() passes the injected context through to every group", () => {
  const seen: unknown[] = [];
  const infer = batch(tritonContext(groupByValues(["t"], (inputs) => {
    seen.push((inputs as ContextInputs).tritonContext);
    return { y: inputs.x! };
  })));
  infer([makeRequest({ x: column([1, 2]), t: column([1, 2]) })], context);
  assert.deepEqual(seen, [context, context]);
});
