import assert from "node:assert/strict";
import {
  ClientClosedError,
  ClientInferenceServerError,
  ClientModelDoesntSupportBatchingError,
  ClientQueueFullError,
  ClientTimeoutError,
  ClientValueError,
} from "./errors.ts";
import { ModelClient } from "./model_client.ts";
import { ndarray } from "../tensor/ndarray.ts";

const CONFIGS: Record<string, unknown> = {
  Echo: {
    name: "Echo",
    max_batch_size: 4,
    input: [{ name: "x", data_type: "TYPE_FP32", dims: [-1] }],
    output: [{ name: "y", data_type: "TYPE_FP32", dims: [-1] }],
  },
  Flat: {
    name: "Flat",
    max_batch_size: 0,
    input: [{ name: "x", data_type: "TYPE_FP32", dims: [-1] }],
    output: [{ name: "y", data_type: "TYPE_FP32", dims: [-1] }],
  },
  Stream: {
    name: "Stream",
    max_batch_size: 0,
    input: [{ name: "x", data_type: "TYPE_FP32", dims: [-1] }],
    output: [{ name: "y", data_type: "TYPE_FP32", dims: [-1] }],
    model_transaction_policy: { decoupled: true },
  },
};
CONFIGS.Slow = { ...CONFIGS.Echo as object, name: "Slow" };
CONFIGS.Full = { ...CONFIGS.Echo as object, name: "Full" };
CONFIGS.Bad = { ...CONFIGS.Echo as object, name: "Bad" };

interface Seen {
  method: string;
  path: string;
  headers: Headers;
  json?: Record<string, unknown>;
}

/** A raw KServe stub: records every request, echoes input 0 back as output "y". */
function startStub(): {
  url: string;
  seen: Seen[];
  state: { ready: boolean };
  close(): Promise<void>;
} {
  const seen: Seen[] = [];
  const state = { ready: true };
  // Slow requests hang until the stub closes.
  const release = Promise.withResolvers<void>();
  const json = (status: number, body: unknown): Response =>
    new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen(): void {} },
    async (request): Promise<Response> => {
      const path = new URL(request.url).pathname;
      const entry: Seen = { method: request.method, path, headers: request.headers };
      seen.push(entry);
      if (path === "/v2/health/ready") {
        return new Response(null, {
          status: state.ready ? 200 : 400,
        });
      }
      const match = /^\/v2\/(?:repository\/)?models\/([^/]+)(?:\/versions\/\d+)?\/(\w+)$/.exec(
        path,
      );
      const name = match?.[1] ?? "";
      const action = match?.[2];
      if (path.startsWith("/v2/repository/")) {
        return json(400, { error: `failed to ${action} '${name}': repository is read-only` });
      }
      if (!(name in CONFIGS)) return json(404, { error: `Request for unknown model: '${name}'` });
      if (action === "ready") return new Response(null, { status: 200 });
      if (action === "config") return json(200, CONFIGS[name]);
      const body = new Uint8Array(await request.arrayBuffer());
      const length = Number(request.headers.get("inference-header-content-length"));
      entry.json = JSON.parse(new TextDecoder().decode(body.subarray(0, length)));
      if (name === "Full") return json(503, { error: "Exceeds maximum queue size" });
      if (name === "Bad") return json(400, { error: "unexpected shape for input 'x'" });
      if (name === "Slow") {
        await release.promise;
      }
      const input = (entry.json!.inputs as Record<string, unknown>[])[0]!;
      const data = body.subarray(length);
      const header = new TextEncoder().encode(JSON.stringify({
        model_name: name,
        model_version: "1",
        id: entry.json!.id,
        outputs: [{
          name: "y",
          datatype: input.datatype,
          shape: input.shape,
          parameters: { binary_data_size: data.byteLength },
        }],
      }));
      return new Response(new Uint8Array([...header, ...data]), {
        headers: {
          "content-type": "application/octet-stream",
          "inference-header-content-length": String(header.byteLength),
        },
      });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    seen,
    state,
    close: () => {
      release.resolve();
      return server.shutdown();
    },
  };
}

