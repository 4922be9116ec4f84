import assert from "node:assert/strict";
import { codecs } from "../protocol/grpc_codec.ts";
import { ndarray } from "../tensor/ndarray.ts";
import { ClientInferenceServerError } from "./errors.ts";
import { fromModelInferResponse, toModelInferRequest } from "./grpc_messages.ts";

Deno.test("toModelInferRequest() encodes to the expected protobuf bytes", () => {
  const message = toModelInferRequest({
    modelName: "m",
    modelVersion: undefined,
    id: "1",
    parameters: { k: 2 },
    inputs: [["x", ndarray(new Int16Array([1, 256]), [1, 2])]],
    outputs: ["y"],
  });
  assert.deepEqual([...codecs.ModelInferRequest.encode(message)], [
    ...[10, 1, 109], // model_name "m"
    ...[18, 0], // model_version ""
    ...[26, 1, 49], // id "1"
    ...[34, 7, 10, 1, 107, 18, 2, 16, 2], // parameters { k: int64_param 2 }
    ...[42, 14, 10, 1, 120, 18, 5, 73, 78, 84, 49, 54, 26, 2, 1, 2], // inputs x INT16 [1, 2]
    ...[50, 3, 10, 1, 121], // outputs y
    ...[58, 4, 1, 0, 0, 1], // raw_input_contents
  ]);
});

Deno.test("toModelInferRequest() serializes BYTES with length prefixes and adds extra parameters", () => {
  const message = toModelInferRequest(
    {
      modelName: "m",
      modelVersion: "3",
      id: "9",
      parameters: { s: "v", f: 0.25, b: false },
      inputs: [["t", ndarray(["a\0", ""], [2])]],
      outputs: [],
    },
    { extra: true },
  );
  assert.equal(message.model_version, "3");
  assert.deepEqual(message.parameters, {
    s: { string_param: "v" },
    f: { double_param: 0.25 },
    b: { bool_param: false },
    extra: { bool_param: true },
  });
  assert.deepEqual([...message.raw_input_contents![0]!], [2, 0, 0, 0, 97, 0, 0, 0, 0, 0]);
  assert.deepEqual(message.outputs, []);
});

Deno.test("fromModelInferResponse() reads decoded raw outputs and parameters", () => {
  const wire = codecs.ModelInferResponse.encode({
    model_name: "m",
    model_version: "1",
    id: "5",
    parameters: {
      triton_final_response: { bool_param: true },
      n: { int64_param: "9007199254740993" },
    },
    outputs: [
      { name: "i", datatype: "UINT64", shape: [1] },
      { name: "s", datatype: "BYTES", shape: [1] },
      { name: "h", datatype: "FP16", shape: [1] },
    ],
    raw_output_contents: [
      new Uint8Array([255, 255, 255, 255, 255, 255, 255, 255]),
      new Uint8Array([1, 0, 0, 0, 0]),
      new Uint8Array([0, 60]),
    ],
  });
  const response = fromModelInferResponse(codecs.ModelInferResponse.decode(wire));
  assert.equal(response.id, "5");
  assert.deepEqual(response.parameters, { triton_final_response: true, n: 9007199254740992 });
  assert.deepEqual([...(response.outputs.i!.data as BigUint64Array)], [2n ** 64n - 1n]);
  assert.deepEqual((response.outputs.s!.data as Uint8Array[]).map((e) => [...e]), [[0]]);
  assert.deepEqual([...(response.outputs.h!.data as Float16Array)], [1]);
});

Deno.test("fromModelInferResponse() reads typed contents when there is no raw data", () => {
  const response = fromModelInferResponse({
    model_name: "m",
    model_version: "1",
    outputs: [
      { name: "f", datatype: "FP32", shape: ["2"], contents: { fp32_contents: [1, 2] } },
      { name: "l", datatype: "INT64", shape: ["1"], contents: { int64_contents: ["-5"] } },
      { name: "e", datatype: "INT32", shape: ["0"], contents: {} },
    ],
    raw_output_contents: [],
  });
  assert.deepEqual([...(response.outputs.f!.data as Float32Array)], [1, 2]);
  assert.deepEqual([...(response.outputs.l!.data as BigInt64Array)], [-5n]);
  assert.equal(response.outputs.e!.data.length, 0);
});

Deno.test("fromModelInferResponse() refuses malformed outputs", () => {
  const base = { model_name: "m", model_version: "1" };
  assert.throws(
    () =>
      fromModelInferResponse({
        ...base,
        outputs: [{ name: "y", datatype: "FP32", shape: ["2"] }],
        raw_output_contents: [new Uint8Array(4)],
      }),
    (error: unknown) =>
      error instanceof ClientInferenceServerError &&
      /^Invalid inference response from server: output 'y': .*expected 8 bytes, got 4/.test(
        error.message,
      ),
  );
  assert.throws(
    () =>
      fromModelInferResponse({
        ...base,
        outputs: [{ name: "y", datatype: "FP4", shape: ["1"] }],
      }),
    /unknown datatype "FP4"/,
  );
});
