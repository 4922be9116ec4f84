// End-to-end tests of the Triton-core engine. They need `deno task setup:triton`; without an
// install they are skipped, unless DENOTRITON_REQUIRE_TRITON=1 makes a missing core a failure.

import assert from "node:assert/strict";
import type { InferCallable, InferRequest, InferResult } from "../src/callable/types.ts";
import { type ModelConfig, resolveModelConfig } from "../src/config/model_config.ts";
import { resolveTensorSpecs } from "../src/config/tensor_spec.ts";
import type {
  EngineShare,
  InferenceRequest,
  ModelDefinition,
  SharedEngineData,
} from "../src/engine/engine.ts";
import { NativeEngine, type NativeEngineOptions } from "../src/engine/native/engine.ts";
import { openNative } from "../src/native/ffi.ts";
import { findTritonInstall } from "../src/setup/install.ts";
import { lentCount } from "../src/engine/native/tensors.ts";
import { InferenceError } from "../src/errors.ts";
import { MainThreadInstances } from "../src/instances/main_thread.ts";
import { hostTensor } from "../src/tensor/device_tensor.ts";
import { foreignBuffer } from "../src/tensor/foreign_memory.ts";
import { ndarray } from "../src/tensor/ndarray.ts";
import { testInOwnProcess, watchdog } from "./_helpers.ts";

const install = await findTritonInstall();
const required = Deno.env.get("DENOTRITON_REQUIRE_TRITON") === "1";
if (required && install === undefined) {
  throw new Error("DENOTRITON_REQUIRE_TRITON=1 but the Triton core is not installed");
}
const ignore = install === undefined;

function define(
  callables: InferCallable[],
  config: ModelConfig = {},
  name = "m",
): ModelDefinition {
  return {
    name,
    version: 1,
    strict: false,
    inputs: resolveTensorSpecs([{ name: "x", dtype: "float32", shape: [-1] }], "input"),
    outputs: resolveTensorSpecs([{ name: "y", dtype: "float32", shape: [-1] }], "output"),
    config: resolveModelConfig(config),
    instances: new MainThreadInstances(callables),
  };
}

function double(requests: InferRequest[]): InferResult[] {
  return requests.map((r) => ({
    y: ndarray((r.data.x!.data as Float32Array).map((v) => v * 2), r.data.x!.shape),
  }));
}

function request(values: number[], extra: Partial<InferenceRequest> = {}): InferenceRequest {
  return {
    modelName: "m",
    parameters: {},
    inputs: new Map([["x", ndarray(new Float32Array(values), [1, values.length])]]),
    ...extra,
  };
}

async function started(options: NativeEngineOptions = {}): Promise<NativeEngine> {
  const engine = new NativeEngine({ install: install!, exitTimeoutSecs: 5, ...options });
  await engine.start();
  return engine;
}

Deno.test({ name: "native engine: with metrics off the core counts nothing", ignore }, async () => {
  // Each in a process of its own: once a core in a process turned metrics on, they stay on.
  const run = async (metrics: "on" | "off"): Promise<string> => {
    const result = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_native_metrics.ts", import.meta.url).pathname, metrics],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(120_000),
    }).output();
    const decoder = new TextDecoder();
    assert.equal(result.code, 0, decoder.decode(result.stderr));
    return decoder.decode(result.stdout);
  };
  const [on, off] = await Promise.all([run("on"), run("off")]);
  assert.match(on, /^nv_inference_request_success\{model="m",version="1"\} 1$/m);
  // The core may still list the model's series, but counts nothing in them.
  assert.doesNotMatch(off, /^nv_\w+\{model="m"[^}]*\} [1-9]/m);
});

