import assert from "node:assert/strict";
import type { ResolvedTensorSpec } from "../../config/tensor_spec.ts";
import type { DType } from "../../tensor/dtype.ts";
import { decodeInferRequest, decodeRawInferRequest } from "./infer_request.ts";
import type { NDArray } from "../../tensor/ndarray.ts";

const encoder = new TextEncoder();

function withBinary(json: unknown, ...parts: number[][]): { body: Uint8Array; length: number } {
  const header = encoder.encode(JSON.stringify(json));
  return { body: new Uint8Array([...header, ...parts.flat()]), length: header.byteLength };
}

function expectError(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (error: Error & { code?: string }) => {
    assert.equal(error.code, "INVALID_ARG", error.message);
    assert.match(error.message, message);
    return true;
  });
}

Deno.test("decodeInferRequest() reads JSON inputs, outputs, id and parameters", () => {
  const body = encoder.encode(JSON.stringify({
    id: "req-1",
    parameters: {
      priority: 2,
      timeout: 500,
      binary_data_output: true,
      mode: "fast",
      n: 3,
      x: 0.5,
      on: true,
    },
    inputs: [
      { name: "a", datatype: "FP32", shape: [1, 2], data: [[1, 2]] },
      { name: "s", datatype: "BYTES", shape: [1], data: ["x\u0000y"] },
    ],
    outputs: [{ name: "o1", parameters: { binary_data: false } }, {
      name: "o2",
      parameters: { classification: 3 },
    }],
  }));
  const headers = new Headers({ "X-Trace": "abc", "other": "no" });
  const signal = new AbortController().signal;
  const decoded = decodeInferRequest(body, undefined, {
    modelName: "m",
    modelVersion: 2,
    headers,
    headerForwardPattern: /x-.*/i,
    signal,
  });
  const request = decoded.request;
  assert.equal(request.modelName, "m");
  assert.equal(request.modelVersion, 2);
  assert.equal(request.id, "req-1");
  assert.equal(request.priority, 2);
  assert.equal(request.timeoutMicroseconds, 500);
  assert.equal(request.signal, signal);
  assert.deepEqual(request.parameters, { "x-trace": "abc", mode: "fast", n: 3, x: 0.5, on: true });
  assert.deepEqual(request.outputs, ["o1", "o2"]);
  assert.deepEqual([...request.inputs.keys()], ["a", "s"]);
  assert.deepEqual(request.inputs.get("a")!.shape, [1, 2]);
  assert.deepEqual(Array.from((request.inputs.get("s") as NDArray).data[0] as Uint8Array), [
    120,
    0,
    121,
  ]);
  assert.equal(decoded.defaultBinary, true);
  assert.deepEqual(decoded.outputFormats.get("o1"), { binary: false, classification: 0 });
  assert.deepEqual(decoded.outputFormats.get("o2"), { binary: true, classification: 3 });
});

Deno.test("decodeInferRequest() takes binary inputs in order after the JSON", () => {
  const { body, length } = withBinary(
    {
      inputs: [
        { name: "i64", datatype: "INT64", shape: [1], parameters: { binary_data_size: 8 } },
        { name: "j", datatype: "INT32", shape: [1], data: [5] },
        { name: "b", datatype: "BYTES", shape: [2], parameters: { binary_data_size: 11 } },
        { name: "f16", datatype: "FP16", shape: [2], parameters: { binary_data_size: 4 } },
        { name: "ok", datatype: "BOOL", shape: [2], parameters: { binary_data_size: 2 } },
      ],
    },
    [1, 0, 0, 0, 0, 0, 0, 0x80],
    [2, 0, 0, 0, 0x61, 0x00, 1, 0, 0, 0, 0x62],
    [0x00, 0x3c, 0x00, 0xc0],
    [1, 0],
  );
  const { request } = decodeInferRequest(body, length, { modelName: "m" });
  assert.deepEqual(Array.from((request.inputs.get("i64") as NDArray).data as BigInt64Array), [
    -(2n ** 63n) + 1n,
  ]);
  assert.deepEqual(Array.from((request.inputs.get("j") as NDArray).data as Int32Array), [5]);
  assert.deepEqual(
    ((request.inputs.get("b") as NDArray).data as Uint8Array[]).map((b) => Array.from(b)),
    [[0x61, 0x00], [0x62]],
  );
  assert.deepEqual(Array.from((request.inputs.get("f16") as NDArray).data as Float16Array), [
    1,
    -2,
  ]);
  const flags = request.inputs.get("ok")!;
  assert.equal(flags.dtype, "bool");
  assert.deepEqual(Array.from((flags as NDArray).data as Uint8Array), [1, 0]);
  assert.equal(request.outputs, undefined);
});

