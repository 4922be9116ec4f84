import assert from "node:assert/strict";
import type { InferRequest, InferResult } from "../../callable/types.ts";
import { InferenceError, TritonUnrecoverableError } from "../../errors.ts";
import { ndarray } from "../../tensor/ndarray.ts";
import type { InferenceRequest, StreamResponse } from "../engine.ts";
import { BuiltinEngine } from "./engine.ts";
import { define, echo, requestOf, tick, values } from "./_test_utils.ts";

function isError(code: string, message: string | RegExp): (error: unknown) => boolean {
  return (error: unknown) => {
    assert.ok(error instanceof InferenceError, `not an InferenceError: ${error}`);
    assert.equal(error.code, code);
    if (typeof message === "string") assert.equal(error.message, message);
    else assert.match(error.message, message);
    return true;
  };
}

Deno.test("BuiltinEngine answers server and model metadata like Triton", async () => {
  await using engine = new BuiltinEngine({ id: "srv" });
  await engine.loadModel(define([echo], { config: { maxBatchSize: 4 } }));
  await engine.loadModel(define([echo], { version: 2, config: { maxBatchSize: 4 } }));
  assert.deepEqual(engine.serverMetadata(), {
    name: "srv",
    version: "2.51.0",
    extensions: [
      "binary_tensor_data",
      "parameters",
      "statistics",
      "model_configuration",
      "model_repository",
      "schedule_policy",
    ],
  });
  assert.deepEqual(await engine.modelMetadata("m"), {
    name: "m",
    versions: ["1", "2"],
    platform: "denotriton",
    inputs: [{ name: "x", datatype: "FP32", shape: [-1, -1] }],
    outputs: [{ name: "y", datatype: "FP32", shape: [-1, -1] }],
  });
  assert.deepEqual((await engine.modelMetadata("m", 1)).versions, ["1"]);
  const config = await engine.modelConfig("m");
  assert.equal(config.max_batch_size, 4);
  assert.deepEqual(config.dynamic_batching, {
    preferred_batch_size: [4],
    max_queue_delay_microseconds: 0,
    preserve_ordering: false,
    priority_levels: 0,
    default_priority_level: 0,
    priority_queue_policy: {},
  });
  // As the Triton core prints it: unset message fields are absent, the version is served as bound.
  assert.deepEqual(config.version_policy, { specific: { versions: [2] } });
  assert.equal(config.model_transaction_policy, undefined);
  assert.equal(config.response_cache, undefined);
  const response = await engine.infer(requestOf([5]));
  assert.equal(response.modelVersion, "2");
  assert.equal(response.id, undefined);
  assert.equal(engine.model("m").decoupled, false);
});

Deno.test("BuiltinEngine metadata of a non-batching model has no batch dimension", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([echo], { config: { batching: false } }));
  const metadata = await engine.modelMetadata("m");
  assert.deepEqual(metadata.inputs, [{ name: "x", datatype: "FP32", shape: [-1] }]);
  const config = await engine.modelConfig("m");
  assert.equal(config.max_batch_size, 0);
  assert.equal(config.dynamic_batching, undefined);
});

Deno.test("BuiltinEngine reports unknown models and versions with Triton's messages", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([echo]));
  await assert.rejects(
    engine.infer({ ...requestOf([1]), modelName: "nope" }),
    isError("NOT_FOUND", "Request for unknown model: 'nope' is not found"),
  );
  await assert.rejects(
    engine.infer(requestOf([1], undefined, { modelVersion: 3 })),
    isError("NOT_FOUND", "Request for unknown model: 'm' version 3 is not found"),
  );
  assert.throws(() => engine.modelMetadata("nope"), isError("NOT_FOUND", /'nope' is not found/));
  assert.throws(() => engine.modelConfig("m", 3), isError("NOT_FOUND", /version 3/));
  assert.throws(
    () => engine.modelStatistics("nope"),
    isError("INVALID_ARG", "requested model 'nope' is not available"),
  );
  assert.throws(
    () => engine.modelStatistics("m", 3),
    isError("INVALID_ARG", "requested model version is not available for model 'm'"),
  );
  assert.throws(() => engine.model("nope"), isError("NOT_FOUND", /'nope'/));
  assert.equal(engine.modelReady("nope"), false);
  assert.equal(engine.modelReady("m", 2), false);
  assert.equal(await engine.modelReady("m", 1), true);
});