Deno.test({ name: "native engine: load, infer, metadata, stop", ignore }, async () => {
  const engine = await started();
  try {
    assert.equal(engine.isLive(), true);
    assert.equal(await engine.isReady(), true);
    await engine.loadModel(define([double]));
    assert.equal(await engine.modelReady("m"), true);
    assert.equal(await engine.modelReady("nope"), false);
    const response = await engine.infer(request([1, 2, 3], { id: "r1" }));
    assert.equal(response.modelName, "m");
    assert.equal(response.modelVersion, "1");
    assert.equal(response.id, "r1");
    assert.deepEqual([...(hostTensor(response.outputs.get("y")!, "y").data as Float32Array)], [
      2,
      4,
      6,
    ]);
    assert.deepEqual(response.outputs.get("y")!.shape, [1, 3]);
    const metadata = await engine.modelMetadata("m");
    assert.deepEqual(metadata, {
      name: "m",
      versions: ["1"],
      platform: "denotriton",
      inputs: [{ name: "x", datatype: "FP32", shape: [-1, -1] }],
      outputs: [{ name: "y", datatype: "FP32", shape: [-1, -1] }],
    });
    const config = await engine.modelConfig("m");
    assert.equal(config.max_batch_size, 4);
    assert.deepEqual(config.parameters, {});
    assert.equal(engine.serverMetadata().version, "2.51.0");
    const index = await engine.repositoryIndex(false);
    assert.deepEqual(index, [{ name: "m", version: "1", state: "READY" }]);
    const stats = await engine.modelStatistics("m");
    assert.equal(stats.model_stats[0]!.inference_count, 1);
    assert.equal(stats.model_stats[0]!.execution_count, 1);
    assert.match(await engine.metrics(), /nv_inference_request_success\{model="m",version="1"\} 1/);
    await assert.rejects(
      engine.infer({ ...request([1]), modelName: "nope" }),
      (error: unknown) => error instanceof InferenceError && error.code === "NOT_FOUND",
    );
    await assert.rejects(
      engine.infer({
        modelName: "m",
        parameters: {},
        inputs: new Map([["x", ndarray(new Int32Array([1]), [1, 1])]]),
      }),
      (error: unknown) => error instanceof InferenceError && error.code === "INVALID_ARG",
    );
    await engine.unloadModel("m");
    assert.equal(await engine.modelReady("m"), false);
  } finally {
    await engine.stop();
  }
  assert.equal(engine.isLive(), false);
});

Deno.test({ name: "native engine: Triton's dynamic batcher forms the batch", ignore }, async () => {
  const batches: number[] = [];
  const engine = await started();
  try {
    await engine.loadModel(define([(requests) => {
      batches.push(requests.length);
      return double(requests);
    }], { maxBatchSize: 4, batcher: { maxQueueDelayMicroseconds: 5_000_000 } }));
    const responses = await Promise.all([1, 2, 3, 4].map((v) => engine.infer(request([v]))));
    assert.deepEqual(
      responses.map((r) => (hostTensor(r.outputs.get("y")!, "y").data as Float32Array)[0]),
      [
        2,
        4,
        6,
        8,
      ],
    );
    assert.deepEqual(batches, [4]);
    const stats = (await engine.modelStatistics("m")).model_stats[0]!;
    assert.equal(stats.execution_count, 1);
    assert.equal(stats.inference_count, 4);
    assert.equal(stats.inference_stats.success.count, 4);
    assert.deepEqual(stats.batch_stats.map((b) => b.batch_size), [4]);
  } finally {
    await engine.stop();
  }
});

// The core keeps one response cache per process, taken until no core server is left in the
// process: a test that needs it runs in a process of its own.
testInOwnProcess({
  name: "native engine: the core's response cache answers repeats",
  file: import.meta.url,
  ignore,
  fn: async () => {
    let calls = 0;
    const engine = await started({ responseCacheByteSize: 1 << 20 });
    try {
      await engine.loadModel(define([(requests) => {
        calls++;
        return double(requests);
      }], { responseCache: true }));
      for (let i = 0; i < 3; i++) {
        const response = await engine.infer(request([5, 6]));
        assert.deepEqual([...(hostTensor(response.outputs.get("y")!, "y").data as Float32Array)], [
          10,
          12,
        ]);
      }
      assert.equal(calls, 1);
      const stats = (await engine.modelStatistics("m")).model_stats[0]!;
      assert.equal(stats.inference_stats.cache_hit.count, 2);
      assert.equal(stats.inference_stats.cache_miss.count, 1);
      assert.equal(stats.execution_count, 1);
    } finally {
      await engine.stop();
    }
  },
});

