/**
 * Typed models: the tensor specs given to `bind()` type the callable. The type-level half of this
 * file is checked by `deno test` (which type-checks what it runs): each `@ts-expect-error` line
 * must hold a compile error, since an unused `@ts-expect-error` is itself an error, so every
 * guarantee below fails the suite when it stops holding. The run-time half serves the typed forms
 * on every engine.
 */

import assert from "node:assert/strict";
import {
  batch,
  type BindOptions,
  DeviceTensor,
  fillOptionals,
  firstValue,
  groupByKeys,
  inferContext,
  type InferFunc,
  type InferRequest,
  inferRequest,
  type InferResult,
  map,
  type NDArray,
  ndarray,
  rows,
  sample,
  type TensorsOf,
  type TensorSpec,
  type Triton,
  tritonContext,
  zip,
} from "../mod.ts";
import { ENGINES, startServer } from "./_helpers.ts";

/** Type-checks `body` without running it: the mistakes below would throw at bind time. */
function typeOnly(_body: (triton: Triton) => void): void {}

const AB = [
  { name: "a", dtype: "float32", shape: [-1] },
  { name: "b", dtype: "float32", shape: [-1] },
] as const;
const ADD_SUB = [
  { name: "add", dtype: "float32", shape: [-1] },
  { name: "sub", dtype: "float32", shape: [-1] },
] as const;
const int64 = ndarray(new BigInt64Array([1n]));