Deno.test("decodeInferRequest() rejects malformed requests with messages naming the problem", () => {
  const decode = (json: unknown, ...parts: number[][]): unknown => {
    const { body, length } = withBinary(json, ...parts);
    return decodeInferRequest(body, parts.length > 0 ? length : undefined, { modelName: "m" });
  };
  const input = { name: "a", datatype: "INT32", shape: [1], data: [1] };
  expectError(
    () => decodeInferRequest(encoder.encode("{oops"), undefined, { modelName: "m" }),
    /Unable to parse the request JSON/,
  );
  expectError(() => decode([1]), /expected an object/);
  expectError(() => decode({}), /missing 'inputs'/);
  expectError(() => decode({ inputs: {} }), /'inputs': expected an array/);
  expectError(
    () => decode({ inputs: [{ datatype: "INT32", shape: [1], data: [1] }] }),
    /inputs\[0\]'.*missing 'name'/,
  );
  expectError(
    () => decode({ inputs: [{ name: "a", shape: [1], data: [1] }] }),
    /missing 'datatype'/,
  );
  expectError(
    () => decode({ inputs: [{ ...input, datatype: "FLOAT" }] }),
    /Invalid datatype 'FLOAT' of input 'a'/,
  );
  expectError(() => decode({ inputs: [{ ...input, shape: undefined }] }), /'shape' of input 'a'/);
  expectError(
    () => decode({ inputs: [{ ...input, shape: [-1] }] }),
    /dimension -1 is not a non-negative integer/,
  );
  expectError(() => decode({ inputs: [{ ...input, shape: [1.5] }] }), /dimension 1.5 is not/);
  expectError(
    () => decode({ inputs: [{ ...input, shape: [2] }] }),
    /shape \[2\] needs 2 elements but 'data' has 1/,
  );
  expectError(() => decode({ inputs: [{ ...input, data: ["1"] }] }), /element 0 is "1"/);
  expectError(() => decode({ inputs: [input, input] }), /Duplicate input 'a'/);
  expectError(
    () => decode({ inputs: [{ ...input, parameters: { binary_data_size: 4 } }] }, [1, 0, 0, 0]),
    /exactly one of 'data' and 'binary_data_size'.*both are set/,
  );
  expectError(() => decode({ inputs: [{ ...input, data: undefined }] }), /neither is set/);
  const binary = { name: "a", datatype: "INT32", shape: [1], parameters: { binary_data_size: 4 } };
  expectError(() => decode({ inputs: [binary] }), /no 'Inference-Header-Content-Length' header/);
  expectError(
    () => decode({ inputs: [binary] }, [1, 0]),
    /Unexpected size for input 'a': expecting 4 bytes but only 2 remain/,
  );
  expectError(
    () => decode({ inputs: [binary] }, [1, 0, 0, 0, 9]),
    /Unexpected additional input data for model 'm': 1 bytes/,
  );
  expectError(
    () => decode({ inputs: [{ ...binary, parameters: { binary_data_size: 2 } }] }, [1, 0]),
    /shape \[1\] of int32 needs 4 bytes, 'binary_data_size' is 2/,
  );
  expectError(
    () => decode({ inputs: [{ ...binary, datatype: "BYTES" }] }, [9, 0, 0, 0]),
    /Invalid binary data of input 'a'.*claims 9 bytes/,
  );
  expectError(
    () =>
      decode({ inputs: [{ ...binary, datatype: "BYTES", parameters: { binary_data_size: 2 } }] }, [
        1,
        0,
      ]),
    /length prefix at byte 0 is cut off/,
  );
  assert.throws(
    () =>
      decode({
        inputs: [{
          name: "a",
          datatype: "INT32",
          shape: [1],
          parameters: { shared_memory_region: "r", shared_memory_byte_size: 4 },
        }],
      }),
    (error: Error & { code?: string }) =>
      error.code === "UNSUPPORTED" &&
      error.message ===
        "System shared memory is not enabled on this server: send tensors in the request",
  );
  expectError(
    () => decode({ inputs: [{ ...input, parameters: { shared_memory_region: "r" } }] }),
    /Input 'a' must set only one of 'data', 'binary_data_size' and 'shared_memory_region'|'shared_memory_byte_size' is required/,
  );
  expectError(
    () => decode({ inputs: [input], parameters: { triton_x: 1 } }),
    /'triton_x': names starting with 'triton_' are reserved/,
  );
  expectError(
    () => decode({ inputs: [input], parameters: { sequence_start: 1 } }),
    /'sequence_start': expected a boolean, got 1/,
  );
  expectError(
    () => decode({ inputs: [input], parameters: { priority: -1 } }),
    /'priority': expected a non-negative integer/,
  );
  expectError(
    () => decode({ inputs: [input], parameters: { timeout: "1" } }),
    /'timeout': expected a non-negative integer/,
  );
  expectError(
    () => decode({ inputs: [input], parameters: { p: [1] } }),
    /'p': expected a string, number or boolean, got an array/,
  );
  expectError(
    () => decode({ inputs: [input], parameters: [] }),
    /'parameters': expected a JSON object/,
  );
  expectError(() => decode({ inputs: [input], id: 3 }), /'id': expected a string/);
  expectError(
    () => decode({ inputs: [input], outputs: [{ name: "o" }, { name: "o" }] }),
    /Duplicate output 'o'/,
  );
  expectError(() => decode({ inputs: [input], outputs: [{}] }), /outputs\[0\]/);
  expectError(
    () => decode({ inputs: [input], outputs: [{ name: "o", parameters: { binary_data: 1 } }] }),
    /'binary_data' of output 'o': expected a boolean/,
  );
});