Deno.test({ name: "native engine: callable errors reach the client", ignore }, async () => {
  const engine = await started();
  try {
    let fail = true;
    await engine.loadModel(define([(requests) => {
      if (fail) throw new RangeError("boom");
      return double(requests);
    }]));
    await assert.rejects(
      engine.infer(request([1])),
      (error: unknown) =>
        error instanceof InferenceError && error.code === "INTERNAL" &&
        /boom/.test(error.message),
    );
    fail = false;
    const response = await engine.infer(request([3]));
    assert.deepEqual([...(hostTensor(response.outputs.get("y")!, "y").data as Float32Array)], [6]);
    const stats = (await engine.modelStatistics("m")).model_stats[0]!;
    assert.equal(stats.inference_stats.fail.count, 1);
    assert.equal(stats.inference_stats.success.count, 1);
  } finally {
    await engine.stop();
  }
});

testInOwnProcess({
  name: "native engine: outputs bound to caller memory are written there once",
  file: import.meta.url,
  ignore,
  fn: async () => {
    const engine = await started({ responseCacheByteSize: 1 << 20 });
    try {
      await engine.loadModel(define([double]));
      await engine.loadModel(define([double], { responseCache: true }, "cached"));
      for (const modelName of ["m", "cached", "cached"]) {
        // The second "cached" request is a cache hit: the core writes the cached bytes there too.
        const region = new Uint8Array(16);
        const response = await engine.infer(
          request([1, 2, 3], {
            modelName,
            outputs: ["y"],
            outputBuffers: new Map([["y", region]]),
          }),
        );
        const y = hostTensor(response.outputs.get("y")!, "y");
        // A view of the caller's bytes, which hold the result: nothing was copied out.
        assert.equal((y.data as Float32Array).buffer, region.buffer, modelName);
        assert.deepEqual([...new Float32Array(region.buffer, 0, 3)], [2, 4, 6]);
        assert.deepEqual(y.shape, [1, 3]);
      }
      const stats = (await engine.modelStatistics("cached")).model_stats[0]!;
      assert.equal(stats.inference_stats.cache_hit.count, 1);
      await assert.rejects(
        engine.infer(
          request([1, 2, 3], {
            outputs: ["y"],
            outputBuffers: new Map([["y", new Uint8Array(8)]]),
          }),
        ),
        (error: unknown) =>
          error instanceof InferenceError && error.code === "INTERNAL" &&
          error.message ===
            "shared memory size specified with the request for output 'y' (8 bytes) should be at least 12 bytes to hold the results",
      );
      // Unbound outputs are copied out as before, and the engine keeps serving.
      const response = await engine.infer(request([4]));
      assert.deepEqual([...(hostTensor(response.outputs.get("y")!, "y").data as Float32Array)], [
        8,
      ]);
    } finally {
      await engine.stop();
    }
  },
});

Deno.test(
  { name: "native engine: the callable reads an input on the request's own ArrayBuffer", ignore },
  async () => {
    const engine = await started();
    try {
      const seen: ArrayBufferLike[] = [];
      await engine.loadModel(define([(requests) => {
        seen.push(...requests.map((r) => (r.data.x!.data as Float32Array).buffer));
        return double(requests);
      }]));
      const input = new Float32Array(1024).fill(1.5);
      const response = await engine.infer({
        modelName: "m",
        parameters: {},
        inputs: new Map([["x", ndarray(input, [1, 1024])]]),
      });
      assert.equal((hostTensor(response.outputs.get("y")!, "y").data as Float32Array)[1023], 3);
      // Not a new ArrayBuffer over the core's pointer (V8 counts those as external memory).
      assert.equal(seen.length, 1);
      assert.equal(seen[0], input.buffer);
    } finally {
      await engine.stop();
    }
  },
);

Deno.test({ name: "native engine: start and stop repeatedly in one process", ignore }, async () => {
  for (let round = 0; round < 3; round++) {
    const engine = await started();
    try {
      await engine.loadModel(define([double]));
      const response = await engine.infer(request([round]));
      assert.deepEqual([...(hostTensor(response.outputs.get("y")!, "y").data as Float32Array)], [
        round * 2,
      ]);
    } finally {
      await engine.stop();
    }
    assert.equal(engine.isLive(), false);
  }
});

