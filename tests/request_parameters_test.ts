// The request-parameter rules where the HTTP and gRPC front ends used to disagree, checked on
// both front ends of one server, on both engines, with the status and message each answers.
// Each rule is Triton 2.51's (see src/protocol/request_parameters.ts).

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import type { Triton } from "../mod.ts";
import { codecs, type InferParameter, type ModelInferRequest } from "../src/protocol/grpc_codec.ts";
import { ENGINES, startServer } from "./_helpers.ts";
import { parametersModel } from "./_models.ts";
import { rejectsWith, TestGrpcClient } from "./grpc_test_client.ts";

// Upper case on purpose: the pattern matches case-insensitively on both front ends.
const PATTERN = "^(X-|TRITON_|PRIORITY$)";

type Value = string | number | boolean;

function startParametersServer(engine: (typeof ENGINES)[number]): Promise<Triton> {
  return startServer({
    engine,
    models: [parametersModel()],
    config: { httpHeaderForwardPattern: PATTERN, grpcHeaderForwardPattern: PATTERN },
  });
}

/** What the model saw over HTTP, or the error status and message. */
async function viaHttp(
  server: Triton,
  parameters: Record<string, Value>,
  headers: Record<string, string> = {},
): Promise<{ status: number; seen?: unknown; error?: string }> {
  const response = await fetch(`${server.urls.http}/v2/models/Parameters/infer`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({
      parameters,
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }],
    }),
    signal: AbortSignal.timeout(20_000),
  });
  const json = await response.json();
  if (response.status !== 200) return { status: response.status, error: json.error };
  return { status: 200, seen: JSON.parse(json.outputs[0].data[0]) };
}

function toGrpcParameter(value: Value): InferParameter {
  if (typeof value === "boolean") return { bool_param: value };
  if (typeof value === "string") return { string_param: value };
  return { int64_param: value };
}

function grpcRequest(parameters: Record<string, InferParameter>): ModelInferRequest {
  return {
    model_name: "Parameters",
    parameters,
    inputs: [{ name: "x", datatype: "FP32", shape: [1, 1] }],
    raw_input_contents: [new Uint8Array(new Float32Array([1]).buffer)],
  };
}

/** What the model saw over gRPC. */
async function viaGrpc(
  client: TestGrpcClient,
  parameters: Record<string, InferParameter>,
  headers: Record<string, string> = {},
): Promise<unknown> {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(headers)) metadata.set(key, value);
  const response = await client.call(
    "ModelInfer",
    codecs.ModelInferRequest,
    codecs.ModelInferResponse,
    grpcRequest(parameters),
    metadata,
  );
  // One BYTES element: a 4-byte length, then the JSON the model wrote.
  return JSON.parse(new TextDecoder().decode(response.raw_output_contents![0]!.subarray(4)));
}

function grpcParameters(values: Record<string, Value>): Record<string, InferParameter> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, toGrpcParameter(v)]));
}

for (const engine of ENGINES) {
  Deno.test(`Sequence parameters are checked, and a model without sequence batching ignores them, on HTTP and gRPC [${engine}]`, async () => {
    await using server = await startParametersServer(engine);
    using client = new TestGrpcClient(server.urls.grpc!, { deadlineMs: 20_000 });
    const sequence = { sequence_id: 7, sequence_start: true, sequence_end: false, k: "v" };
    assert.deepEqual(await viaHttp(server, sequence), { status: 200, seen: { k: "v" } });
    assert.deepEqual(await viaGrpc(client, grpcParameters(sequence)), { k: "v" });
    // A string correlation id is valid too.
    assert.deepEqual(await viaGrpc(client, grpcParameters({ sequence_id: "corr-1" })), {});

    assert.deepEqual(await viaHttp(server, { sequence_start: 1 }), {
      status: 400,
      error: "Invalid request parameter 'sequence_start': expected a boolean, got 1",
    });
    await rejectsWith(
      viaGrpc(client, { sequence_start: { int64_param: 1 } }),
      grpc.status.INVALID_ARGUMENT,
      "Invalid request parameter 'sequence_start': expected a boolean, got int64_param 1",
    );
    assert.deepEqual(await viaHttp(server, { sequence_id: true }), {
      status: 400,
      error:
        "Invalid request parameter 'sequence_id': expected an unsigned 64-bit integer or a string, got true",
    });
    await rejectsWith(
      viaGrpc(client, { sequence_id: { bool_param: true } }),
      grpc.status.INVALID_ARGUMENT,
      "Invalid request parameter 'sequence_id': expected an unsigned 64-bit integer or a string, got bool_param true",
    );
  });
}

for (const engine of ENGINES) {
  Deno.test(`A forwarded header wins over a body parameter, whatever its name, on HTTP and gRPC [${engine}]`, async () => {
    await using server = await startParametersServer(engine);
    using client = new TestGrpcClient(server.urls.grpc!, { deadlineMs: 20_000 });
    const body = { "x-user": "body", headers: "kept", k: 1 };
    const headers = {
      "x-user": "header",
      "triton_trace": "on",
      "priority": "9",
      "user-agent-x": "not forwarded",
    };
    const expected = {
      headers: "kept",
      k: 1,
      priority: "9",
      triton_trace: "on",
      "x-user": "header",
    };
    assert.deepEqual(await viaHttp(server, body, headers), { status: 200, seen: expected });
    assert.deepEqual(await viaGrpc(client, grpcParameters(body), headers), expected);
  });
}

for (const engine of ENGINES) {
  Deno.test(`Reserved and malformed parameters get one message on HTTP and gRPC [${engine}]`, async () => {
    await using server = await startParametersServer(engine);
    using client = new TestGrpcClient(server.urls.grpc!, { deadlineMs: 20_000 });
    assert.deepEqual(await viaHttp(server, { triton_secret: true }), {
      status: 400,
      error:
        "Invalid request parameter 'triton_secret': names starting with 'triton_' are reserved",
    });
    await rejectsWith(
      viaGrpc(client, grpcParameters({ triton_secret: true })),
      grpc.status.INVALID_ARGUMENT,
      "Invalid request parameter 'triton_secret': names starting with 'triton_' are reserved",
    );
    assert.deepEqual(await viaHttp(server, { priority: -1 }), {
      status: 400,
      error: "Invalid request parameter 'priority': expected a non-negative integer, got -1",
    });
    await rejectsWith(
      viaGrpc(client, grpcParameters({ priority: -1 })),
      grpc.status.INVALID_ARGUMENT,
      "Invalid request parameter 'priority': expected a non-negative integer, got int64_param -1",
    );
    assert.deepEqual(await viaHttp(server, { timeout: "1" }), {
      status: 400,
      error: `Invalid request parameter 'timeout': expected a non-negative integer, got "1"`,
    });
    await rejectsWith(
      viaGrpc(client, grpcParameters({ timeout: "1" })),
      grpc.status.INVALID_ARGUMENT,
      `Invalid request parameter 'timeout': expected a non-negative integer, got string_param "1"`,
    );
    // Both front ends keep serving.
    assert.deepEqual(await viaHttp(server, { priority: 1 }), { status: 200, seen: {} });
    assert.deepEqual(await viaGrpc(client, grpcParameters({ priority: 1 })), {});
  });
}
