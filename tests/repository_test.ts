// The repository extension over the bound models, on both engines: unload keeps a model bound
// and makes its requests fail, load serves it again, the index shows each state, and a name
// never bound gets Triton's answers. With our client and tritonclient (HTTP and gRPC), the
// model-repository endpoints restricted to a token.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { type BindOptions, ndarray } from "../mod.ts";
import { ClientInferenceServerError, ModelClient } from "../src/client/mod.ts";
import { codecs } from "../src/protocol/grpc_codec.ts";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { PYTHON } from "./_peers.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";

const TOKEN = "repository-token";
const SCRIPT = new URL("./interop/repository_client.py", import.meta.url).pathname;

/** `Scale`: y = 2 * x. */
const SCALE: BindOptions = {
  modelName: "Scale",
  inferFunc: (requests) =>
    requests.map(({ data: { x } }) => ({
      y: ndarray((x!.data as Float32Array).map((v) => v * 2), x!.shape),
    })),
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  config: { maxBatchSize: 4 },
};

function serve(engine: (typeof ENGINES)[number]): ReturnType<typeof startServer> {
  return startServer({
    engine,
    models: [SCALE],
    securityConfig: { accessToken: TOKEN },
    config: { allowMetrics: false },
  });
}

async function infer(client: ModelClient): Promise<number[]> {
  const { y } = await client.inferBatch({ x: ndarray(new Float32Array([1, 2]), [1, 2]) });
  return Array.from(y!.data as Float32Array);
}

async function httpIndex(url: string): Promise<unknown> {
  const response = await fetch(`${url}/v2/repository/index`, {
    method: "POST",
    headers: { "triton-access-token": TOKEN },
  });
  assert.equal(response.status, 200);
  return await response.json();
}

async function grpcIndex(url: string): Promise<unknown> {
  using client = new TestGrpcClient(url, { deadlineMs: 30_000 });
  const metadata = new grpc.Metadata();
  metadata.set("triton-grpc-protocol-triton-access-token", TOKEN);
  const { models } = await client.call(
    "RepositoryIndex",
    codecs.RepositoryIndexRequest,
    codecs.RepositoryIndexResponse,
    {},
    metadata,
  );
  return models;
}

const READY = [{ name: "Scale", version: "1", state: "READY" }];
const UNLOADED = [{ name: "Scale", version: "1", state: "UNAVAILABLE", reason: "unloaded" }];

for (const engine of ENGINES) {
  Deno.test(`loadModel/unloadModel of a bound model over HTTP and gRPC [${engine}]`, async () => {
    await using triton = await serve(engine);
    for (const url of [triton.urls.http!, triton.urls.grpc!]) {
      await using client = new ModelClient(url, "Scale", {
        accessToken: TOKEN,
        initTimeoutS: 10,
        inferenceTimeoutS: 30,
      });
      assert.deepEqual(await infer(client), [2, 4]);
      assert.deepEqual(await httpIndex(triton.urls.http!), READY);

      await client.unloadModel();
      assert.deepEqual(await httpIndex(triton.urls.http!), UNLOADED);
      assert.deepEqual(await grpcIndex(triton.urls.grpc!), UNLOADED);
      const unready = await fetch(`${triton.urls.http}/v2/models/Scale/ready`);
      await unready.body?.cancel();
      assert.equal(unready.status, 400);
      const refused = await fetch(`${triton.urls.http}/v2/models/Scale/infer`, {
        method: "POST",
        body: JSON.stringify({
          inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }],
        }),
      });
      assert.equal(refused.status, 503);
      assert.deepEqual(await refused.json(), {
        error: "Request for unknown model: 'Scale' has no available versions",
      });

      await client.loadModel();
      assert.deepEqual(await infer(client), [2, 4]);
      // Decoded with proto3's defaults: an empty reason is there.
      assert.deepEqual(await grpcIndex(triton.urls.grpc!), [{ ...READY[0], reason: "" }]);
    }
  });

  Deno.test(`Repository load/unload of a name never bound [${engine}]`, async () => {
    await using triton = await serve(engine);
    for (const url of [triton.urls.http!, triton.urls.grpc!]) {
      await using client = new ModelClient(url, "Nope", {
        accessToken: TOKEN,
        lazyInit: true,
        inferenceTimeoutS: 30,
      });
      await assert.rejects(client.loadModel(), (error) => {
        assert.ok(error instanceof ClientInferenceServerError);
        assert.match(error.message, /failed to load 'Nope', failed to poll from model repository/);
        return true;
      });
      // Triton's unload of a model it does not hold succeeds.
      await client.unloadModel();
    }
    const load = await fetch(`${triton.urls.http}/v2/repository/models/Nope/load`, {
      method: "POST",
      headers: { "triton-access-token": TOKEN },
    });
    // Triton answers 500; the name is the client's mistake, so DenoTriton answers 404.
    assert.equal(load.status, 404);
    assert.deepEqual(await load.json(), {
      error: "failed to load 'Nope', failed to poll from model repository",
    });
    const noToken = await fetch(`${triton.urls.http}/v2/repository/models/Scale/unload`, {
      method: "POST",
    });
    await noToken.body?.cancel();
    assert.equal(noToken.status, 401);
    assert.deepEqual(await httpIndex(triton.urls.http!), READY);
  });

  Deno.test(`Unbinding a model unloaded through the repository, then binding it again [${engine}]`, async () => {
    await using triton = await serve(engine);
    await using client = new ModelClient(triton.urls.http!, "Scale", {
      accessToken: TOKEN,
      initTimeoutS: 10,
    });
    await client.unloadModel();
    await triton.unbind("Scale");
    assert.deepEqual(await httpIndex(triton.urls.http!), []);
    const gone = await fetch(`${triton.urls.http}/v2/models/Scale`);
    assert.equal(gone.status, 404);
    assert.deepEqual(await gone.json(), {
      error: "Request for unknown model: 'Scale' is not found",
    });
    await triton.bind(SCALE);
    assert.deepEqual(await httpIndex(triton.urls.http!), READY);
    assert.deepEqual(await infer(client), [2, 4]);
  });

  for (const protocol of ["http", "grpc"] as const) {
    const name = `tritonclient.${protocol} load_model/unload_model [${engine}]`;
    Deno.test({
      name: PYTHON ? name : `${name} (skipped: no python3 with tritonclient)`,
      ignore: PYTHON === undefined && !PEERS_REQUIRED,
      async fn(): Promise<void> {
        assert.ok(PYTHON, "python3 with tritonclient is required but was not found");
        await using triton = await serve(engine);
        const url = (protocol === "http" ? triton.urls.http! : triton.urls.grpc!)
          .replace(/^\w+:\/\//, "");
        const result = await new Deno.Command(PYTHON.python, {
          args: [SCRIPT, "--url", url, "--protocol", protocol, "--token", TOKEN],
          stdout: "piped",
          stderr: "piped",
          signal: AbortSignal.timeout(120_000),
        }).output();
        const decoder = new TextDecoder();
        const stdout = decoder.decode(result.stdout);
        assert.equal(result.code, 0, `${stdout}\n${decoder.decode(result.stderr)}`);
        assert.equal(stdout.match(/^ok /gm)?.length, 6, stdout);
      },
    });
  }
}