Deno.test({ name: "native engine: decoupled models stream through the core", ignore }, async () => {
  const engine = await started();
  try {
    await engine.loadModel(
      define([async function* (requests: InferRequest[]): AsyncGenerator<InferResult[]> {
        yield double(requests);
        yield requests.map((r) => ({ y: r.data.x! }));
      }], { decoupled: true }),
    );
    const steps: { y: number[]; final: boolean }[] = [];
    await watchdog(
      (async () => {
        for await (const step of engine.inferStream(request([2]))) {
          const y = step.outputs.get("y");
          steps.push({
            y: y === undefined ? [] : [...(hostTensor(y, "y").data as Float32Array)],
            final: step.final,
          });
        }
      })(),
      "the stream",
    );
    // Each response at once, then a flags-only final, like the built-in engine.
    assert.deepEqual(steps, [
      { y: [4], final: false },
      { y: [2], final: false },
      { y: [], final: true },
    ]);
    await assert.rejects(
      engine.infer(request([2])),
      (error: unknown) => error instanceof InferenceError && error.code === "UNSUPPORTED",
    );
  } finally {
    await engine.stop();
  }
});

Deno.test(
  { name: "native engine: BYTES tensors and parameters cross the core", ignore },
  async () => {
    const seen: unknown[] = [];
    const engine = await started();
    try {
      await engine.loadModel({
        ...define([(requests) =>
          requests.map((r) => {
            seen.push(r.parameters);
            return { y: r.data.x! };
          })]),
        inputs: resolveTensorSpecs([{ name: "x", dtype: "bytes", shape: [-1] }], "input"),
        outputs: resolveTensorSpecs([{ name: "y", dtype: "bytes", shape: [-1] }], "output"),
      });
      const response = await engine.infer({
        modelName: "m",
        parameters: { s: "v", n: 7, b: true, d: 0.5 },
        inputs: new Map([["x", ndarray(["a", "b\0c"], [1, 2])]]),
      });
      const y = response.outputs.get("y")!;
      assert.equal(y.dtype, "bytes");
      assert.deepEqual((y.data as Uint8Array[]).map((e) => [...e]), [[97], [98, 0, 99]]);
      assert.deepEqual(seen, [{ s: "v", n: 7, b: true, d: 0.5 }]);
    } finally {
      await engine.stop();
    }
  },
);

// Faults the bridge injects on purpose (`dt_debug_fault`): Triton 2.51's core never refuses a send
// nor hands over a batch the bridge cannot describe, so these paths are reached no other way.
const FAULT_SEND = 1;
const FAULT_DESCRIBE = 2;

Deno.test(
  { name: "native engine: a send the core refuses leaves the response to the core", ignore },
  async () => {
    const engine = await started();
    const { bridge } = openNative(install!);
    try {
      let fail = false;
      await engine.loadModel(define([(requests) => {
        if (fail) throw new RangeError("boom");
        return double(requests);
      }]));
      // The core takes a response even when the send reports a failure: the bridge must not
      // delete it again (a double free, which also breaks the reply the client reads).
      bridge.dt_debug_fault(FAULT_SEND, 1);
      const sent = await watchdog(engine.infer(request([1, 2])), "a response");
      assert.deepEqual([...(hostTensor(sent.outputs.get("y")!, "y").data as Float32Array)], [2, 4]);
      // The same for an error response.
      fail = true;
      bridge.dt_debug_fault(FAULT_SEND, 1);
      await assert.rejects(
        watchdog(engine.infer(request([1])), "an error response"),
        (error: unknown) =>
          error instanceof InferenceError && error.code === "INTERNAL" &&
          /boom/.test(error.message),
      );
      fail = false;
      const after = await watchdog(engine.infer(request([3])), "the next response");
      assert.deepEqual([...(hostTensor(after.outputs.get("y")!, "y").data as Float32Array)], [6]);
    } finally {
      bridge.dt_debug_fault(FAULT_SEND, 0);
      await engine.stop();
    }
  },
);

