// The non-inference RPCs of the gRPC front end over loopback: health, metadata, config,
// statistics, repository, unsupported RPCs, grpc.health.v1, lifecycle and message limits.

import * as grpc from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { BuiltinEngine } from "../src/engine/builtin/engine.ts";
import { codecs, type ModelRef } from "../src/protocol/grpc_codec.ts";
import { modelConfigToJson } from "../src/protocol/model_config_proto.ts";
import { GrpcFrontend } from "../src/frontend/grpc/server.ts";
import { rejectsWith, TestGrpcClient } from "./grpc_test_client.ts";
import { ENGINES, watchdog } from "./_helpers.ts";
import http2 from "node:http2";
import {
  CONNECTION_WINDOW_BYTES,
  STREAM_WINDOW_BYTES,
} from "../src/frontend/grpc/connection_tuning.ts";
import { startTestServer } from "./grpc_test_server.ts";
import { SharedMemoryRegistry } from "../src/shm/registry.ts";

for (const engine of ENGINES) {
  Deno.test(`Health RPCs answer for the server and its models [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const empty = codecs.Empty;
    assert.deepEqual(await client.call("ServerLive", empty, codecs.ServerLiveResponse, {}), {
      live: true,
    });
    assert.deepEqual(await client.call("ServerReady", empty, codecs.ReadyResponse, {}), {
      ready: true,
    });
    const ready = (ref: ModelRef): Promise<unknown> =>
      client.call("ModelReady", codecs.ModelRef, codecs.ReadyResponse, ref);
    assert.deepEqual(await ready({ name: "AddSub" }), { ready: true });
    assert.deepEqual(await ready({ name: "AddSub", version: "1" }), { ready: true });
    assert.deepEqual(await ready({ name: "AddSub", version: "2" }), { ready: false });
    assert.deepEqual(await ready({ name: "Missing" }), { ready: false });
    await rejectsWith(
      ready({ name: "AddSub", version: "x" }),
      grpc.status.INVALID_ARGUMENT,
      "Invalid model version: 'x' is not a non-negative integer",
    );
    const check = await client.raw(
      "Check",
      codecs.HealthCheckRequest.encode({}),
      undefined,
      "/grpc.health.v1.Health/",
    );
    assert.deepEqual([...check], [8, 1]); // status: SERVING
  });
}

for (const engine of ENGINES) {
  Deno.test(`ServerMetadata and ModelMetadata [${engine}]`, async () => {
    // Serving system shared-memory regions, as a Triton server does (none are registered).
    await using server = await startTestServer(engine, {
      sharedMemory: new SharedMemoryRegistry(),
    });
    using client = new TestGrpcClient(server.frontend.port);
    const metadata = await client.call(
      "ServerMetadata",
      codecs.Empty,
      codecs.ServerMetadataResponse,
      {},
    );
    assert.deepEqual(metadata, {
      ...server.engine.serverMetadata(),
      extensions: [
        "binary_tensor_data",
        "parameters",
        "statistics",
        "model_configuration",
        "model_repository",
        "schedule_policy",
        "system_shared_memory",
        "cuda_shared_memory",
      ],
    });
    const model = await client.call(
      "ModelMetadata",
      codecs.ModelRef,
      codecs.ModelMetadataResponse,
      { name: "AddSub" },
    );
    assert.deepEqual(model, {
      name: "AddSub",
      versions: ["1"],
      platform: (await server.engine.modelMetadata("AddSub")).platform,
      inputs: [
        { name: "a", datatype: "FP32", shape: ["-1", "-1"] },
        { name: "b", datatype: "FP32", shape: ["-1", "-1"] },
      ],
      outputs: [
        { name: "add", datatype: "FP32", shape: ["-1", "-1"] },
        { name: "sub", datatype: "FP32", shape: ["-1", "-1"] },
      ],
    });
    await rejectsWith(
      client.call("ModelMetadata", codecs.ModelRef, codecs.ModelMetadataResponse, {
        name: "Missing",
      }),
      grpc.status.NOT_FOUND,
      "Request for unknown model: 'Missing' is not found",
    );
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelConfig answers the engine's config as a protobuf ModelConfig [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const { config } = await client.call(
      "ModelConfig",
      codecs.ModelRef,
      codecs.ModelConfigResponse,
      { name: "AddSub" },
    );
    assert.ok(config);
    const json = modelConfigToJson(config);
    const expected = await server.engine.modelConfig("AddSub");
    assert.equal(json.name, "AddSub");
    assert.equal(json.max_batch_size, 8);
    assert.deepEqual(
      json.input,
      (expected.input as Record<string, unknown>[]).map((input) => ({
        format: "FORMAT_NONE",
        is_shape_tensor: false,
        allow_ragged_batch: false,
        optional: false,
        is_non_linear_format_io: false,
        // Unset messages (JSON null) have no protobuf form.
        ...Object.fromEntries(Object.entries(input).filter(([, value]) => value !== null)),
      })),
    );
    assert.deepEqual(
      (json.instance_group as { kind: string; count: number }[]).map((g) => [g.kind, g.count]),
      [["KIND_CPU", 1]],
    );
    assert.ok(json.dynamic_batching);
    const stream = await client.call("ModelConfig", codecs.ModelRef, codecs.ModelConfigResponse, {
      name: "Stream",
    });
    assert.deepEqual(stream.config?.model_transaction_policy, { decoupled: true });
    await rejectsWith(
      client.call("ModelConfig", codecs.ModelRef, codecs.ModelConfigResponse, { name: "Missing" }),
      grpc.status.NOT_FOUND,
      "Request for unknown model: 'Missing' is not found",
    );
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelStatistics and RepositoryIndex [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const one = await client.call(
      "ModelStatistics",
      codecs.ModelRef,
      codecs.ModelStatisticsResponse,
      { name: "AddSub" },
    );
    assert.equal(one.model_stats.length, 1);
    assert.equal(one.model_stats[0]!.name, "AddSub");
    assert.equal(one.model_stats[0]!.inference_count, "0");
    const every = await client.call(
      "ModelStatistics",
      codecs.ModelRef,
      codecs.ModelStatisticsResponse,
      {},
    );
    assert.deepEqual(
      every.model_stats.map((s) => s.name).sort(),
      ["AddSub", "Echo", "Fail", "Identity", "Stream", "Wait"],
    );
    await rejectsWith(
      client.call("ModelStatistics", codecs.ModelRef, codecs.ModelStatisticsResponse, {
        name: "Missing",
      }),
      grpc.status.INVALID_ARGUMENT,
      "requested model 'Missing' is not available",
    );
    await rejectsWith(
      client.call("ModelStatistics", codecs.ModelRef, codecs.ModelStatisticsResponse, {
        name: "AddSub",
        version: "7",
      }),
      grpc.status.INVALID_ARGUMENT,
      "requested model version is not available for model 'AddSub'",
    );
    const index = await client.call(
      "RepositoryIndex",
      codecs.RepositoryIndexRequest,
      codecs.RepositoryIndexResponse,
      { ready: true },
    );
    assert.deepEqual(
      index.models.find((m) => m.name === "AddSub"),
      { name: "AddSub", version: "1", state: "READY", reason: "" },
    );
    await rejectsWith(
      client.call(
        "RepositoryIndex",
        codecs.RepositoryIndexRequest,
        codecs.RepositoryIndexResponse,
        {
          repository_name: "other",
        },
      ),
      grpc.status.UNIMPLEMENTED,
      "'repository_name' specification is not supported",
    );
  });
}

for (const engine of ENGINES) {
  Deno.test(`Unsupported RPCs answer UNIMPLEMENTED with a clear message, and the supported ones answer [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    await rejectsWith(
      client.call("RepositoryModelLoad", codecs.RepositoryModelRequest, codecs.Empty, {
        model_name: "AddSub",
        parameters: { config: { string_param: "{}" } },
      }),
      grpc.status.UNIMPLEMENTED,
      "Cannot load model 'AddSub' with a new configuration: models are bound in code, not loaded from a repository",
    );
    await rejectsWith(
      client.raw("CudaSharedMemoryRegister", new Uint8Array()),
      grpc.status.UNIMPLEMENTED,
      /CUDA shared memory is not supported/,
    );
    // Nothing is registered, so CUDA status lists nothing and unregistering succeeds (Triton's
    // answers without GPUs; perf_analyzer unregisters both kinds when it ends).
    assert.deepEqual([...await client.raw("CudaSharedMemoryStatus", new Uint8Array())], []);
    assert.deepEqual([...await client.raw("CudaSharedMemoryUnregister", new Uint8Array())], []);
    await rejectsWith(
      client.raw("CudaSharedMemoryStatus", new Uint8Array([0x0a, 0x01, 0x72])),
      grpc.status.NOT_FOUND,
      "Unable to find cuda shared memory region: 'r'",
    );
    // TraceSetting is supported (tests/trace_test.ts): an empty request reads the global settings.
    assert.deepEqual(
      await client.call("TraceSetting", codecs.TraceSetting, codecs.TraceSetting, { settings: {} }),
      {
        settings: {
          trace_level: { value: ["OFF"] },
          trace_rate: { value: ["1000"] },
          trace_count: { value: ["-1"] },
          log_frequency: { value: ["0"] },
          trace_file: { value: [""] },
          trace_mode: { value: ["triton"] },
        },
        model_name: "",
      },
    );
    // LogSettings is supported (tests/logging_test.ts); a malformed request is refused.
    await rejectsWith(
      client.raw("LogSettings", new Uint8Array([0x0a, 0x05])),
      grpc.status.INVALID_ARGUMENT,
      /log settings request/,
    );
    await rejectsWith(client.raw("NoSuchRpc", new Uint8Array()), grpc.status.UNIMPLEMENTED, /./);
    assert.deepEqual(await client.call("ServerLive", codecs.Empty, codecs.ServerLiveResponse, {}), {
      live: true,
    });
  });
}

