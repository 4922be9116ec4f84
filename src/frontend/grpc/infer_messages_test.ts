import assert from "node:assert/strict";
import { ndarray } from "../../tensor/ndarray.ts";
import { toInferenceRequest, toInferResponseMessage } from "./infer_messages.ts";
import type { NDArray } from "../../tensor/ndarray.ts";

Deno.test("toInferenceRequest maps parameters, headers, version, sequence and signal", () => {
  const controller = new AbortController();
  const { request, enableEmptyFinalResponse } = toInferenceRequest({
    model_name: "m",
    model_version: "3",
    id: "r",
    parameters: {
      priority: { uint64_param: "2", parameter_choice: "uint64_param" },
      timeout: { int64_param: "100", parameter_choice: "int64_param" },
      sequence_id: { uint64_param: "9007199254740993", parameter_choice: "uint64_param" },
      sequence_start: { bool_param: true, parameter_choice: "bool_param" },
      triton_enable_empty_final_response: { bool_param: true, parameter_choice: "bool_param" },
      custom: { string_param: "v", parameter_choice: "string_param" },
    },
    inputs: [{ name: "x", datatype: "BOOL", shape: ["1"], contents: { bool_contents: [true] } }],
    outputs: [{ name: "y" }],
  }, {
    headers: [["x-h", "1"], ["y-h", "2"]],
    headerForwardPattern: /^x-/i,
    signal: controller.signal,
  });
  assert.equal(enableEmptyFinalResponse, true);
  assert.deepEqual({ ...request, inputs: [...request.inputs.keys()] }, {
    modelName: "m",
    modelVersion: 3,
    id: "r",
    inputs: ["x"],
    outputs: ["y"],
    parameters: { custom: "v", "x-h": "1" },
    priority: 2,
    timeoutMicroseconds: 100,
    // The sequence parameters become the request's sequence, the ID exactly (2^53 + 1).
    sequence: { id: 9007199254740993n, start: true, end: false },
    signal: controller.signal,
  });
});

Deno.test("toInferenceRequest rejects duplicate inputs and empty parameters", () => {
  const input = { name: "x", datatype: "FP32", shape: ["1"], contents: { fp32_contents: [1] } };
  assert.throws(
    () => toInferenceRequest({ model_name: "m", inputs: [input, input] }),
    /Invalid request for model 'm': input 'x' is given twice/,
  );
  assert.throws(
    () => toInferenceRequest({ model_name: "m", parameters: { p: {} } }),
    {
      message: "Invalid request parameter 'p': expected a string, number or boolean, got no value",
    },
  );
  assert.throws(
    () =>
      toInferenceRequest({
        model_name: "m",
        parameters: { triton_enable_empty_final_response: { int64_param: 1 } },
      }),
    {
      message:
        "Invalid request parameter 'triton_enable_empty_final_response': expected a boolean, got int64_param 1",
    },
  );
});

Deno.test("toInferResponseMessage encodes parameters and raw outputs", () => {
  const message = toInferResponseMessage({
    modelName: "m",
    modelVersion: "1",
    id: "r",
    outputs: new Map([["s", ndarray(["ab"], [1])]]),
    parameters: { n: 2, f: 0.5 },
  }, { triton_final_response: true });
  assert.deepEqual({
    ...message,
    raw_output_contents: message.raw_output_contents!.map((b) => [...b]),
  }, {
    model_name: "m",
    model_version: "1",
    id: "r",
    parameters: {
      n: { int64_param: 2 },
      f: { double_param: 0.5 },
      triton_final_response: { bool_param: true },
    },
    outputs: [{ name: "s", datatype: "BYTES", shape: [1] }],
    raw_output_contents: [[2, 0, 0, 0, 97, 98]],
  });
});

Deno.test("toInferenceRequest(): a shared_memory_region parameter with no value set takes its raw entry", () => {
  const float = (value: number): Uint8Array => new Uint8Array(new Float32Array([value]).buffer);
  const { request } = toInferenceRequest({
    model_name: "m",
    inputs: [
      { name: "a", datatype: "FP32", shape: ["1"], parameters: { shared_memory_region: {} } },
      { name: "b", datatype: "FP32", shape: ["1"] },
    ],
    raw_input_contents: [float(1), float(2)],
  });
  assert.deepEqual([...((request.inputs.get("a") as NDArray).data as Float32Array)], [1]);
  assert.deepEqual([...((request.inputs.get("b") as NDArray).data as Float32Array)], [2]);
});