Deno.test(
  { name: "native engine: a bad batch description fails that batch only", ignore },
  async () => {
    const engine = await started();
    const { bridge } = openNative(install!);
    try {
      await engine.loadModel(define([double]));
      bridge.dt_debug_fault(FAULT_DESCRIBE, 1);
      await assert.rejects(
        watchdog(engine.infer(request([1])), "the failed batch"),
        (error: unknown) =>
          error instanceof InferenceError && error.code === "INTERNAL" &&
          /^Cannot run a batch of model 'm': its description from the bridge is malformed: /.test(
            error.message,
          ),
      );
      // The instance thread was released and the consumer still serves.
      const response = await watchdog(engine.infer(request([4])), "the next batch");
      assert.deepEqual([...(hostTensor(response.outputs.get("y")!, "y").data as Float32Array)], [
        8,
      ]);
      // The error response of a batch the bridge ends itself, with a send that reports a failure.
      bridge.dt_debug_fault(FAULT_DESCRIBE, 1);
      bridge.dt_debug_fault(FAULT_SEND, 1);
      await assert.rejects(
        watchdog(engine.infer(request([1])), "the failed batch"),
        /Cannot run a batch of model 'm'/,
      );
      const last = await watchdog(engine.infer(request([5])), "the last batch");
      assert.deepEqual([...(hostTensor(last.outputs.get("y")!, "y").data as Float32Array)], [10]);
    } finally {
      bridge.dt_debug_fault(FAULT_SEND, 0);
      bridge.dt_debug_fault(FAULT_DESCRIBE, 0);
      await engine.stop();
    }
  },
);

Deno.test(
  { name: "native engine: a failed load says why, in the core's words", ignore },
  async () => {
    const engine = await started({ logFile: "/dev/null" });
    try {
      // bind() refuses this combination; straight to the engine, only the core can refuse it.
      const model = define([double]);
      const config = {
        ...model.config,
        batcher: {
          ...model.config.batcher,
          preserveOrdering: true,
          priorityLevels: 2,
          defaultPriorityLevel: 1,
        },
      };
      await assert.rejects(engine.loadModel({ ...model, config }), {
        name: "InferenceError",
        code: "INTERNAL",
        message:
          "Failed to load model 'm' version 1: failed to load 'm', failed to poll from model repository (the Triton core: Poll failed for model directory 'm': Only one priority level is allowed when 'preserve_ordering' is true for m)",
      });
      // The engine keeps serving: the same name loads with a config the core accepts.
      await engine.loadModel(define([double]));
      const response = await engine.infer(request([1, 2]));
      assert.deepEqual([...(hostTensor(response.outputs.get("y")!, "y").data as Float32Array)], [
        2,
        4,
      ]);
    } finally {
      await engine.stop();
    }
  },
);

Deno.test(
  { name: "native engine: large results are lent to their response, not copied", ignore },
  async () => {
    const before = lentCount();
    const n = 128 * 1024; // 512 KiB: above the lending threshold (64 KiB)
    const engine = await started();
    try {
      // One model answers with its input (the client's own memory), one with new memory.
      await engine.loadModel(define([(requests) => requests.map((r) => ({ y: r.data.x! }))]));
      await engine.loadModel(define([double], {}, "fresh"));
      const input = new Float32Array(n).map((_, i) => i);
      const echoed = await engine.infer({
        modelName: "m",
        parameters: {},
        inputs: new Map([["x", ndarray(input, [1, n])]]),
      });
      const y = hostTensor(echoed.outputs.get("y")!, "y").data as Float32Array;
      assert.equal(y.buffer, input.buffer);
      assert.deepEqual([y[0], y[n - 1]], [0, n - 1]);
      // Two requests in flight: each result keeps its own values after the other's release.
      const [a, b] = await Promise.all(
        [1, 2].map((k) =>
          engine.infer({
            modelName: "fresh",
            parameters: {},
            inputs: new Map([["x", ndarray(new Float32Array(n).fill(k), [1, n])]]),
          })
        ),
      );
      await engine.infer(request([7], { modelName: "fresh" }));
      const ya = hostTensor(a!.outputs.get("y")!, "y").data as Float32Array;
      const yb = hostTensor(b!.outputs.get("y")!, "y").data as Float32Array;
      assert.deepEqual([ya.length, ya[0], ya[n - 1], yb[0], yb[n - 1]], [n, 2, 2, 4, 4]);
      // Small results are still copied out of the core's memory.
      const small = await engine.infer(request([1, 2]));
      assert.deepEqual([...(hostTensor(small.outputs.get("y")!, "y").data as Float32Array)], [
        1,
        2,
      ]);
    } finally {
      await engine.stop();
    }
    // Every lent input and result was given back.
    assert.equal(lentCount(), before);
  },
);

