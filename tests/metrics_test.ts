// Metrics, statistics and the response cache on both engines: after known traffic, the parsed
// Prometheus text on the metrics port and the statistics endpoint hold the expected counts with
// Triton's names and labels; cache hits skip the callable over HTTP and gRPC alike (and gRPC
// statistics agree); both caches evict the least recently used response within their budget.

import assert from "node:assert/strict";
import type { BindOptions, InferRequest } from "../mod.ts";
import { codecs } from "../src/protocol/grpc_codec.ts";
import { ENGINES, startServer, testInOwnProcess } from "./_helpers.ts";
import { FAILING_MESSAGE, failingModel } from "./_models.ts";
import { type Exposition, scrape } from "./_prometheus.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";

const SLEEP_MS = 20;

function countingModel(name: string, seen: number[], responseCache: boolean): BindOptions {
  return {
    modelName: name,
    inferFunc: async (requests: InferRequest[]) => {
      for (const r of requests) seen.push((r.data.x!.data as Float32Array)[0]!);
      // A lower bound on compute time the durations must show.
      await new Promise((resolve) => setTimeout(resolve, SLEEP_MS));
      return requests.map((r) => ({ y: r.data.x! }));
    },
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 4, responseCache },
  };
}

async function infer(
  httpUrl: string,
  model: string,
  values: number[],
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${httpUrl}/v2/models/${model}/infer`, {
    method: "POST",
    body: JSON.stringify({
      inputs: [{ name: "x", datatype: "FP32", shape: [1, values.length], data: values }],
    }),
  });
  return { status: response.status, body: await response.json() };
}

/** Sum of the samples of a metric with a model's labels (Triton splits failures by reason). */
function metric(exposition: Exposition, name: string, model: string): number {
  const samples = exposition.samples.filter((s) =>
    s.name === name && s.labels.model === model && s.labels.version === "1"
  );
  assert.ok(samples.length > 0, `no ${name} sample for model ${model}`);
  return samples.reduce((sum, s) => sum + s.value, 0);
}

for (const engine of ENGINES) {
  // The core keeps one response cache per process, taken until no core server is left in the
  // process: on the core, a test that needs it runs in a process of its own.
  testInOwnProcess({
    ownProcess: engine === "triton",
    name: `metrics (${engine}): Prometheus text and statistics after known traffic`,
    file: import.meta.url,
    fn: async () => {
      const plain: number[] = [];
      const cached: number[] = [];
      await using triton = await startServer({
        engine,
        models: [
          countingModel("Plain", plain, false),
          countingModel("Cached", cached, true),
          // The core's Prometheus registry is process-wide and keeps series of unloaded models, so
          // the failing model needs a name no other test in this process uses.
          failingModel("MetricsFailing"),
        ],
        config: { responseCacheByteSize: 1 << 20 },
      });
      const http = triton.urls.http!;
      for (const value of [1, 2, 3]) {
        assert.equal((await infer(http, "Plain", [value])).status, 200);
      }
      for (let i = 0; i < 2; i++) {
        const { status, body } = await infer(http, "Cached", [7, 8]);
        assert.equal(status, 200);
        assert.deepEqual((body.outputs as { data: number[] }[])[0]!.data, [7, 8]);
      }
      // The cache serves every protocol: the same request over gRPC is a hit too.
      using grpcClient = new TestGrpcClient(triton.urls.grpc!);
      const viaGrpc = await grpcClient.call(
        "ModelInfer",
        codecs.ModelInferRequest,
        codecs.ModelInferResponse,
        {
          model_name: "Cached",
          inputs: [{
            name: "x",
            datatype: "FP32",
            shape: [1, 2],
            contents: { fp32_contents: [7, 8] },
          }],
        },
      );
      const raw = viaGrpc.raw_output_contents![0]!;
      assert.deepEqual([...new Float32Array(raw.slice().buffer)], [7, 8]);
      const failed = await infer(http, "MetricsFailing", [1]);
      assert.equal(failed.status, 500);
      assert.match(String(failed.body.error), new RegExp(FAILING_MESSAGE));
      assert.deepEqual(plain, [1, 2, 3]);
      assert.deepEqual(cached, [7], "cache hits must not call the model");

      const text = await (await fetch(`${triton.urls.metrics}/metrics`)).text();
      assert.match(text, /^# HELP nv_inference_request_success /m);
      assert.match(text, /^# TYPE nv_inference_request_success counter$/m);
      const m = await scrape(triton.urls.metrics!);
      assert.equal(m.types.get("nv_inference_request_duration_us"), "counter");
      assert.equal(metric(m, "nv_inference_request_success", "Plain"), 3);
      assert.equal(metric(m, "nv_inference_request_failure", "Plain"), 0);
      assert.equal(metric(m, "nv_inference_request_failure", "MetricsFailing"), 1);
      assert.equal(metric(m, "nv_inference_request_success", "MetricsFailing"), 0);
      assert.equal(metric(m, "nv_inference_count", "Plain"), 3);
      assert.equal(metric(m, "nv_inference_exec_count", "Plain"), 3);
      const duration = metric(m, "nv_inference_request_duration_us", "Plain");
      const queue = metric(m, "nv_inference_queue_duration_us", "Plain");
      const input = metric(m, "nv_inference_compute_input_duration_us", "Plain");
      const computeInfer = metric(m, "nv_inference_compute_infer_duration_us", "Plain");
      const output = metric(m, "nv_inference_compute_output_duration_us", "Plain");
      assert.ok(computeInfer >= 3 * (SLEEP_MS - 2) * 1000, `compute_infer ${computeInfer} us`);
      assert.ok(queue >= 0 && input >= 0 && output >= 0);
      assert.ok(duration >= computeInfer, `request ${duration} us < compute ${computeInfer} us`);
      // Cached: one execution; hits count as successes but not as inferences.
      assert.equal(metric(m, "nv_inference_request_success", "Cached"), 3);
      assert.equal(metric(m, "nv_inference_count", "Cached"), 1);
      assert.equal(metric(m, "nv_inference_exec_count", "Cached"), 1);
      assert.equal(metric(m, "nv_cache_num_hits_per_model", "Cached"), 2);
      assert.equal(metric(m, "nv_cache_num_misses_per_model", "Cached"), 1);

      const stats = await (await fetch(`${http}/v2/models/stats`)).json();
      const byName = new Map(
        (stats.model_stats as { name: string; version: string }[]).map((s) => [s.name, s]),
      );
      // deno-lint-ignore no-explicit-any
      const p = byName.get("Plain") as any;
      assert.equal(p.version, "1");
      assert.equal(p.inference_count, 3);
      assert.equal(p.execution_count, 3);
      assert.ok(p.last_inference > 0);
      for (const key of ["success", "queue", "compute_input", "compute_infer", "compute_output"]) {
        assert.equal(p.inference_stats[key].count, 3, key);
      }
      assert.ok(p.inference_stats.compute_infer.ns >= 3 * (SLEEP_MS - 2) * 1e6);
      assert.equal(p.inference_stats.fail.count, 0);
      assert.equal(p.inference_stats.cache_hit.count, 0);
      assert.equal(p.batch_stats.length, 1);
      assert.equal(p.batch_stats[0].batch_size, 1);
      assert.equal(p.batch_stats[0].compute_infer.count, 3);
      // deno-lint-ignore no-explicit-any
      const c = byName.get("Cached") as any;
      assert.equal(c.inference_stats.success.count, 3);
      assert.equal(c.inference_stats.cache_hit.count, 2);
      assert.equal(c.inference_stats.cache_miss.count, 1);
      assert.equal(c.execution_count, 1);
      const grpcStats = await grpcClient.call(
        "ModelStatistics",
        codecs.ModelRef,
        codecs.ModelStatisticsResponse,
        { name: "Cached" },
      );
      // Decoded 64-bit counts are decimal strings.
      // deno-lint-ignore no-explicit-any
      const grpcCached = grpcStats.model_stats[0] as any;
      const { cache_hit: hit, cache_miss: miss, success } = grpcCached.inference_stats;
      assert.deepEqual([hit.count, miss.count, success.count], ["2", "1", "3"]);
      // deno-lint-ignore no-explicit-any
      const f = byName.get("MetricsFailing") as any;
      assert.equal(f.inference_stats.fail.count, 1);
      assert.equal(f.inference_stats.success.count, 0);
    },
  });

  Deno.test(`metrics (${engine}): a model without responseCache has no cache metrics`, async () => {
    const seen: number[] = [];
    await using triton = await startServer({
      engine,
      models: [countingModel("Plain", seen, false)],
    });
    for (let i = 0; i < 2; i++) {
      assert.equal((await infer(triton.urls.http!, "Plain", [5])).status, 200);
    }
    assert.deepEqual(seen, [5, 5]);
    const m = await scrape(triton.urls.metrics!);
    assert.equal(
      m.samples.filter((s) =>
        s.name === "nv_cache_num_hits_per_model" && s.labels.model === "Plain"
      )
        .length,
      0,
    );
  });

  Deno.test(`cache (${engine}): refused for decoupled models`, async () => {
    await assert.rejects(
      startServer({
        engine,
        models: [{
          ...countingModel("Stream", [], true),
          config: { responseCache: true, decoupled: true },
        }],
      }),
      { message: "Invalid model config: responseCache cannot be enabled for a decoupled model" },
    );
  });
}

// Budgets in which two of the test's responses fit and three do not. The built-in cache counts
// each entry's key (the 1 KiB input) and its 1 KiB output. The core's local cache keys on a hash
// and counts its allocator's overhead: two entries fit in 2400-3400 bytes there (measured with
// Triton 2.51), so the middle of that range is used.
const TWO_ENTRY_BUDGET: Record<string, number> = { builtin: 5000, triton: 2900 };

for (const engine of ENGINES) {
  testInOwnProcess({
    ownProcess: engine === "triton",
    name: `cache (${engine}): least recently used responses are evicted within the budget`,
    file: import.meta.url,
    fn: async () => {
      const seen: number[] = [];
      await using triton = await startServer({
        engine,
        models: [countingModel("Cached", seen, true)],
        config: { responseCacheByteSize: TWO_ENTRY_BUDGET[engine]! },
      });
      const http = triton.urls.http!;
      const tensor = (first: number): number[] => [first, ...new Array(255).fill(0)];
      for (const first of [1, 2, 1, 3, 1, 2]) {
        const { status, body } = await infer(http, "Cached", tensor(first));
        assert.equal(status, 200);
        assert.equal((body.outputs as { data: number[] }[])[0]!.data[0], first);
      }
      // 1 miss, 2 miss, 1 hit, 3 miss (evicts 2, the least recently used), 1 hit, 2 miss.
      assert.deepEqual(seen, [1, 2, 3, 2]);
      const m = await scrape(triton.urls.metrics!);
      assert.equal(metric(m, "nv_cache_num_hits_per_model", "Cached"), 2);
      assert.equal(metric(m, "nv_cache_num_misses_per_model", "Cached"), 4);
    },
  });
}
