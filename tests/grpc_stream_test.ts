// ModelStreamInfer over a loopback gRPC connection: decoupled and coupled models, final flags,
// errors in the stream, half-close, cancellation and `triton_grpc_error`.

import * as grpc from "@grpc/grpc-js";
import assert from "node:assert/strict";
import type { ModelInferRequest, ModelStreamInferResponse } from "../src/protocol/grpc_codec.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";
import { ENGINES, watchdog } from "./_helpers.ts";
import { startTestServer } from "./grpc_test_server.ts";

const count = (
  n: number,
  id: string,
  extra: Partial<ModelInferRequest> = {},
): ModelInferRequest => ({
  model_name: "Stream",
  id,
  inputs: [{ name: "n", datatype: "INT32", shape: [1], contents: { int_contents: [n] } }],
  ...extra,
});

function summary(response: ModelStreamInferResponse | undefined): unknown {
  assert.ok(response, "the stream ended early");
  const infer = response.infer_response!;
  return {
    error: response.error_message,
    id: infer.id,
    values: infer.raw_output_contents!.map((bytes) => [...bytes]),
    final: infer.parameters?.triton_final_response?.bool_param,
  };
}

for (const engine of ENGINES) {
  Deno.test(`ModelStreamInfer streams decoupled responses matched by id [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const stream = client.stream();
    stream.write(count(2, "a"));
    assert.deepEqual(summary(await stream.next()), {
      error: "",
      id: "a",
      values: [[0, 0, 0, 0]],
      final: false,
    });
    assert.deepEqual(summary(await stream.next()), {
      error: "",
      id: "a",
      values: [[1, 0, 0, 0]],
      final: false,
    });
    // The flags-only final response comes only when asked for.
    stream.write(count(1, "b", {
      parameters: { triton_enable_empty_final_response: { bool_param: true } },
    }));
    assert.deepEqual(summary(await stream.next()), {
      error: "",
      id: "b",
      values: [[0, 0, 0, 0]],
      final: false,
    });
    assert.deepEqual(summary(await stream.next()), { error: "", id: "b", values: [], final: true });
    stream.end();
    assert.equal(await stream.next(), undefined);
    assert.equal((await stream.status).code, grpc.status.OK);
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelStreamInfer answers coupled models once, marked final [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const stream = client.stream();
    stream.write({
      model_name: "AddSub",
      id: "c",
      inputs: [
        { name: "a", datatype: "FP32", shape: [1, 1], contents: { fp32_contents: [1] } },
        { name: "b", datatype: "FP32", shape: [1, 1], contents: { fp32_contents: [2] } },
      ],
    });
    // Half-close right away: the server still answers what is in flight, then ends with OK.
    stream.end();
    assert.deepEqual(summary(await stream.next()), {
      error: "",
      id: "c",
      values: [[0, 0, 0x40, 0x40], [0, 0, 0x80, 0xbf]],
      final: true,
    });
    assert.equal(await stream.next(), undefined);
    assert.equal((await stream.status).code, grpc.status.OK);
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelStreamInfer reports errors in the stream and keeps it open [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const stream = client.stream();
    stream.write(count(-1, "neg", { model_version: "1" }));
    const failed = await stream.next();
    assert.equal(failed?.error_message, "Negative count: n must be >= 0");
    assert.deepEqual(
      {
        id: failed?.infer_response?.id,
        model_name: failed?.infer_response?.model_name,
        model_version: failed?.infer_response?.model_version,
        outputs: failed?.infer_response?.outputs,
      },
      { id: "neg", model_name: "Stream", model_version: "1", outputs: [] },
    );
    stream.write(count(1, "missing", { model_name: "Missing" }));
    assert.equal(
      (await stream.next())?.error_message,
      "Request for unknown model: 'Missing' is not found",
    );
    stream.write(count(1, "bad", { parameters: { triton_x: { bool_param: true } } }));
    assert.match((await stream.next())?.error_message ?? "", /'triton_x'/);
    stream.write(count(1, "ok"));
    assert.deepEqual(summary(await stream.next()), {
      error: "",
      id: "ok",
      values: [[0, 0, 0, 0]],
      final: false,
    });
    stream.end();
    assert.equal(await stream.next(), undefined);
    assert.equal((await stream.status).code, grpc.status.OK);
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelStreamInfer with triton_grpc_error ends the stream with a status [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const metadata = new grpc.Metadata();
    metadata.set("triton_grpc_error", "true");
    const stream = client.stream(metadata);
    stream.write(count(1, "missing", { model_name: "Missing" }));
    assert.equal(await stream.next(), undefined);
    const status = await stream.status;
    assert.equal(status.code, grpc.status.NOT_FOUND);
    assert.equal(status.details, "Request for unknown model: 'Missing' is not found");
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelStreamInfer cancelled by the client aborts requests in flight [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const stream = client.stream();
    const started = server.nextWaitStart();
    const aborted = server.nextAbort();
    stream.write({
      model_name: "Wait",
      inputs: [{ name: "x", datatype: "FP32", shape: [1], contents: { fp32_contents: [1] } }],
    });
    await watchdog(started, "the request to start");
    stream.cancel();
    assert.match(String(await watchdog(aborted, "the abort")), /cancelled/);
    assert.equal(
      (await watchdog(stream.status, "the stream's status")).code,
      grpc.status.CANCELLED,
    );
  });
}