Deno.test(
  {
    name: "native engine: a batch given up at stop loses only its views of foreign memory",
    ignore,
  },
  async () => {
    const engine = await started({ exitTimeoutSecs: 1 });
    // The caller's own bytes, and foreign ones (a buffer over a pointer, as a shared-memory
    // region's view is): memory this test keeps alive, so the foreign view stays readable here.
    const own = new Float32Array([1, 2, 3]);
    const backing = new Float32Array([4, 5, 6]);
    const foreign = new Float32Array(foreignBuffer(Deno.UnsafePointer.of(backing)!, 12));
    const seen: Float32Array[] = [];
    let running!: () => void;
    const callableRan = new Promise<void>((resolve) => running = resolve);
    let pending: Promise<unknown> | undefined;
    try {
      const model = define([(requests) => {
        for (const r of requests) {
          seen.push(r.data.x!.data as Float32Array, r.data.z!.data as Float32Array);
        }
        running();
        return new Promise<never>(() => {});
      }]);
      await engine.loadModel({
        ...model,
        inputs: resolveTensorSpecs([
          { name: "x", dtype: "float32", shape: [-1] },
          { name: "z", dtype: "float32", shape: [-1] },
        ], "input"),
      });
      pending = engine.infer({
        modelName: "m",
        parameters: {},
        inputs: new Map([["x", ndarray(own, [1, 3])], ["z", ndarray(foreign, [1, 3])]]),
      }).catch((error) => error);
      await callableRan;
      assert.equal(seen[0]!.buffer, own.buffer);
    } finally {
      await engine.stop();
    }
    const error = await pending;
    assert.ok(error instanceof InferenceError, String(error));
    assert.equal(error.code, "UNAVAILABLE");
    // The foreign view is revoked: the callable, still running, sees an empty array.
    assert.equal(seen[1]!.length, 0);
    // The caller's own input is not the server's to take away.
    assert.equal(own.buffer.detached, false);
    assert.deepEqual([...own], [1, 2, 3]);
    assert.deepEqual([...seen[0]!], [1, 2, 3]);
  },
);

/**
 * Another thread sharing the core: a Worker with a client of it (`openSharedEngine`) that submits
 * each request it is sent (values, and an optional queue timeout) and answers the outputs or the
 * error's message; `close()` closes the client, then ends the Worker.
 */
function sharedClientThread(data: unknown): {
  infer(values: number[], timeoutMicroseconds?: number): Promise<number[] | string>;
  close(): Promise<void>;
} {
  const share = new URL("../src/engine/share.ts", import.meta.url).href;
  const ndarrayModule = new URL("../src/tensor/ndarray.ts", import.meta.url).href;
  const source = `
    import { openSharedEngine } from ${JSON.stringify(share)};
    import { ndarray } from ${JSON.stringify(ndarrayModule)};
    let client;
    self.onmessage = async ({ data }) => {
      if (data.open) {
        client = await openSharedEngine(data.open, () => {});
        self.postMessage("open");
        return;
      }
      if (data.close) {
        await client.close();
        self.postMessage("closed");
        return;
      }
      try {
        const response = await client.infer({
          modelName: "m",
          modelVersion: "1",
          parameters: {},
          inputs: new Map([["x", ndarray(new Float32Array(data.values), [1, data.values.length])]]),
          ...(data.timeout === undefined ? {} : { timeoutMicroseconds: data.timeout }),
        }, ["y"]);
        self.postMessage([...response.outputs.get("y").data]);
      } catch (error) {
        self.postMessage(error.message);
      }
    };`;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  URL.revokeObjectURL(url);
  // One message at a time: each answer is the next message.
  const answer = <T>(message: unknown): Promise<T> =>
    watchdog(
      new Promise<T>((resolve, reject) => {
        worker.onmessage = (event) => resolve(event.data as T);
        worker.onerror = (event) => reject(new Error(event.message));
        worker.postMessage(message);
      }),
      "the thread's answer",
    );
  const opened = answer<string>({ open: data });
  return {
    infer: async (values, timeout) => {
      await opened;
      return answer({ values, timeout });
    },
    close: async () => {
      try {
        await opened;
        await answer({ close: true });
      } finally {
        worker.terminate();
      }
    },
  };
}

