// One model lookup per request: each front end resolves the target model once with
// `Engine.model()` and passes the handle on, and the engine does not look it up again. A counter
// wrapped around `engine.model` sees every lookup, on both front ends and both engines.

import assert from "node:assert/strict";
import { codecs, type ModelInferRequest } from "../src/protocol/grpc_codec.ts";
import { HttpFrontend } from "../src/frontend/http/server.ts";
import { Logger } from "../src/log.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";
import { ENGINES, watchdog } from "./_helpers.ts";
import { startTestServer } from "./grpc_test_server.ts";

const f32 = (...values: number[]): Uint8Array => new Uint8Array(new Float32Array(values).buffer);

const ADD_SUB_JSON = JSON.stringify({
  inputs: [
    { name: "a", datatype: "FP32", shape: [1, 2], data: [1, 2] },
    { name: "b", datatype: "FP32", shape: [1, 2], data: [0.5, 0.5] },
  ],
});

const addSub: ModelInferRequest = {
  model_name: "AddSub",
  inputs: [
    { name: "a", datatype: "FP32", shape: [1, 2] },
    { name: "b", datatype: "FP32", shape: [1, 2] },
  ],
  raw_input_contents: [f32(1, 2), f32(0.5, 0.5)],
};

const stream3: ModelInferRequest = {
  model_name: "Stream",
  id: "s",
  inputs: [{ name: "n", datatype: "INT32", shape: [1], contents: { int_contents: [3] } }],
};

for (const engine of ENGINES) {
  Deno.test(`Each request looks its model up once, over HTTP and gRPC [${engine}]`, async (t) => {
    await using server = await startTestServer(engine);
    const logger = new Logger({ file: "/dev/null" });
    const http = await HttpFrontend.start(server.engine, {
      hostname: "127.0.0.1",
      port: 0,
      logger,
    });
    using client = new TestGrpcClient(server.frontend.port, { deadlineMs: 30_000 });
    const lookups: string[] = [];
    const model = server.engine.model.bind(server.engine);
    server.engine.model = (name, version) => {
      lookups.push(name);
      return model(name, version);
    };
    // Runs one request and returns the lookups it made.
    const lookupsOf = async (request: () => Promise<void>): Promise<string[]> => {
      lookups.length = 0;
      await watchdog(request(), "the request");
      return [...lookups];
    };
    const post = async (
      path: string,
      body: BodyInit,
      headers: HeadersInit = {},
    ): Promise<string> => {
      const response = await fetch(`${http.url}${path}`, { method: "POST", body, headers });
      const text = await response.text();
      assert.equal(response.status, 200, text);
      return text;
    };
    try {
      await t.step("HTTP infer", async () => {
        assert.deepEqual(
          await lookupsOf(async () => {
            const text = await post("/v2/models/AddSub/infer", ADD_SUB_JSON);
            assert.deepEqual(JSON.parse(text).outputs[0].data, [1.5, 2.5]);
          }),
          ["AddSub"],
        );
      });
      await t.step("HTTP infer with a raw binary body", async () => {
        // The body is Echo's only input: a BYTES element, length-prefixed.
        const body = new Uint8Array([5, 0, 0, 0, ...new TextEncoder().encode("hello")]);
        assert.deepEqual(
          await lookupsOf(async () => {
            await post("/v2/models/Echo/infer", body, { "inference-header-content-length": "0" });
          }),
          ["Echo"],
        );
      });
      await t.step("HTTP generate and generate_stream", async () => {
        assert.deepEqual(
          await lookupsOf(async () => {
            await post("/v2/models/AddSub/generate", JSON.stringify({ a: [1], b: [2] }));
          }),
          ["AddSub"],
        );
        assert.deepEqual(
          await lookupsOf(async () => {
            const events = await post(
              "/v2/models/Stream/generate_stream",
              JSON.stringify({ n: 3 }),
            );
            assert.equal(events.match(/^data: /gm)?.length, 3);
          }),
          ["Stream"],
        );
      });
      await t.step("gRPC ModelInfer", async () => {
        assert.deepEqual(
          await lookupsOf(async () => {
            await client.call(
              "ModelInfer",
              codecs.ModelInferRequest,
              codecs.ModelInferResponse,
              addSub,
            );
          }),
          ["AddSub"],
        );
      });
      await t.step("gRPC ModelStreamInfer, a decoupled and a coupled request", async () => {
        assert.deepEqual(
          await lookupsOf(async () => {
            const stream = client.stream();
            stream.write(stream3);
            for (let i = 0; i < 3; i++) assert.ok(await stream.next());
            stream.write(addSub);
            assert.equal((await stream.next())?.error_message, "");
            stream.end();
            assert.equal(await stream.next(), undefined);
          }),
          ["Stream", "AddSub"],
        );
      });
    } finally {
      await http.shutdown();
      logger.close();
    }
  });
}