typeOnly((triton) => {
  // The README's AddSub: no `!`, no casts.
  triton.bind({
    modelName: "AddSub",
    inferFunc: batch(({ a, b }) => ({
      add: zip(a, b, (x, y) => x + y),
      sub: zip(a, b, (x, y) => x - y),
    })),
    inputs: [
      { name: "a", dtype: "float32", shape: [-1] },
      { name: "b", dtype: "float32", shape: [-1] },
    ],
    outputs: [
      { name: "add", dtype: "float32", shape: [-1] },
      { name: "sub", dtype: "float32", shape: [-1] },
    ],
    config: { maxBatchSize: 8 },
  });

  // A misspelled input name.
  triton.bind({
    modelName: "Typo",
    // @ts-expect-error: the inputs are a and b
    inferFunc: batch(({ a, imgae }) => ({ add: zip(a, imgae, (x, y) => x + y), sub: a })),
    inputs: AB,
    outputs: ADD_SUB,
  });

  // A dtype typo.
  triton.bind({
    modelName: "DTypeTypo",
    inferFunc: (requests) => requests,
    // @ts-expect-error: "flaot32" is no dtype
    inputs: [{ name: "x", dtype: "flaot32", shape: [-1] }],
    outputs: [],
  });

  // A wrong output dtype.
  triton.bind({
    modelName: "WrongDType",
    // @ts-expect-error: add must be float32, not int64
    inferFunc: batch(({ a }) => ({ add: int64, sub: a })),
    inputs: AB,
    outputs: ADD_SUB,
  });

  // Device tensors: a deviceTensor spec types the tensor as NDArray | DeviceTensor of its dtype.
  triton.bind({
    modelName: "OnDevice",
    inferFunc: (requests) =>
      requests.map(({ x }) => {
        const device: NDArray<"float32"> | DeviceTensor<"float32"> = x;
        return { y: device };
      }),
    inputs: [{ name: "x", dtype: "float32", shape: [-1], deviceTensor: true }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1], deviceTensor: true }],
  });
  const onDevice = new DeviceTensor({ dtype: "float32", shape: [1], pointer: 0n, device: 0 });
  triton.bind({
    modelName: "NotOnDevice",
    // @ts-expect-error: y has no deviceTensor: true, so it must be a host NDArray
    inferFunc: (requests) => requests.map(() => ({ y: onDevice })),
    inputs: [],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  });
  triton.bind({
    modelName: "HostInput",
    inferFunc: (requests) =>
      requests.map(({ x }) => {
        // @ts-expect-error: x has no deviceTensor: true, so it is never a DeviceTensor
        const device: DeviceTensor<"float32"> = x;
        return { y: ndarray([device.byteSize]) };
      }),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float64", shape: [1] }],
  });

  // A missing output.
  triton.bind({
    modelName: "Missing",
    // @ts-expect-error: sub is missing
    inferFunc: batch(({ a, b }) => ({ add: zip(a, b, (x, y) => x + y) })),
    inputs: AB,
    outputs: ADD_SUB,
  });

  // The same mistakes in an undecorated callable.
  triton.bind({
    modelName: "Undecorated",
    // @ts-expect-error: add must be float32
    inferFunc: (requests) => requests.map((request) => ({ add: int64, sub: request.a })),
    inputs: AB,
    outputs: ADD_SUB,
  });

  // PyTriton's identity, and inputs as properties of the request.
  triton.bind({
    modelName: "Identity",
    inferFunc: (requests) => requests,
    inputs: [{ name: "x", dtype: "int64", shape: [-1] }],
    outputs: [{ name: "x", dtype: "int64", shape: [-1] }],
  });
  triton.bind({
    modelName: "Properties",
    inferFunc: (requests) => requests.map((request) => ({ y: request.x, same: request.data.x })),
    inputs: [{ name: "x", dtype: "int64", shape: [-1] }],
    outputs: [{ name: "y", dtype: "int64", shape: [-1] }, {
      name: "same",
      dtype: "i8",
      shape: [-1],
    }],
  });
  // The identity of a model whose outputs are not its inputs is a mistake.
  triton.bind({
    modelName: "NotIdentity",
    // @ts-expect-error: the requests carry x, the outputs are y
    inferFunc: (requests) => requests,
    inputs: [{ name: "x", dtype: "int64", shape: [-1] }],
    outputs: [{ name: "y", dtype: "int64", shape: [-1] }],
  });

  // Decorators carry the types: defaults make an optional input present, firstValue and
  // groupByKeys keep them; unknown names are refused.
  triton.bind({
    modelName: "Optionals",
    inferFunc: fillOptionals(
      { t: ndarray(new Float32Array([2]), [1]) },
      groupByKeys(batch(firstValue(["w"], ({ a, b, t, w }) => {
        const present: NDArray<"float32"> = t;
        // @ts-expect-error: w is optional, so possibly undefined
        const absent: NDArray<"float32"> = w;
        const offset = w?.data[0] ?? 0;
        void [present, absent];
        return {
          add: zip(zip(a, b, (x, y) => x + y), t, (x, z) => x + z + offset),
          sub: zip(zip(a, b, (x, y) => x - y), t, (x, z) => x + z + offset),
        };
      }))),
    ),
    inputs: [
      ...AB,
      { name: "t", dtype: "float32", shape: [1], optional: true },
      { name: "w", dtype: "float32", shape: [1], optional: true },
    ],
    outputs: ADD_SUB,
  });
  triton.bind({
    modelName: "UnknownDefault",
    inferFunc: fillOptionals(
      // @ts-expect-error: there is no input tt
      { tt: [2] },
      (requests) => requests.map(() => ({})),
    ),
    inputs: AB,
    outputs: ADD_SUB,
  });
  triton.bind({
    modelName: "UnknownKey",
    // @ts-expect-error: there is no input c
    inferFunc: batch(firstValue(["c"], ({ a, b }) => ({ add: a, sub: b }))),
    inputs: AB,
    outputs: ADD_SUB,
  });
  triton.bind({
    modelName: "Context",
    inferFunc: sample(tritonContext(({ a, tritonContext }) => {
      const name: string = tritonContext.model.name;
      void name;
      return { add: a, sub: a };
    })),
    inputs: AB,
    outputs: ADD_SUB,
    config: { batching: false },
  });

  // Positional outputs are checked at run time only.
  triton.bind({
    modelName: "Positional",
    inferFunc: batch(({ a, b }) => [zip(a, b, (x, y) => x + y), zip(a, b, (x, y) => x - y)]),
    inputs: AB,
    outputs: ADD_SUB,
  });

  // Streams: every step is checked.
  triton.bind({
    modelName: "Stream",
    // @ts-expect-error: each step lacks sub
    inferFunc: batch(async function* ({ a }): AsyncGenerator<{ add: NDArray<"float32"> }> {
      yield { add: a };
    }),
    inputs: AB,
    outputs: ADD_SUB,
  });

  // Bytes tensors hold Uint8Array elements; 64-bit integers bigints.
  triton.bind({
    modelName: "Elements",
    inferFunc: batch(({ text, count }) => {
      const first: Uint8Array | undefined = text.data[0];
      const n: bigint | undefined = count.data[0];
      void [first, n];
      return { text, count: map(count, (v) => v * 2n) };
    }),
    inputs: [{ name: "text", dtype: "bytes", shape: [1] }, {
      name: "count",
      dtype: "INT64",
      shape: [1],
    }],
    outputs: [{ name: "text", dtype: "np.bytes_", shape: [1] }, {
      name: "count",
      dtype: BigInt64Array,
      shape: [1],
    }],
  });

  // Specs built at run time fall back to the wide types, and accept callables typed for
  // particular inputs (only the server can check those).
  const specs: TensorSpec[] = [{ name: "x", dtype: "float32", shape: [-1] }];
  triton.bind({
    modelName: "Runtime",
    inferFunc: batch(({ x }) => ({ y: x ?? ndarray(new Float32Array()) })),
    inputs: specs,
    outputs: specs,
  });
  triton.bind({
    modelName: "RuntimeTyped",
    inferFunc: batch(({ x }: { x: NDArray<"float32"> }) => ({ y: x })),
    inputs: specs,
    outputs: specs,
  });
  // A callable that needs an input the typed specs do not declare is refused.
  const needsB = batch(({ a, b }: { a: NDArray<"float32">; b: NDArray<"float32"> }) => ({
    add: zip(a, b, (x, y) => x + y),
    sub: a,
  }));
  triton.bind({
    modelName: "NeedsB",
    // @ts-expect-error: the specs declare no b
    inferFunc: needsB,
    inputs: [{ name: "a", dtype: "float32", shape: [-1] }],
    outputs: ADD_SUB,
  });
});

