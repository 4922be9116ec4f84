// TritonConfig fields that used to be validated and then ignored: each is honoured on both
// engines, or refused with an error naming it (see TRITON_CONFIG_FIELD_USES).
//
// The Triton core's metrics are process-wide: once a server in this process turned CPU metrics
// on, later Triton-engine servers report them too. So the "off" test comes first.

import assert from "node:assert/strict";
import { type BindOptions, Triton } from "../mod.ts";
import type { InstanceProvider } from "../src/instances/instance.ts";
import { ENGINES, startServer, testInOwnProcess } from "./_helpers.ts";
import { parsePrometheus } from "./_prometheus.ts";

function identity(name: string): BindOptions {
  return {
    modelName: name,
    inferFunc: (requests) => requests.map((request) => ({ y: request.data.x! })),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 4 },
  };
}

/** A model whose only instance fails to start, so loading it fails on either engine. */
function unloadable(name: string): BindOptions {
  const instances: InstanceProvider = {
    count: 1,
    devices: ["cpu"],
    start: () => Promise.reject(new Error("instance start refused on purpose")),
  };
  return { ...identity(name), inferFunc: instances };
}

async function infer(http: string, model: string): Promise<Response> {
  return await fetch(`${http}/v2/models/${model}/infer`, {
    method: "POST",
    body: JSON.stringify({
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }],
    }),
  });
}

async function metricNames(triton: Triton): Promise<Set<string>> {
  const text = await (await fetch(`${triton.urls.metrics}/metrics`)).text();
  return new Set(parsePrometheus(text).samples.map((sample) => sample.name));
}

async function scrape(triton: Triton): Promise<Map<string, number>> {
  const text = await (await fetch(`${triton.urls.metrics}/metrics`)).text();
  return new Map(parsePrometheus(text).samples.map((sample) => [sample.name, sample.value]));
}

function memTotalBytes(): number {
  return Number(/^MemTotal:\s+(\d+)/m.exec(Deno.readTextFileSync("/proc/meminfo"))![1]) * 1024;
}

const linux = Deno.build.os === "linux";

for (const engine of ENGINES) {
  Deno.test({
    name: `allowCpuMetrics is off by default: no nv_cpu_* metrics [${engine}]`,
    async fn(): Promise<void> {
      await using triton = await startServer({ engine, models: [identity("CpuOff")] });
      const names = await metricNames(triton);
      assert.ok(names.has("nv_inference_request_success"));
      assert.equal(names.has("nv_cpu_utilization"), false);
    },
  });
}

for (const engine of ENGINES) {
  Deno.test({
    name: `allowCpuMetrics reports CPU utilization and memory like the core [${engine}]`,
    ignore: !linux,
    async fn(): Promise<void> {
      await using triton = await startServer({
        engine,
        models: [identity("CpuOn")],
        config: { allowCpuMetrics: true, metricsIntervalMs: 100 },
      });
      // The core polls on a thread: wait for its first reading (watchdog: 10 s).
      const deadline = Date.now() + 10_000;
      let values = await scrape(triton);
      while (!(values.get("nv_cpu_memory_total_bytes")! > 0) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        values = await scrape(triton);
      }
      assert.equal(values.get("nv_cpu_memory_total_bytes"), memTotalBytes());
      const used = values.get("nv_cpu_memory_used_bytes")!;
      assert.ok(used > 0 && used <= memTotalBytes(), `used ${used}`);
      const utilization = values.get("nv_cpu_utilization")!;
      assert.ok(utilization >= 0 && utilization <= 1, `utilization ${utilization}`);
    },
  });
}

for (const engine of ENGINES) {
  // The core's metrics configuration is process-wide (the latest server's applies to every
  // later load): on the core, in a process of its own.
  testInOwnProcess({
    ownProcess: engine === "triton",
    name: `metricsConfig counter_latencies=false drops the latency counters [${engine}]`,
    file: import.meta.url,
    fn: async () => {
      await using triton = await startServer({
        engine,
        models: [identity("NoLatencyCounters")],
        config: { metricsConfig: ["counter_latencies=false"] },
      });
      assert.equal((await infer(triton.urls.http!, "NoLatencyCounters")).status, 200);
      const names = await metricNames(triton);
      assert.ok(names.has("nv_inference_request_success"));
      assert.ok(names.has("nv_inference_count"));
      for (const name of names) assert.doesNotMatch(name, /_duration_us$/);
    },
  });
}