Deno.test("BuiltinEngine refuses a duplicate model version", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([echo]));
  await assert.rejects(
    engine.loadModel(define([echo])),
    isError("ALREADY_EXISTS", "Cannot load model 'm': version 1 is loaded already"),
  );
});

Deno.test("BuiltinEngine unloads models and lists them in the repository index", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([echo]));
  await engine.loadModel(define([echo], { name: "other" }));
  await engine.unloadModel("other");
  assert.deepEqual(await engine.repositoryIndex(false), [
    { name: "m", version: "1", state: "READY" },
    { name: "other", version: "1", state: "UNAVAILABLE", reason: "unloaded" },
  ]);
  assert.deepEqual(await engine.repositoryIndex(true), [
    { name: "m", version: "1", state: "READY" },
  ]);
  assert.equal(await engine.modelReady("other"), false);
  assert.equal(await engine.isReady(), true);
  await assert.rejects(
    engine.infer({ ...requestOf([1]), modelName: "other" }),
    isError("UNAVAILABLE", "Request for unknown model: 'other' has no available versions"),
  );
  // An unloaded version can be loaded again.
  await engine.loadModel(define([echo], { name: "other" }));
  assert.equal(await engine.modelReady("other"), true);
  await assert.rejects(engine.unloadModel("nope"), isError("NOT_FOUND", /'nope' is not found/));
});

Deno.test("BuiltinEngine is not ready while a model is loading (strict readiness)", async () => {
  const gate = Promise.withResolvers<void>();
  await using engine = new BuiltinEngine();
  const model = define([echo]);
  const loading = engine.loadModel({
    ...model,
    instances: {
      count: 1,
      devices: ["cpu"],
      start: async (info) => {
        await gate.promise;
        return model.instances.start(info);
      },
    },
  });
  assert.equal(await engine.isReady(), false);
  gate.resolve();
  await loading;
  assert.equal(await engine.isReady(), true);
  assert.equal(engine.isLive(), true);
});

Deno.test("BuiltinEngine replaces a model: the old one serves until the new one is ready", async () => {
  const gate = Promise.withResolvers<void>();
  await using engine = new BuiltinEngine();
  const times = (factor: number) => (requests: InferRequest[]): InferResult[] =>
    requests.map((request) => ({
      y: ndarray((request.data.x!.data as Float32Array).map((v) => v * factor), [1, 1]),
    }));
  await engine.loadModel(define([times(2)]));
  const next = define([times(3)], { version: 2 });
  const replacing = engine.loadModel({
    ...next,
    instances: {
      count: 1,
      devices: ["cpu"],
      start: async (info) => {
        await gate.promise;
        return next.instances.start(info);
      },
    },
  }, { replace: true });
  await tick();
  // Loading: version 1 answers and is the only one listed; no other load of the name meanwhile.
  assert.deepEqual(values((await engine.infer(requestOf([1]))).outputs.get("y")), [2]);
  assert.deepEqual(engine.repositoryIndex(false), [{ name: "m", version: "1", state: "READY" }]);
  assert.equal(engine.isReady(), true);
  await assert.rejects(
    engine.loadModel(define([echo], { version: 3 })),
    isError("ALREADY_EXISTS", "Cannot load model 'm': it is being replaced"),
  );
  gate.resolve();
  await replacing;
  const response = await engine.infer(requestOf([1]));
  assert.equal(response.modelVersion, "2");
  assert.deepEqual(values(response.outputs.get("y")), [3]);
  assert.throws(
    () => engine.model("m", 1),
    isError("NOT_FOUND", "Request for unknown model: 'm' version 1 is not found"),
  );
  assert.deepEqual(engine.repositoryIndex(false), [{ name: "m", version: "2", state: "READY" }]);
});

