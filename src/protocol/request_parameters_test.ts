import assert from "node:assert/strict";
import { InferenceError } from "../errors.ts";
import type { InferParameter } from "./grpc_codec.ts";
import {
  compileHeaderForwardPattern,
  grpcRequestParameters,
  httpRequestParameters,
} from "./request_parameters.ts";

const grpc = {
  int: (value: number): InferParameter => ({
    int64_param: String(value),
    parameter_choice: "int64_param",
  }),
  uint: (value: number): InferParameter => ({
    uint64_param: String(value),
    parameter_choice: "uint64_param",
  }),
  double: (value: number): InferParameter => ({
    double_param: value,
    parameter_choice: "double_param",
  }),
  bool: (value: boolean): InferParameter => ({ bool_param: value, parameter_choice: "bool_param" }),
  string: (value: string): InferParameter => ({
    string_param: value,
    parameter_choice: "string_param",
  }),
};

function refuses(run: () => unknown, message: string): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof InferenceError);
    assert.equal(error.code, "INVALID_ARG");
    assert.equal(error.message, message);
    return true;
  });
}

Deno.test("Both wires set priority and timeout as fields, not parameters", () => {
  const http = httpRequestParameters({ priority: 2, timeout: 500, k: "v" });
  const rpc = grpcRequestParameters({
    priority: grpc.uint(2),
    timeout: grpc.int(500),
    k: grpc.string("v"),
  });
  for (const decoded of [http, rpc]) {
    assert.deepEqual(decoded, {
      parameters: { k: "v" },
      priority: 2,
      timeoutMicroseconds: 500,
      binaryDataOutput: false,
      enableEmptyFinalResponse: false,
    });
  }
});

Deno.test("Both wires decode the sequence parameters into the request's sequence", () => {
  const http = httpRequestParameters({
    sequence_id: 7,
    sequence_start: true,
    sequence_end: false,
  });
  const rpc = grpcRequestParameters({
    sequence_id: grpc.string("corr-1"),
    sequence_start: grpc.bool(true),
    sequence_end: grpc.bool(false),
  });
  assert.deepEqual(http.parameters, {});
  assert.deepEqual(rpc.parameters, {});
  assert.deepEqual(http.sequence, { id: 7n, start: true, end: false });
  assert.deepEqual(rpc.sequence, { id: "corr-1", start: true, end: false });
  // Correlation IDs are 64-bit: the largest survives both wires exactly.
  assert.deepEqual(httpRequestParameters({ sequence_id: 18446744073709551615n }).sequence, {
    id: 18446744073709551615n,
    start: false,
    end: false,
  });
  assert.deepEqual(
    grpcRequestParameters({
      sequence_id: { uint64_param: "18446744073709551615", parameter_choice: "uint64_param" },
      sequence_end: grpc.bool(true),
    }).sequence,
    { id: 18446744073709551615n, start: false, end: true },
  );
  // Flags without an ID name no sequence (0n, none), as in Triton: engines refuse it.
  assert.deepEqual(httpRequestParameters({ sequence_start: true }).sequence, {
    id: 0n,
    start: true,
    end: false,
  });
  assert.equal(httpRequestParameters({ k: 1 }).sequence, undefined);
  refuses(
    () => httpRequestParameters({ sequence_id: true }),
    "Invalid request parameter 'sequence_id': expected an unsigned 64-bit integer or a string, got true",
  );
  refuses(
    () => httpRequestParameters({ sequence_id: 18446744073709551616n }),
    "Invalid request parameter 'sequence_id': expected an unsigned 64-bit integer or a string, got 18446744073709551616",
  );
  refuses(
    () => httpRequestParameters({ sequence_id: 1.5 }),
    "Invalid request parameter 'sequence_id': expected an unsigned 64-bit integer or a string, got 1.5",
  );
  refuses(
    () => grpcRequestParameters({ sequence_id: grpc.int(-3) }),
    "Invalid request parameter 'sequence_id': expected an unsigned 64-bit integer or a string, got int64_param -3",
  );
  refuses(
    () => grpcRequestParameters({ sequence_id: grpc.bool(true) }),
    "Invalid request parameter 'sequence_id': expected an unsigned 64-bit integer or a string, got bool_param true",
  );
  refuses(
    () => httpRequestParameters({ sequence_end: "yes" }),
    `Invalid request parameter 'sequence_end': expected a boolean, got "yes"`,
  );
  refuses(
    () => grpcRequestParameters({ sequence_start: grpc.int(1) }),
    "Invalid request parameter 'sequence_start': expected a boolean, got int64_param 1",
  );
});