for (const engine of ENGINES) {
  Deno.test(`Messages over maxMessageBytes are refused and the server keeps serving [${engine}]`, async () => {
    await using server = await startTestServer(engine, { maxMessageBytes: 1024 });
    using client = new TestGrpcClient(server.frontend.port);
    await rejectsWith(
      client.raw("ModelInfer", new Uint8Array(2048)),
      grpc.status.RESOURCE_EXHAUSTED,
      /./,
    );
    assert.deepEqual(await client.call("ServerLive", codecs.Empty, codecs.ServerLiveResponse, {}), {
      live: true,
    });
  });
}

Deno.test("GrpcFrontend reports its port and URL, and shutdown is idempotent", async () => {
  await using engine = new BuiltinEngine({});
  const frontend = await GrpcFrontend.start(engine, { port: 0 });
  assert.ok(frontend.port > 0);
  assert.equal(frontend.url, `grpc://127.0.0.1:${frontend.port}`);
  using client = new TestGrpcClient(frontend.port);
  assert.deepEqual(await client.call("ServerReady", codecs.Empty, codecs.ReadyResponse, {}), {
    ready: true,
  });
  await Promise.all([frontend.shutdown(), frontend.shutdown()]);
  await frontend.shutdown();
  await assert.rejects(
    GrpcFrontend.start(engine, { port: 70000 }),
    /Invalid gRPC port: 70000 is not within \[0, 65535\]/,
  );
  await assert.rejects(
    GrpcFrontend.start(engine, { port: 0, headerForwardPattern: "(" }),
    /Invalid gRPC headerForwardPattern/,
  );
});