Deno.test("the built-in engine refuses metrics, GPU, pinned memory and cache settings it cannot honour", async (t) => {
  const cases: [string, Record<string, unknown>, string][] = [
    [
      "summary_latencies=true",
      { metricsConfig: ["summary_latencies=true"] },
      "Cannot start the built-in engine: metricsConfig entry 'summary_latencies=true' is not supported: the built-in engine reports latency counters only (counter_latencies=<bool>)",
    ],
    [
      "allowGpuMetrics",
      { allowGpuMetrics: true },
      "Cannot start the built-in engine: allowGpuMetrics is not supported: the built-in engine has no GPU metrics",
    ],
    [
      "pinnedMemoryPoolByteSize",
      { pinnedMemoryPoolByteSize: 1 << 20 },
      "Cannot start the built-in engine: pinnedMemoryPoolByteSize is not supported: the built-in engine copies no tensors to or from GPUs (set 0 or leave it unset)",
    ],
    [
      "a redis cache",
      { cacheConfig: ["redis,host=localhost"] },
      "Cannot start the built-in engine: cacheConfig cache 'redis' is not supported: the built-in engine has only the local cache",
    ],
  ];
  for (const [name, config, message] of cases) {
    await t.step(name, async () => {
      await assert.rejects(startServer({ engine: "builtin", config }), {
        name: "TritonValidationError",
        message,
      });
    });
  }
});

if (ENGINES.includes("triton")) {
  testInOwnProcess({
    name: "the Triton engine hands summaries, GPU metrics and the pinned pool to the core",
    file: import.meta.url,
    fn: async () => {
      await using triton = await startServer({
        engine: "triton",
        models: [identity("Summaries")],
        config: {
          metricsConfig: ["summary_latencies=true", "summary_quantiles=0.5:0.05"],
          // The core only warns when the host has no GPU, for both.
          allowGpuMetrics: true,
          pinnedMemoryPoolByteSize: 1 << 20,
        },
      });
      assert.equal((await infer(triton.urls.http!, "Summaries")).status, 200);
      const text = await (await fetch(`${triton.urls.metrics}/metrics`)).text();
      assert.match(
        text,
        /^nv_inference_request_summary_us_count\{model="Summaries",version="1"\} 1$/m,
      );
      assert.match(
        text,
        /^nv_inference_request_summary_us\{model="Summaries",version="1",quantile="0.5"\} /m,
      );
    },
  });
}

for (const engine of ENGINES) {
  Deno.test(`exitOnError: a model that fails to load fails run(), unless exitOnError is false [${engine}]`, async () => {
    await assert.rejects(
      startServer({ engine, models: [identity("Good"), unloadable("Broken")] }),
      /instance start refused on purpose/,
    );
    await using triton = await startServer({
      engine,
      models: [identity("Good"), unloadable("Broken")],
      config: { exitOnError: false },
    });
    const http = triton.urls.http!;
    assert.equal((await infer(http, "Good")).status, 200);
    assert.equal((await fetch(`${http}/v2/models/Good/ready`)).status, 200);
    const broken = await infer(http, "Broken");
    assert.notEqual(broken.status, 200);
    await broken.body?.cancel();
    assert.notEqual((await fetch(`${http}/v2/models/Broken/ready`)).status, 200);
  });
}

Deno.test("bind() refuses responseCache on a server without a response cache", () => {
  const triton = new Triton({ engine: "builtin", config: { httpPort: 0 } });
  assert.throws(
    () => triton.bind({ ...identity("Cached"), config: { maxBatchSize: 4, responseCache: true } }),
    {
      name: "TritonBadParameterError",
      message:
        "Cannot bind model 'Cached': responseCache is on but the server has no response cache (set responseCacheByteSize or a cacheConfig entry)",
    },
  );
  const cached = new Triton({
    engine: "builtin",
    config: { httpPort: 0, responseCacheByteSize: 1 << 20 },
  });
  cached.bind({ ...identity("Cached"), config: { maxBatchSize: 4, responseCache: true } });
});

Deno.test("Triton refuses config fields it cannot honour when it is created", () => {
  // traceConfig is honoured (issue 36); an entry it cannot honour is refused, naming it.
  for (
    const [entry, why] of [
      ["rate=0", "expected a value in [1, 4294967295]"],
      ["level=LOUD", "expected OFF, TIMESTAMPS or TENSORS"],
      [
        "triton,file=/no/such/directory/trace.json",
        "directory '/no/such/directory' does not exist",
      ],
    ]
  ) {
    assert.throws(() => new Triton({ config: { traceConfig: [entry!] } }), {
      name: "TritonValidationError",
      message: `Invalid traceConfig entry '${entry}': ${why}`,
    });
  }
  assert.throws(
    () => new Triton({ config: { grpcInferResponseCompressionLevel: "low" } }),
    /grpcInferResponseCompressionLevel is not supported: the gRPC front end does not compress responses \(got "low"\)$/,
  );
});