Deno.test("BuiltinEngine validates requests before queueing them", async () => {
  let calls = 0;
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([(requests: InferRequest[]) => {
    calls += 1;
    return requests.map(() => ({ y: ndarray(new Float32Array([0]), [1, 1]) }));
  }], {
    inputs: [
      { name: "a", dtype: "float32", shape: [2] },
      { name: "b", dtype: "int32", shape: [-1], optional: true },
    ],
    config: { maxBatchSize: 2 },
  }));
  const req = (
    inputs: [string, ReturnType<typeof ndarray>][],
    outputs?: string[],
  ): InferenceRequest => ({
    modelName: "m",
    parameters: {},
    inputs: new Map(inputs),
    ...(outputs === undefined ? {} : { outputs }),
  });
  const a = ndarray(new Float32Array([1, 2]), [1, 2]);
  const cases: [InferenceRequest, RegExp][] = [
    [req([["a", a], ["c", a]]), /^Invalid request for model 'm': unexpected input 'c'/],
    [req([["b", ndarray(new Int32Array([1]), [1, 1])]]), /missing required input 'a'/],
    [
      req([["a", ndarray(new Float64Array([1, 2]), [1, 2])]]),
      /unexpected datatype FP64 for input 'a', expecting FP32/,
    ],
    [
      req([["a", ndarray(new Float32Array(3), [1, 3])]]),
      /unexpected shape for input 'a': expected \[-1,2\], got \[1,3\]/,
    ],
    [req([["a", ndarray(new Float32Array(2), [2])]]), /unexpected shape for input 'a'/],
    [
      req([["a", ndarray(new Float32Array(6), [3, 2])]]),
      /batch size 3 of input 'a' must be within \[1, 2\]/,
    ],
    [req([["a", ndarray(new Float32Array(0), [0, 2])]]), /batch size 0 of input 'a'/],
    [
      req([["a", ndarray(new Float32Array(4), [2, 2])], [
        "b",
        ndarray(new Int32Array([1]), [1, 1]),
      ]]),
      /inputs 'a' and 'b' have different batch sizes \(2 and 1\)/,
    ],
    [req([["a", a]], ["z"]), /unexpected requested output 'z'/],
  ];
  for (const [request, message] of cases) {
    await assert.rejects(engine.infer(request), isError("INVALID_ARG", message));
  }
  assert.equal(calls, 0);
  const { model_stats } = await engine.modelStatistics("m");
  assert.equal(model_stats[0]!.inference_stats.fail.count, cases.length);
  // The server keeps serving.
  const ok = await engine.infer(req([["a", a]]));
  assert.deepEqual([...ok.outputs.keys()], ["y"]);
});

Deno.test("BuiltinEngine checks the shapes of non-batching models", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([echo], {
    inputs: [{ name: "x", dtype: "float32", shape: [1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [1] }],
    config: { batching: false },
  }));
  const response = await engine.infer(requestOf([4], [1]));
  assert.deepEqual(response.outputs.get("y")!.shape, [1]);
  await assert.rejects(engine.infer(requestOf([4], [])), isError("INVALID_ARG", /shape/));
});

Deno.test("BuiltinEngine answers only the requested outputs, in declared order", async () => {
  await using engine = new BuiltinEngine();
  let seen: readonly string[] = [];
  await engine.loadModel(define([(requests: InferRequest[]) => {
    seen = requests[0]!.requestedOutputNames;
    return requests.map((r) => ({ q: r.data.x!, p: r.data.x!, r: r.data.x! }));
  }], {
    outputs: [
      { name: "p", dtype: "float32", shape: [-1] },
      { name: "q", dtype: "float32", shape: [-1] },
      { name: "r", dtype: "float32", shape: [-1] },
    ],
  }));
  const all = await engine.infer(requestOf([1]));
  assert.deepEqual([...all.outputs.keys()], ["p", "q", "r"]);
  const some = await engine.infer(requestOf([1], undefined, { outputs: ["r", "p"] }));
  assert.deepEqual([...some.outputs.keys()], ["p", "r"]);
  assert.deepEqual(seen, ["p", "r"]);
});