// NDArray keeps its element type; dtype spellings are checked.
typeOnly(() => {
  const floats = ndarray(new Float32Array(4));
  const total: number = floats.data.reduce((sum, v) => sum + v, 0);
  // @ts-expect-error: a float32 tensor is no int32 tensor
  const ints: NDArray<"int32"> = floats;
  const converted: NDArray<"int16"> = ndarray([1, 2], [2], { dtype: "<i2" });
  const texts: NDArray<"bytes"> = ndarray(["a", "b"]);
  const big: NDArray<"int64"> = ndarray([1n, 2n]);
  // @ts-expect-error: "flaot32" is no dtype
  ndarray([1], [1], { dtype: "flaot32" });
  void [total, ints, converted, texts, big];
});

Deno.test("a callable typed apart from bind() runs in a unit test", () => {
  const addSub: InferFunc<TensorsOf<typeof AB>, TensorsOf<typeof ADD_SUB>> = batch((
    { a, b },
  ) => ({ add: zip(a, b, (x, y) => x + y), sub: zip(a, b, (x, y) => x - y) }));
  const context = inferContext({ inputs: AB, outputs: ADD_SUB, config: { maxBatchSize: 4 } });
  const results = addSub([
    inferRequest({
      a: ndarray(new Float32Array([1, 2]), [2, 1]),
      b: ndarray(new Float32Array([3, 4]), [2, 1]),
    }),
    inferRequest({
      a: ndarray(new Float32Array([5]), [1, 1]),
      b: ndarray(new Float32Array([1]), [1, 1]),
    }),
  ], context) as InferResult<TensorsOf<typeof ADD_SUB>>[];
  assert.deepEqual(results.map((r) => [...r.add.data]), [[4, 6], [6]]);
  assert.deepEqual(results.map((r) => [...r.sub.data]), [[-2, -2], [4]]);
  assert.deepEqual(rows(results[0]!.add).map((row) => row.shape), [[1], [1]]);
});

Deno.test("the request builder gives inputs as properties, fields first", () => {
  const x = ndarray(new Float32Array([1]));
  const signal = ndarray(["kept in data"]);
  const request: InferRequest<{ x: NDArray<"float32">; signal: NDArray<"bytes"> }> = inferRequest({
    x,
    signal,
  });
  assert.equal(request.x, x);
  assert.equal(request.data.signal, signal);
  assert.ok(request.signal instanceof AbortSignal);
});

for (const engine of ENGINES) {
  Deno.test(`typed models on the ${engine} engine: identity and request properties`, async () => {
    const models: BindOptions[] = [];
    await using triton = await startServer({ engine, models, config: { allowGrpc: false } });
    await triton.bind({
      modelName: "Identity",
      inferFunc: (requests) => requests,
      inputs: [{ name: "values", dtype: "float64", shape: [-1] }, {
        name: "texts",
        dtype: "bytes",
        shape: [-1],
      }],
      outputs: [{ name: "values", dtype: "float64", shape: [-1] }, {
        name: "texts",
        dtype: "bytes",
        shape: [-1],
      }],
      config: { maxBatchSize: 4 },
      strict: true,
    });
    await triton.bind({
      modelName: "Scaled",
      // An input named like a request field stays in data; the others are properties too.
      inferFunc: (requests) =>
        requests.map((request) => ({
          y: zip(request.x, request.data.signal, (x, s) => x * s),
        })),
      inputs: [{ name: "x", dtype: "float32", shape: [-1] }, {
        name: "signal",
        dtype: "float32",
        shape: [-1],
      }],
      outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
      config: { maxBatchSize: 4 },
      strict: true,
    });
    const infer = async (model: string, inputs: unknown[]): Promise<Record<string, unknown>> => {
      const response = await fetch(`${triton.urls.http}/v2/models/${model}/infer`, {
        method: "POST",
        body: JSON.stringify({ inputs }),
      });
      const body = await response.json();
      assert.equal(response.status, 200, JSON.stringify(body));
      return Object.fromEntries(
        (body.outputs as { name: string; data: unknown }[]).map((o) => [o.name, o.data]),
      );
    };
    assert.deepEqual(
      await infer("Identity", [
        { name: "values", datatype: "FP64", shape: [1, 2], data: [0.5, -1] },
        { name: "texts", datatype: "BYTES", shape: [1, 2], data: ["a", ""] },
      ]),
      { values: [0.5, -1], texts: ["a", ""] },
    );
    assert.deepEqual(
      await infer("Scaled", [
        { name: "x", datatype: "FP32", shape: [1, 2], data: [1, 2] },
        { name: "signal", datatype: "FP32", shape: [1, 2], data: [10, 100] },
      ]),
      { y: [10, 200] },
    );
  });
}