Deno.test("decodeInferRequest() forwards headers after the body's parameters, whatever their names", () => {
  const body = encoder.encode(JSON.stringify({
    inputs: [],
    parameters: { sequence_id: 7, sequence_start: true, "x-user": "body", k: 1 },
  }));
  const { request } = decodeInferRequest(body, undefined, {
    modelName: "m",
    headers: new Headers({ "X-User": "header", "triton_x": "1", priority: "9" }),
    headerForwardPattern: /^(x-|triton_|priority)/i,
  });
  // Sequence fields become the request's sequence, not parameters; headers are strings and never
  // set the priority.
  assert.deepEqual(request.parameters, { "x-user": "header", k: 1, priority: "9", triton_x: "1" });
  assert.deepEqual(request.sequence, { id: 7n, start: true, end: false });
  assert.equal(request.priority, undefined);
});

Deno.test("decodeRawInferRequest() makes the body the single input", () => {
  const spec = (name: string, dtype: DType, shape: number[]): ResolvedTensorSpec => ({
    name,
    dtype,
    shape,
    optional: false,
  });
  const model = { maxBatchSize: 4, inputs: [spec("x", "int16", [2, -1])] };
  const { request, outputFormats, defaultBinary } = decodeRawInferRequest(
    new Uint8Array([1, 0, 2, 0, 3, 0, 4, 0]),
    model,
    { modelName: "m" },
  );
  assert.deepEqual(request.inputs.get("x")!.shape, [1, 2, 2]);
  assert.deepEqual(Array.from((request.inputs.get("x") as NDArray).data as Int16Array), [
    1,
    2,
    3,
    4,
  ]);
  assert.equal(defaultBinary, true);
  assert.equal(outputFormats.size, 0);

  const bytes = decodeRawInferRequest(
    new Uint8Array([1, 0, 0, 0, 0x61, 0, 0, 0, 0]),
    { maxBatchSize: 0, inputs: [spec("s", "bytes", [-1])] },
    { modelName: "m" },
  );
  assert.deepEqual(bytes.request.inputs.get("s")!.shape, [2]);

  expectError(
    () =>
      decodeRawInferRequest(
        new Uint8Array(4),
        { maxBatchSize: 0, inputs: [spec("a", "int8", [1]), spec("b", "int8", [1])] },
        { modelName: "m" },
      ),
    /exactly one input: model 'm' has 2/,
  );
  expectError(
    () => decodeRawInferRequest(new Uint8Array(3), model, { modelName: "m" }),
    /3 bytes is not a multiple of the int16 element size 2/,
  );
  expectError(
    () => decodeRawInferRequest(new Uint8Array(6), model, { modelName: "m" }),
    /3 elements do not fill shape \[1,2,-1\]/,
  );
  expectError(
    () =>
      decodeRawInferRequest(
        new Uint8Array(8),
        { maxBatchSize: 0, inputs: [spec("x", "float32", [3])] },
        { modelName: "m" },
      ),
    /shape \[3\] needs 3 elements, the body holds 2/,
  );
});