Deno.test("BuiltinEngine fails every request of a batch when the callable throws", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([() => {
    throw new RangeError("division by zero");
  }], { config: { maxBatchSize: 4 } }));
  const results = await Promise.allSettled([
    engine.infer(requestOf([1])),
    engine.infer(requestOf([2])),
  ]);
  for (const result of results) {
    assert.equal(result.status, "rejected");
    isError("INTERNAL", "RangeError: division by zero")(result.reason);
  }
  const stats = (await engine.modelStatistics("m")).model_stats[0]!;
  assert.equal(stats.inference_stats.fail.count, 2);
  assert.equal(stats.inference_stats.success.count, 0);
});

Deno.test("BuiltinEngine reports invalid outputs as INTERNAL errors naming the output", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(
    define([
      (requests: InferRequest[]) =>
        requests.map(() => ({ y: ndarray(new Float32Array([1, 2]), [2, 1]) })),
    ]),
  );
  await assert.rejects(
    engine.infer(requestOf([1])),
    isError("INTERNAL", /output 'y' has batch size 2 .* request 0 has batch size 1/),
  );
});

Deno.test("BuiltinEngine calls onUnrecoverable after failing the batch", async () => {
  const seen: string[] = [];
  await using engine = new BuiltinEngine({
    onUnrecoverable: (error) => seen.push(`hook: ${error.message}`),
  });
  await engine.loadModel(define([() => {
    throw new TritonUnrecoverableError("GPU lost");
  }]));
  await assert.rejects(engine.infer(requestOf([1])), (error: unknown) => {
    assert.match((error as Error).message, /GPU lost/);
    seen.push("client");
    return true;
  });
  assert.deepEqual(seen.toSorted(), ["client", "hook: GPU lost"]);
});

Deno.test("BuiltinEngine counts statistics in Triton's shape", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([echo], { config: { maxBatchSize: 8 } }));
  await Promise.all([
    engine.infer(requestOf([1, 2], [2, 1])),
    engine.infer(requestOf([3], [1, 1])),
  ]);
  await engine.infer(requestOf([4], [1, 1]));
  await engine.loadModel(define([echo], { name: "idle" }));
  const { model_stats } = await engine.modelStatistics();
  assert.deepEqual(model_stats.map((s) => s.name), ["idle", "m"]);
  const stats = model_stats[1]!;
  assert.equal(stats.version, "1");
  assert.equal(stats.inference_count, 4);
  assert.equal(stats.execution_count, 2);
  assert.ok(stats.last_inference > 0);
  const s = stats.inference_stats;
  for (const key of ["success", "queue", "compute_input", "compute_infer", "compute_output"]) {
    assert.equal(s[key as keyof typeof s].count, 3, key);
  }
  assert.equal(s.fail.count, 0);
  assert.deepEqual(stats.batch_stats.map((b) => [b.batch_size, b.compute_infer.count]), [
    [1, 1],
    [3, 1],
  ]);
  assert.equal(model_stats[0]!.inference_count, 0);
});

Deno.test("BuiltinEngine keeps no metrics when they are off", async () => {
  // CPU metrics asked for too: not read, so no `/proc` access is needed.
  await using engine = new BuiltinEngine({ metrics: false, cpuMetrics: true });
  await engine.loadModel(define([echo]));
  await engine.infer(requestOf([1]));
  assert.equal(await engine.metrics(), "");
  // Statistics are not metrics: they are still kept.
  const { model_stats } = await engine.modelStatistics("m");
  assert.equal(model_stats[0]!.inference_count, 1);
});

Deno.test("BuiltinEngine renders Prometheus metrics with Triton's names", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([echo]));
  await engine.infer(requestOf([1]));
  const text = await engine.metrics();
  assert.match(
    text,
    /# HELP nv_inference_request_success Number of successful inference requests, all batch sizes\n# TYPE nv_inference_request_success counter\nnv_inference_request_success\{model="m",version="1"\} 1\n/,
  );
  for (
    const name of [
      "nv_inference_request_failure",
      "nv_inference_count",
      "nv_inference_exec_count",
      "nv_inference_request_duration_us",
      "nv_inference_queue_duration_us",
      "nv_inference_compute_input_duration_us",
      "nv_inference_compute_infer_duration_us",
      "nv_inference_compute_output_duration_us",
    ]
  ) {
    assert.match(text, new RegExp(`^# TYPE ${name} counter$`, "m"));
    assert.match(text, new RegExp(`^${name}\\{model="m",version="1"\\} \\d+$`, "m"));
  }
  assert.match(text, /^nv_inference_count\{model="m",version="1"\} 1$/m);
});