Deno.test("ModelClient.inferSample() adds and strips the batch axis, sends the token and asks for no compression", async () => {
  const stub = startStub();
  try {
    await using client = new ModelClient(stub.url, "Echo", {
      accessToken: "secret",
      headers: { "x-team": "a" },
    });
    const out = await client.inferSample([ndarray(new Float32Array([1, 2]))], {
      headers: { "x-call": 1 },
      parameters: { temperature: 0.5 },
    });
    assert.deepEqual(out.y!.shape, [2]);
    assert.deepEqual([...(out.y!.data as Float32Array)], [1, 2]);
    assert.deepEqual(
      stub.seen.map((s) => `${s.method} ${s.path}`),
      [
        "GET /v2/health/ready",
        "GET /v2/models/Echo/ready",
        "GET /v2/models/Echo/config",
        "POST /v2/models/Echo/infer",
      ],
    );
    for (const seen of stub.seen) {
      assert.equal(seen.headers.get("triton-access-token"), "secret", seen.path);
      assert.equal(seen.headers.get("x-team"), "a", seen.path);
      // Not fetch()'s default gzip: compressing tensors costs more than it saves.
      assert.equal(seen.headers.get("accept-encoding"), "identity", seen.path);
    }
    const infer = stub.seen[3]!;
    assert.equal(infer.headers.get("x-call"), "1");
    assert.deepEqual(infer.json, {
      id: "1",
      parameters: { temperature: 0.5 },
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], parameters: { binary_data_size: 8 } }],
      outputs: [{ name: "y", parameters: { binary_data: true } }],
    });
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient.inferBatch() sends named inputs as they are, with a version in the path", async () => {
  const stub = startStub();
  try {
    await using client = new ModelClient(stub.url, "Echo", { modelVersion: 3 });
    const out = await client.inferBatch({ x: ndarray(new Float32Array([1, 2, 3, 4]), [2, 2]) });
    assert.deepEqual(out.y!.shape, [2, 2]);
    assert.equal(stub.seen.at(-1)!.path, "/v2/models/Echo/versions/3/infer");
    assert.equal(stub.seen.at(-2)!.path, "/v2/models/Echo/versions/3/config");
    assert.equal(await client.isBatchingSupported(), true);
    assert.equal((await client.modelConfig()).maxBatchSize, 4);
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient refuses batches for non-batching models and infer for decoupled ones", async () => {
  const stub = startStub();
  try {
    await using flat = new ModelClient(stub.url, "Flat");
    await assert.rejects(
      flat.inferBatch([ndarray(new Float32Array([1]))]),
      ClientModelDoesntSupportBatchingError,
    );
    const out = await flat.inferSample([ndarray(new Float32Array([1, 2]))]);
    assert.deepEqual(out.y!.shape, [2]);
    assert.deepEqual(stub.seen.at(-1)!.json!.inputs, [
      { name: "x", datatype: "FP32", shape: [2], parameters: { binary_data_size: 8 } },
    ]);
    await using stream = new ModelClient(stub.url, "Stream");
    await assert.rejects(stream.inferSample([ndarray(new Float32Array([1]))]), {
      name: "ClientInferenceServerError",
      message: "Cannot infer with model 'Stream': it is decoupled; use inferStream()",
    });
    await assert.rejects(
      flat.inferStream([ndarray(new Float32Array([1]))]).next(),
      /it is not decoupled/,
    );
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient validates inputs, parameters and headers", async () => {
  const stub = startStub();
  try {
    await using client = new ModelClient(stub.url, "Echo");
    const x = ndarray(new Float32Array([1]));
    await assert.rejects(client.inferSample([x, x]), {
      name: "ClientValueError",
      message: "Cannot infer: 2 positional inputs given but model 'Echo' declares 1",
    });
    await assert.rejects(
      client.inferSample({ x: [1, 2] as never }),
      /Cannot infer: input 'x' is not an NDArray/,
    );
    await assert.rejects(client.inferSample(x as never), ClientValueError);
    await assert.rejects(
      client.inferSample([x], { parameters: { p: null as never } }),
      /Invalid parameter 'p': expected a string, finite number or boolean, got null/,
    );
    await assert.rejects(
      client.inferSample([x], { headers: { h: {} as never } }),
      /Invalid header 'h'/,
    );
    assert.throws(() => new ModelClient(stub.url, ""), ClientValueError);
    assert.throws(() => new ModelClient(stub.url, "m", { modelVersion: "v1" }), /expected digits/);
    assert.throws(() => new ModelClient(stub.url, "m", { initTimeoutS: 0 }), /initTimeoutS/);
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient maps server errors: message, status and full queues", async () => {
  const stub = startStub();
  try {
    await using bad = new ModelClient(stub.url, "Bad");
    await assert.rejects(bad.inferSample([ndarray(new Float32Array([1]))]), (error: unknown) => {
      assert.ok(error instanceof ClientInferenceServerError);
      assert.equal(error.status, 400);
      assert.equal(error.serverMessage, "unexpected shape for input 'x'");
      assert.equal(error.message, "Inference failed: unexpected shape for input 'x' (HTTP 400)");
      return true;
    });
    await using full = new ModelClient(stub.url, "Full");
    await assert.rejects(full.inferSample([ndarray(new Float32Array([1]))]), ClientQueueFullError);
    await assert.rejects(bad.loadModel({ config: { max_batch_size: 2 } }), {
      message: "Cannot load model 'Bad': failed to load 'Bad': repository is read-only (HTTP 400)",
    });
    await assert.rejects(bad.unloadModel(), /failed to unload 'Bad'/);
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient times out slow inferences and keeps working", async () => {
  const stub = startStub();
  try {
    await using client = new ModelClient(stub.url, "Slow", { inferenceTimeoutS: 0.2 });
    await assert.rejects(client.inferSample([ndarray(new Float32Array([1]))]), {
      name: "ClientTimeoutError",
      message: "Cannot infer with model 'Slow': timed out after 0.2 s",
    });
    // A caller's signal wins over the timeout and rejects with its own reason.
    const controller = new AbortController();
    const pending = client.inferSample([ndarray(new Float32Array([1]))], {
      signal: controller.signal,
    });
    controller.abort(new Error("user gave up"));
    await assert.rejects(pending, /user gave up/);
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient waits for readiness and times out for unknown models", async () => {
  const stub = startStub();
  try {
    stub.state.ready = false;
    await using client = new ModelClient(stub.url, "Echo", { initTimeoutS: 30 });
    const pending = client.inferSample([ndarray(new Float32Array([1]))]);
    while (stub.seen.length < 2) await new Promise((resolve) => setTimeout(resolve, 20));
    stub.state.ready = true;
    assert.deepEqual((await pending).y!.shape, [1]);

    await using unknown = new ModelClient(stub.url, "Nope", { initTimeoutS: 0.5 });
    await assert.rejects(unknown.inferSample([]), {
      name: "ClientTimeoutError",
      message: "Timed out after 0.5 s waiting for model 'Nope' to be ready",
    });
    await assert.rejects(unknown.waitForModel(0.3), ClientTimeoutError);
    await client.waitForServer(5);
    await client.waitForModel(5);
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient keeps waiting while nothing listens, then times out", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  await using client = new ModelClient(`127.0.0.1:${port}`, "Echo", { initTimeoutS: 0.6 });
  await assert.rejects(client.modelConfig(), (error: unknown) => {
    assert.ok(error instanceof ClientTimeoutError);
    assert.match(
      error.message,
      /^Timed out after 0.6 s waiting for model 'Echo' to be ready: Cannot reach server at http:\/\/127\.0\.0\.1:\d+/,
    );
    return true;
  });
});

Deno.test("ModelClient.close() fails pending and later calls with ClientClosedError", async () => {
  const stub = startStub();
  try {
    const client = new ModelClient(stub.url, "Slow");
    await client.waitForModel(5);
    const pending = client.inferSample([ndarray(new Float32Array([1]))]);
    while (!stub.seen.some((s) => s.path.endsWith("/infer"))) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await client.close();
    await assert.rejects(pending, {
      name: "ClientClosedError",
      message: "Cannot infer with model 'Slow': the client was closed",
    });
    await assert.rejects(client.inferBatch([]), ClientClosedError);
    await assert.rejects(client.waitForServer(1), ClientClosedError);
    assert.equal(client.closed, true);
    await client.close();
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient.close() fails the calls waiting in its queue too; they never reach the server", async () => {
  const stub = startStub();
  const inferences = (): number => stub.seen.filter((s) => s.path.endsWith("/infer")).length;
  try {
    const client = new ModelClient(stub.url, "Slow", { maxConcurrency: 1 });
    const running = client.inferSample([ndarray(new Float32Array([1]))]);
    const waiting = client.inferSample([ndarray(new Float32Array([2]))]);
    while (inferences() === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const settled = Promise.allSettled([running, waiting]);
    await client.close();
    for (const result of await settled) {
      assert.equal(result.status, "rejected");
      assert.ok(result.reason instanceof ClientClosedError);
      assert.equal(result.reason.message, "Cannot infer with model 'Slow': the client was closed");
    }
    assert.equal(inferences(), 1);
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient refuses bounds that are not whole numbers", () => {
  assert.throws(() => new ModelClient("localhost:8000", "M", { maxConcurrency: 0 }), {
    name: "ClientValueError",
    message: "Invalid maxConcurrency: expected an integer >= 1 or Infinity, got 0",
  });
  assert.throws(() => new ModelClient("localhost:8000", "M", { maxQueueSize: 1.5 }), {
    name: "ClientValueError",
    message: "Invalid maxQueueSize: expected an integer >= 0 or Infinity, got 1.5",
  });
  new ModelClient("localhost:8000", "M", { maxConcurrency: Infinity, maxQueueSize: 0 });
});

Deno.test("ModelClient with a given config and no readiness check goes straight to infer", async () => {
  const stub = startStub();
  try {
    await using client = new ModelClient(stub.url, "Echo", {
      modelConfig: CONFIGS.Echo as Record<string, unknown>,
      ensureModelIsReady: false,
    });
    await client.inferSample([ndarray(new Float32Array([1]))]);
    assert.deepEqual(stub.seen.map((s) => s.path), ["/v2/models/Echo/infer"]);
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient without readiness checks reports unknown models as unavailable", async () => {
  const stub = startStub();
  try {
    await using client = new ModelClient(stub.url, "Nope", { ensureModelIsReady: false });
    await assert.rejects(client.modelConfig(), {
      name: "ClientModelUnavailableError",
      message: "Cannot get config of model 'Nope': Request for unknown model: 'Nope' (HTTP 404)",
    });
  } finally {
    await stub.close();
  }
});

Deno.test("ModelClient with lazyInit false starts waiting at once", async () => {
  const stub = startStub();
  try {
    await using client = new ModelClient(stub.url, "Echo", { lazyInit: false });
    while (!stub.seen.some((s) => s.path.endsWith("/config"))) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal((await client.modelConfig()).name, "Echo");
    assert.equal(stub.seen.filter((s) => s.path.endsWith("/config")).length, 1);
  } finally {
    await stub.close();
  }
});