/** Shares the engine (until `released`) with a new {@linkcode sharedClientThread}. */
function shareWithThread(engine: NativeEngine, released: Promise<void>): {
  shared: EngineShare;
  data: SharedEngineData;
  thread: ReturnType<typeof sharedClientThread>;
} {
  const shared = engine.share({ stop: () => Promise.resolve(), released: () => released });
  assert.ok(shared !== undefined);
  const data = shared.client();
  return { shared, data, thread: sharedClientThread(data) };
}

Deno.test({
  name:
    "native engine: a thread sharing the core is woken by its signal when this isolate's batches answer it",
  ignore,
}, async () => {
  const engine = await started();
  const released = Promise.withResolvers<void>();
  let thread: ReturnType<typeof sharedClientThread> | undefined;
  try {
    await engine.loadModel(define([double]));
    const { shared, data, thread: opened } = shareWithThread(engine, released.promise);
    thread = opened;
    assert.deepEqual(await thread.infer([1, 2, 3]), [2, 4, 6]);
    assert.deepEqual(await thread.infer([4]), [8]);
    // Rung once per batch this isolate ran for the thread (each request its own batch here, the
    // second submitted after the first was answered): not woken through the core's queue.
    assert.equal(Atomics.load(new Int32Array(data.signal.buffer), 0), 2);
    // Each client takes a signal of its own.
    assert.notEqual(shared.client().signal.token, data.signal.token);
  } finally {
    await thread?.close();
    released.resolve();
    await engine.stop();
  }
});

Deno.test({
  name: "native engine: what the core's own threads answer a sharing thread still wakes it",
  ignore,
}, async () => {
  const engine = await started();
  const released = Promise.withResolvers<void>();
  const gate = Promise.withResolvers<void>();
  const entered = Promise.withResolvers<void>();
  let thread: ReturnType<typeof sharedClientThread> | undefined;
  try {
    await engine.loadModel(define([async (requests) => {
      entered.resolve();
      await gate.promise;
      return double(requests);
    }], {
      maxBatchSize: 4,
      batcher: {
        defaultQueuePolicy: {
          timeoutAction: "REJECT",
          defaultTimeoutMicroseconds: 60_000_000,
          allowTimeoutOverride: true,
        },
      },
    }));
    const { data, thread: opened } = shareWithThread(engine, released.promise);
    thread = opened;
    // This isolate's request holds the only instance; the thread's waits in the core's queue
    // past its 1 ms, and the core's batcher thread rejects it.
    const first = engine.infer(request([1]));
    await watchdog(entered.promise, "the first batch");
    const late = thread.infer([2], 1000);
    // Queued in the core (its gauge counts it), then past its 1 ms for certain.
    const pending = /^nv_inference_pending_request_count\{model="m",version="1"\} 1$/m;
    await watchdog(
      (async () => {
        while (!pending.test(engine.metrics())) {
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      })(),
      "the thread's request in the core's queue",
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    gate.resolve();
    const y = hostTensor((await first).outputs.get("y")!, "y").data as Float32Array;
    assert.deepEqual([...y], [2]);
    assert.equal(await late, "Request timeout expired");
    // No batch of this isolate answered the thread: its signal was never rung.
    assert.equal(Atomics.load(new Int32Array(data.signal.buffer), 0), 0);
  } finally {
    gate.resolve();
    await thread?.close();
    released.resolve();
    await engine.stop();
  }
});
