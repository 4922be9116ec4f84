import assert from "node:assert/strict";
import { ENGINES } from "./_helpers.ts";
import { IDENTITY, startHttpServer, type TestModel } from "./_http_server.ts";
import { SharedMemoryRegistry } from "../src/shm/registry.ts";
import type { InferRequest } from "../src/callable/types.ts";

const ADD: TestModel = {
  name: "Add",
  version: 2,
  fn: (requests: InferRequest[]) => requests.map((request) => ({ y: request.data.x! })),
  inputs: [{ name: "x", dtype: "float32", shape: [3] }],
  outputs: [{ name: "y", dtype: "float32", shape: [3] }],
  config: { maxBatchSize: 4 },
};

async function get(url: string, init: RequestInit = {}): Promise<Response> {
  return await fetch(url, init);
}

async function expectEmpty(response: Response, status: number): Promise<void> {
  assert.equal(response.status, status);
  assert.equal(await response.text(), "");
}

async function expectJson(response: Response, status: number): Promise<unknown> {
  assert.equal(response.status, status);
  assert.equal(response.headers.get("content-type"), "application/json");
  return await response.json();
}

for (const engine of ENGINES) {
  Deno.test(`HTTP health, server metadata, model metadata, readiness and config [${engine}]`, async (t) => {
    // Serving system shared-memory regions, as a Triton server does (none are registered).
    await using server = await startHttpServer(engine, [IDENTITY, ADD], {
      sharedMemory: new SharedMemoryRegistry(),
    });
    const base = server.url;
    await t.step("health", async () => {
      await expectEmpty(await get(`${base}/v2/health/live`), 200);
      await expectEmpty(await get(`${base}/v2/health/ready`), 200);
    });
    await t.step("server metadata", async () => {
      const body = await expectJson(await get(`${base}/v2`), 200) as Record<string, unknown>;
      assert.deepEqual(body, {
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
      assert.equal(typeof body.name, "string");
    });
    await t.step("model metadata", async () => {
      const expected = {
        name: "Add",
        versions: ["2"],
        platform: "denotriton",
        inputs: [{ name: "x", datatype: "FP32", shape: [-1, 3] }],
        outputs: [{ name: "y", datatype: "FP32", shape: [-1, 3] }],
      };
      assert.deepEqual(await expectJson(await get(`${base}/v2/models/Add`), 200), expected);
      assert.deepEqual(
        await expectJson(await get(`${base}/v2/models/Add/versions/2`), 200),
        expected,
      );
      const missing = await expectJson(await get(`${base}/v2/models/Add/versions/3`), 404);
      assert.match((missing as { error: string }).error, /Add/);
      const unknown = await expectJson(await get(`${base}/v2/models/Nope`), 404);
      assert.match((unknown as { error: string }).error, /Nope/);
    });
    await t.step("model readiness", async () => {
      await expectEmpty(await get(`${base}/v2/models/Add/ready`), 200);
      await expectEmpty(await get(`${base}/v2/models/Add/versions/2/ready`), 200);
      for (const path of ["/v2/models/Add/versions/1/ready", "/v2/models/Nope/ready"]) {
        assert.deepEqual(await expectJson(await get(`${base}${path}`), 400), {
          error: "Model version not ready",
        });
      }
    });
    await t.step("model config", async () => {
      const config = await expectJson(await get(`${base}/v2/models/Add/config`), 200) as Record<
        string,
        unknown
      >;
      assert.deepEqual(config, await server.engine.modelConfig("Add"));
      assert.equal(config.name, "Add");
      assert.equal(config.max_batch_size, 4);
      assert.deepEqual(
        await expectJson(await get(`${base}/v2/models/Add/versions/2/config`), 200),
        config,
      );
      await expectJson(await get(`${base}/v2/models/Nope/config`), 404);
    });
    await t.step("HEAD works like GET without a body", async () => {
      const response = await get(`${base}/v2/health/ready`, { method: "HEAD" });
      assert.equal(response.status, 200);
      await response.body?.cancel();
    });
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP statistics for all models, one model and one version [${engine}]`, async () => {
    await using server = await startHttpServer(engine, [IDENTITY, ADD]);
    const infer = await fetch(`${server.url}/v2/models/Add/infer`, {
      method: "POST",
      body: JSON.stringify({
        inputs: [{ name: "x", datatype: "FP32", shape: [2, 3], data: [1, 2, 3, 4, 5, 6] }],
      }),
    });
    assert.equal(infer.status, 200);
    await infer.body?.cancel();
    type Stats = { model_stats: { name: string; version: string; inference_count: number }[] };
    const all = await expectJson(await get(`${server.url}/v2/models/stats`), 200) as Stats;
    assert.deepEqual(all.model_stats.map((s) => s.name).sort(), ["Add", "Identity"]);
    const one = await expectJson(await get(`${server.url}/v2/models/Add/stats`), 200) as Stats;
    assert.equal(one.model_stats.length, 1);
    assert.equal(one.model_stats[0]!.version, "2");
    assert.equal(one.model_stats[0]!.inference_count, 2);
    assert.deepEqual(one, await server.engine.modelStatistics("Add"));
    const version = await expectJson(
      await get(`${server.url}/v2/models/Add/versions/2/stats`),
      200,
    );
    assert.deepEqual(version, one);
    // Triton answers unknown models here with INVALID_ARG (400), unlike metadata (404).
    assert.deepEqual(await expectJson(await get(`${server.url}/v2/models/Nope/stats`), 400), {
      error: "requested model 'Nope' is not available",
    });
    assert.deepEqual(
      await expectJson(await get(`${server.url}/v2/models/Add/versions/3/stats`), 400),
      { error: "requested model version is not available for model 'Add'" },
    );
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP repository index, load and unload [${engine}]`, async (t) => {
    await using server = await startHttpServer(engine, [IDENTITY, ADD]);
    const post = (path: string, body?: string): Promise<Response> =>
      fetch(`${server.url}${path}`, { method: "POST", ...(body === undefined ? {} : { body }) });
    await t.step("index", async () => {
      const index = await expectJson(await post("/v2/repository/index"), 200);
      assert.deepEqual(index, await server.engine.repositoryIndex(false));
      assert.deepEqual((index as { name: string }[]).map((entry) => entry.name).sort(), [
        "Add",
        "Identity",
      ]);
      const ready = await expectJson(await post("/v2/repository/index", '{"ready":true}'), 200);
      assert.deepEqual(ready, await server.engine.repositoryIndex(true));
      // Triton ignores a repository name on the index.
      assert.deepEqual(await expectJson(await post("/v2/repository/models/index"), 200), index);
      const bad = await expectJson(await post("/v2/repository/index", '{"ready":"yes"}'), 400);
      assert.match((bad as { error: string }).error, /'ready'.*expected a boolean/);
      const broken = await expectJson(await post("/v2/repository/index", "{"), 400);
      assert.match((broken as { error: string }).error, /Unable to parse the request JSON/);
    });
    await t.step("load", async () => {
      await expectEmpty(await post("/v2/repository/models/Add/load"), 200);
      const unknown = await expectJson(await post("/v2/repository/models/Nope/load"), 404);
      assert.deepEqual(unknown, {
        error: "failed to load 'Nope', failed to poll from model repository",
      });
      const config = await expectJson(
        await post("/v2/repository/models/Add/load", '{"parameters":{"config":"{}"}}'),
        501,
      );
      assert.match(
        (config as { error: string }).error,
        /Cannot load model 'Add' with a new configuration/,
      );
    });
    await t.step("unload", async () => {
      // A bare engine's repository is what it loaded (tests/repository_test.ts: bound models).
      await expectEmpty(await post("/v2/repository/models/Nope/unload"), 200);
      await expectEmpty(await post("/v2/repository/models/Add/unload"), 200);
      assert.deepEqual(await expectJson(await get(`${server.url}/v2/models/Add/ready`), 400), {
        error: "Model version not ready",
      });
      assert.deepEqual(await expectJson(await post("/v2/repository/index"), 200), [
        { name: "Add", version: "2", state: "UNAVAILABLE", reason: "unloaded" },
        { name: "Identity", version: "1", state: "READY" },
      ]);
    });
    await t.step("a repository name in load/unload paths", async () => {
      for (const action of ["load", "unload"]) {
        assert.deepEqual(
          await expectJson(await post(`/v2/repository/repo/models/Add/${action}`), 501),
          {
            error: "'repository_name' specification is not supported",
          },
        );
      }
    });
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP shared memory, trace and logging answers [${engine}]`, async (t) => {
    await using server = await startHttpServer(engine, [IDENTITY]);
    const base = server.url;
    const post = (path: string, body?: unknown): Promise<Response> =>
      fetch(`${base}${path}`, {
        method: "POST",
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    await t.step("shared memory", async () => {
      // This front end has no shared-memory registry (the facade gives it one:
      // tests/shared_memory_test.ts), so registering is refused, and there is nothing to list.
      for (const [kind, name] of [["systemsharedmemory", "system"], ["cudasharedmemory", "cuda"]]) {
        assert.deepEqual(await expectJson(await get(`${base}/v2/${kind}/status`), 200), []);
        const region = await expectJson(await get(`${base}/v2/${kind}/region/r1/status`), 404);
        assert.deepEqual(region, { error: `Unable to find ${name} shared memory region: 'r1'` });
        await expectEmpty(await post(`/v2/${kind}/unregister`), 200);
        await expectEmpty(await post(`/v2/${kind}/region/r1/unregister`), 200);
      }
      for (const [kind, name] of [["systemsharedmemory", "System"], ["cudasharedmemory", "CUDA"]]) {
        const register = await expectJson(
          await post(`/v2/${kind}/region/r1/register`, { key: "/k", offset: 0, byte_size: 8 }),
          501,
        );
        assert.deepEqual(register, {
          error:
            `${name} shared memory is not supported by this server: send tensors in the request body`,
        });
      }
    });
    await t.step("trace", async () => {
      const settings = {
        trace_level: ["OFF"],
        trace_rate: "1000",
        trace_count: "-1",
        log_frequency: "0",
        trace_file: "",
        trace_mode: "triton",
      };
      assert.deepEqual(await expectJson(await get(`${base}/v2/trace/setting`), 200), settings);
      assert.deepEqual(
        await expectJson(await get(`${base}/v2/models/Identity/trace/setting`), 200),
        settings,
      );
      // A front end on a bare engine has no tracer: it reads the defaults and refuses a change,
      // saying why (a server's tracing: tests/trace_test.ts). An empty change reads.
      assert.deepEqual(await expectJson(await post("/v2/trace/setting", {}), 200), settings);
      const on = await expectJson(
        await post("/v2/trace/setting", { trace_level: ["TIMESTAMPS"] }),
        501,
      );
      assert.equal(
        (on as { error: string }).error,
        "Cannot change trace settings: this front end has no tracer (give the engine and the front end the same Tracer)",
      );
    });
    await t.step("logging", async () => {
      const initial = {
        log_file: "/dev/null", // the test server's logger writes there
        log_info: true,
        log_warning: true,
        log_error: true,
        log_verbose_level: 0,
        log_format: "default",
      };
      assert.deepEqual(await expectJson(await get(`${base}/v2/logging`), 200), initial);
      const updated = await expectJson(
        await post("/v2/logging", { log_verbose_level: 2, log_info: false, log_format: "ISO8601" }),
        200,
      );
      assert.deepEqual(updated, {
        ...initial,
        log_verbose_level: 2,
        log_info: false,
        log_format: "ISO8601",
      });
      assert.deepEqual(await expectJson(await get(`${base}/v2/logging`), 200), updated);
      await expectJson(await post("/v2/logging", { log_verbose_level: 0 }), 200);
      const file = await expectJson(await post("/v2/logging", { log_file: "/tmp/x.log" }), 501);
      assert.match((file as { error: string }).error, /Cannot change 'log_file' over the network/);
      const format = await expectJson(await post("/v2/logging", { log_format: "xml" }), 400);
      assert.match((format as { error: string }).error, /Invalid 'log_format' "xml"/);
      const level = await expectJson(await post("/v2/logging", { log_verbose_level: -1 }), 400);
      assert.match((level as { error: string }).error, /log_verbose_level/);
    });
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP access check sees each request's endpoint group and can refuse it [${engine}]`, async () => {
    const seen: string[] = [];
    await using server = await startHttpServer(engine, [IDENTITY], {
      accessCheck: (request, group) => {
        seen.push(group);
        return request.headers.get("triton-access-token") === "secret" || group === "health"
          ? undefined
          : Response.json({ error: "This API is restricted" }, { status: 401 });
      },
    });
    await expectEmpty(await get(`${server.url}/v2/health/live`), 200);
    const refused = await get(`${server.url}/v2/models/stats`);
    assert.equal(refused.status, 401);
    await refused.body?.cancel();
    const allowed = await get(`${server.url}/v2/models/stats`, {
      headers: { "triton-access-token": "secret" },
    });
    assert.equal(allowed.status, 200);
    await allowed.body?.cancel();
    assert.deepEqual(seen, ["health", "statistics", "statistics"]);
  });
}

for (const engine of ENGINES) {
  Deno.test(`HttpFrontend reports its URL and shuts down idempotently [${engine}]`, async () => {
    const server = await startHttpServer(engine, [IDENTITY]);
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    await server[Symbol.asyncDispose]();
    await assert.rejects(fetch(`${server.url}/v2/health/live`));
  });
}