Deno.test("BuiltinEngine cancels a queued request and aborts a running one", async () => {
  const release = Promise.withResolvers<void>();
  const started = Promise.withResolvers<void>();
  let runningSignal: AbortSignal | undefined;
  const calls: number[] = [];
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([async (requests: InferRequest[]) => {
    calls.push(values(requests[0]!.data.x)[0]!);
    runningSignal = requests[0]!.signal;
    started.resolve();
    await release.promise;
    return echo(requests);
  }], { config: { maxBatchSize: 1 } }));
  const runningClient = new AbortController();
  const running = engine.infer(requestOf([1], undefined, { signal: runningClient.signal }));
  await started.promise;
  const queuedClient = new AbortController();
  const queued = engine.infer(requestOf([2], undefined, { signal: queuedClient.signal }));
  queuedClient.abort();
  await assert.rejects(queued, isError("CANCELLED", /cancelled/));
  runningClient.abort();
  assert.equal(runningSignal!.aborted, true);
  release.resolve();
  await assert.rejects(running, isError("CANCELLED", /cancelled/));
  assert.deepEqual(calls, [1]);
  const aborted = new AbortController();
  aborted.abort();
  await assert.rejects(
    engine.infer(requestOf([3], undefined, { signal: aborted.signal })),
    isError("CANCELLED", /cancelled/),
  );
});

Deno.test("BuiltinEngine.stop() waits for in-flight requests and refuses new ones", async () => {
  const release = Promise.withResolvers<void>();
  const started = Promise.withResolvers<void>();
  const engine = new BuiltinEngine();
  await engine.loadModel(define([async (requests: InferRequest[]) => {
    started.resolve();
    await release.promise;
    return echo(requests);
  }], { config: { maxBatchSize: 1 } }));
  const running = engine.infer(requestOf([1]));
  await started.promise;
  const queued = engine.infer(requestOf([2]));
  const stopping = engine.stop();
  assert.equal(engine.stop(), stopping);
  assert.equal(await engine.isReady(), false);
  await assert.rejects(engine.infer(requestOf([3])), isError("UNAVAILABLE", /stopping/));
  release.resolve();
  assert.deepEqual(values((await running).outputs.get("y")), [1]);
  assert.deepEqual(values((await queued).outputs.get("y")), [2]);
  await stopping;
  assert.equal(engine.isLive(), false);
  assert.deepEqual(await engine.repositoryIndex(false), [
    { name: "m", version: "1", state: "UNAVAILABLE", reason: "unloaded" },
  ]);
});

Deno.test("BuiltinEngine.stop() fails what is left after the exit timeout", async () => {
  const release = Promise.withResolvers<void>();
  const started = Promise.withResolvers<void>();
  const engine = new BuiltinEngine({ exitTimeoutSecs: 0.01 });
  await engine.loadModel(define([async (requests: InferRequest[]) => {
    started.resolve();
    await release.promise;
    return echo(requests);
  }]));
  const running = assert.rejects(engine.infer(requestOf([1])), isError("UNAVAILABLE", /stopped/));
  await started.promise;
  await engine.stop();
  await running;
  release.resolve();
  await tick();
});