Deno.test("Both wires refuse a negative, fractional or non-integer priority and timeout", () => {
  refuses(
    () => httpRequestParameters({ priority: -1 }),
    "Invalid request parameter 'priority': expected a non-negative integer, got -1",
  );
  refuses(
    () => grpcRequestParameters({ priority: grpc.int(-1) }),
    "Invalid request parameter 'priority': expected a non-negative integer, got int64_param -1",
  );
  refuses(
    () => httpRequestParameters({ timeout: 1.5 }),
    "Invalid request parameter 'timeout': expected a non-negative integer, got 1.5",
  );
  refuses(
    () => grpcRequestParameters({ timeout: grpc.double(2) }),
    "Invalid request parameter 'timeout': expected a non-negative integer, got double_param 2",
  );
  refuses(
    () => httpRequestParameters({ priority: 2n ** 60n }),
    "Invalid request parameter 'priority': expected a non-negative integer, got 1152921504606846976",
  );
});

Deno.test("Reserved triton_ names: refused on both wires, but for each wire's own flag", () => {
  refuses(
    () => httpRequestParameters({ triton_x: 1 }),
    "Invalid request parameter 'triton_x': names starting with 'triton_' are reserved",
  );
  refuses(
    () => grpcRequestParameters({ triton_x: grpc.int(1) }),
    "Invalid request parameter 'triton_x': names starting with 'triton_' are reserved",
  );
  // The stream flag is gRPC's alone, as in Triton's HTTP front end.
  refuses(
    () => httpRequestParameters({ triton_enable_empty_final_response: true }),
    "Invalid request parameter 'triton_enable_empty_final_response': names starting with 'triton_' are reserved",
  );
  assert.equal(
    grpcRequestParameters({ triton_enable_empty_final_response: grpc.bool(true) })
      .enableEmptyFinalResponse,
    true,
  );
  // binary_data_output is HTTP's alone: on gRPC it is a parameter like any other.
  assert.equal(httpRequestParameters({ binary_data_output: true }).binaryDataOutput, true);
  assert.deepEqual(
    grpcRequestParameters({ binary_data_output: grpc.bool(true) }).parameters,
    { binary_data_output: true },
  );
  refuses(
    () => httpRequestParameters({ binary_data_output: 1 }),
    "Invalid request parameter 'binary_data_output': expected a boolean, got 1",
  );
});

Deno.test("Both wires pass 'headers' and other names to the model, typed values only", () => {
  assert.deepEqual(
    httpRequestParameters({ headers: "h", n: 2n ** 60n, f: 0.5, b: false }).parameters,
    { headers: "h", n: 2 ** 60, f: 0.5, b: false },
  );
  assert.deepEqual(
    grpcRequestParameters({ headers: grpc.string("h"), n: grpc.uint(3), f: grpc.double(0.5) })
      .parameters,
    { headers: "h", n: 3, f: 0.5 },
  );
  refuses(
    () => httpRequestParameters({ p: null }),
    "Invalid request parameter 'p': expected a string, number or boolean, got null",
  );
  refuses(
    () => httpRequestParameters({ p: { a: 1 } }),
    "Invalid request parameter 'p': expected a string, number or boolean, got an object",
  );
  refuses(
    () => grpcRequestParameters({ p: {} }),
    "Invalid request parameter 'p': expected a string, number or boolean, got no value",
  );
  refuses(
    () => httpRequestParameters([]),
    "Unable to parse 'parameters': expected a JSON object",
  );
});

Deno.test("Both wires forward matching headers last, as strings, whatever their names", () => {
  const headers = [
    ["x-user", "header"],
    ["priority", "9"],
    ["triton_trace", "on"],
    ["other", "no"],
  ] as const;
  const headerForwardPattern = compileHeaderForwardPattern("^(X-|priority|triton_)", "pattern")!;
  const http = httpRequestParameters({ "x-user": "body", k: 1 }, { headers, headerForwardPattern });
  const rpc = grpcRequestParameters(
    { "x-user": grpc.string("body"), k: grpc.int(1) },
    { headers, headerForwardPattern },
  );
  for (const decoded of [http, rpc]) {
    assert.deepEqual(decoded.parameters, {
      "x-user": "header",
      k: 1,
      priority: "9",
      triton_trace: "on",
    });
    assert.equal(decoded.priority, undefined);
  }
});

Deno.test("compileHeaderForwardPattern() matches case-insensitively, without state", () => {
  const pattern = compileHeaderForwardPattern(/^x-/g, "HTTP headerForwardPattern")!;
  assert.equal(pattern.flags, "i");
  assert.equal(pattern.test("X-A"), true);
  assert.equal(pattern.test("X-A"), true);
  assert.equal(compileHeaderForwardPattern(undefined, "HTTP headerForwardPattern"), undefined);
  assert.throws(
    () => compileHeaderForwardPattern("(", "gRPC headerForwardPattern"),
    {
      name: "TritonBadParameterError",
      message:
        `Invalid gRPC headerForwardPattern: "(" is not a regular expression: Invalid regular expression: /(/i: Unterminated group`,
    },
  );
});