Deno.test("GrpcFrontend fails clearly when the port is taken", async () => {
  await using engine = new BuiltinEngine({});
  await using first = await GrpcFrontend.start(engine, { address: "127.0.0.1", port: 0 });
  await assert.rejects(
    GrpcFrontend.start(engine, { address: "127.0.0.1", port: first.port }),
    new RegExp(`Cannot start the gRPC front end on 127\\.0\\.0\\.1:${first.port}`),
  );
});

Deno.test("GrpcFrontend advertises large flow-control windows on each connection, and HTTP/2's default frame size", async () => {
  await using engine = new BuiltinEngine({});
  await using frontend = await GrpcFrontend.start(engine, { address: "127.0.0.1", port: 0 });
  const session = http2.connect(`http://127.0.0.1:${frontend.port}`);
  try {
    // The window travels in the server's second SETTINGS frame (after the default first one).
    const settings = await watchdog(
      new Promise<http2.Settings>((resolve) => {
        session.on("remoteSettings", (remote: http2.Settings) => {
          if (remote.initialWindowSize !== 65535) resolve(remote);
        });
      }),
      "the server's SETTINGS",
      10_000,
    );
    assert.equal(settings.initialWindowSize, STREAM_WINDOW_BYTES);
    assert.equal(STREAM_WINDOW_BYTES, 16 * 1024 * 1024);
    // Larger frames would let a 20 KB HEADERS frame through, which h2spec checks is refused
    // (RFC 9113 §4.2; h2/session.ts's MAX_FRAME_SIZE).
    assert.equal(settings.maxFrameSize, 16384);
    // The connection window grows by a WINDOW_UPDATE; a 16 MiB request goes out without waiting.
    const stream = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Check" });
    stream.on("error", () => {});
    await watchdog(
      new Promise<void>((resolve) => {
        const poll = (): void => {
          if ((session.state.remoteWindowSize ?? 0) >= CONNECTION_WINDOW_BYTES - 65535) resolve();
          else setTimeout(poll, 10);
        };
        poll();
      }),
      "the connection window",
      10_000,
    );
    stream.close();
  } finally {
    session.close();
  }
});