Deno.test("BuiltinEngine streams a decoupled model's steps, the last one final", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(
    define([async function* (requests: InferRequest[]): AsyncGenerator<InferResult[]> {
      for (let step = 1; step <= 3; step++) {
        yield requests.map(() => ({ y: ndarray(new Float32Array([step]), [1, 1]) }));
      }
    }], { config: { decoupled: true } }),
  );
  const seen: [number[], boolean][] = [];
  for await (const response of engine.inferStream(requestOf([0], undefined, { id: "s" }))) {
    assert.equal(response.id, "s");
    const y = response.outputs.get("y");
    seen.push([y === undefined ? [] : values(y), response.final]);
  }
  assert.deepEqual(seen, [[[1], false], [[2], false], [[3], false], [[], true]]);
  assert.equal(engine.model("m").decoupled, true);
  await assert.rejects(
    engine.infer(requestOf([0])),
    isError(
      "UNSUPPORTED",
      /doesn't support models with decoupled transaction policy/,
    ),
  );
  const stats = (await engine.modelStatistics("m")).model_stats[0]!;
  assert.deepEqual(Object.keys(stats.response_stats), ["0", "1", "2"]);
});

Deno.test("BuiltinEngine streams one empty final response when the callable yields nothing", async () => {
  await using engine = new BuiltinEngine();
  // deno-lint-ignore require-yield
  await engine.loadModel(define([function* (): Generator<InferResult[]> {
    return;
  }], { config: { decoupled: true } }));
  const responses: StreamResponse[] = [];
  for await (const response of engine.inferStream(requestOf([0]))) responses.push(response);
  assert.equal(responses.length, 1);
  assert.equal(responses[0]!.final, true);
  assert.equal(responses[0]!.outputs.size, 0);
});

Deno.test("BuiltinEngine delivers partial responses before a mid-stream error", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([function* (requests: InferRequest[]): Generator<InferResult[]> {
    yield echo(requests);
    throw new TypeError("broken stream");
  }], { config: { decoupled: true } }));
  const seen: boolean[] = [];
  await assert.rejects(async () => {
    for await (const response of engine.inferStream(requestOf([0]))) seen.push(response.final);
  }, isError("INTERNAL", "TypeError: broken stream"));
  assert.deepEqual(seen, [false]);
});

Deno.test("BuiltinEngine refuses to stream a coupled model", async () => {
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([echo]));
  await assert.rejects(async () => {
    for await (const _ of engine.inferStream(requestOf([0]))) { /* nothing */ }
  }, isError("UNSUPPORTED", /decoupled transaction policy/));
});

Deno.test("BuiltinEngine aborts the callable when the stream consumer stops early", async () => {
  const aborted = Promise.withResolvers<boolean>();
  await using engine = new BuiltinEngine();
  await engine.loadModel(
    define([async function* (requests: InferRequest[]): AsyncGenerator<InferResult[]> {
      const signal = requests[0]!.signal;
      yield echo(requests);
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      aborted.resolve(signal.aborted);
    }], { config: { decoupled: true } }),
  );
  for await (const _ of engine.inferStream(requestOf([0]))) break;
  assert.equal(await aborted.promise, true);
});

Deno.test("BuiltinEngine answers identical requests from the response cache", async () => {
  let calls = 0;
  await using engine = new BuiltinEngine({ responseCacheByteSize: 1 << 20 });
  await engine.loadModel(define([(requests: InferRequest[]) => {
    calls += 1;
    return echo(requests);
  }], { config: { responseCache: true } }));
  for (let i = 0; i < 5; i++) {
    const response = await engine.infer(requestOf([7, 8]));
    assert.deepEqual(values(response.outputs.get("y")), [7, 8]);
  }
  await engine.infer(requestOf([7, 9]));
  await engine.infer(requestOf([7, 8], [2, 1]));
  assert.equal(calls, 3);
  const stats = (await engine.modelStatistics("m")).model_stats[0]!;
  assert.equal(stats.inference_stats.cache_hit.count, 4);
  assert.equal(stats.inference_stats.cache_miss.count, 3);
  assert.equal(stats.inference_stats.success.count, 7);
  assert.equal(stats.inference_count, 4);
});

Deno.test("BuiltinEngine ignores responseCache without a cache size", async () => {
  let calls = 0;
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([(requests: InferRequest[]) => {
    calls += 1;
    return echo(requests);
  }], { config: { responseCache: true } }));
  await engine.infer(requestOf([1]));
  await engine.infer(requestOf([1]));
  assert.equal(calls, 2);
});
