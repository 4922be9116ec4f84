// Several Triton engines in one process (ffi/README.md, "Several engines in one process"):
// servers started, loaded, serving and stopped at once, many times, as a notebook's servers or
// the files of `deno test --parallel` (which share one process) do; what the core keeps once per
// process: its response cache and its log file. They need `deno task setup:triton`; without an
// install they are skipped, unless DENOTRITON_REQUIRE_TRITON=1 makes a missing core a failure.

import assert from "node:assert/strict";
import type { InferRequest, InferResult } from "../src/callable/types.ts";
import { type ModelConfig, resolveModelConfig } from "../src/config/model_config.ts";
import { resolveTensorSpecs } from "../src/config/tensor_spec.ts";
import type { ModelDefinition } from "../src/engine/engine.ts";
import { NativeEngine, type NativeEngineOptions } from "../src/engine/native/engine.ts";
import { findTritonInstall } from "../src/setup/install.ts";
import { InferenceError } from "../src/errors.ts";
import { MainThreadInstances } from "../src/instances/main_thread.ts";
import { hostTensor } from "../src/tensor/device_tensor.ts";
import { ndarray } from "../src/tensor/ndarray.ts";
import { testInOwnProcess, watchdog } from "./_helpers.ts";

const install = await findTritonInstall();
if (Deno.env.get("DENOTRITON_REQUIRE_TRITON") === "1" && install === undefined) {
  throw new Error("DENOTRITON_REQUIRE_TRITON=1 but the Triton core is not installed");
}
const ignore = install === undefined;

/** A model that multiplies its input by `factor`: each engine's own, so a mix-up shows. */
function scaling(factor: number, config: ModelConfig = {}): ModelDefinition {
  const scale = (requests: InferRequest[]): InferResult[] =>
    requests.map((r) => ({
      y: ndarray((r.data.x!.data as Float32Array).map((v) => v * factor), r.data.x!.shape),
    }));
  return {
    name: "m",
    version: 1,
    strict: false,
    inputs: resolveTensorSpecs([{ name: "x", dtype: "float32", shape: [-1] }], "input"),
    outputs: resolveTensorSpecs([{ name: "y", dtype: "float32", shape: [-1] }], "output"),
    config: resolveModelConfig({ maxBatchSize: 8, ...config }),
    instances: new MainThreadInstances([scale, scale]),
  };
}

function engineWith(options: NativeEngineOptions = {}): NativeEngine {
  // The core's lines go to the engine's own logger: here, nowhere.
  return new NativeEngine({
    install: install!,
    exitTimeoutSecs: 5,
    logFile: "/dev/null",
    ...options,
  });
}

async function infer(engine: NativeEngine, values: number[]): Promise<number[]> {
  const response = await engine.infer({
    modelName: "m",
    parameters: {},
    inputs: new Map([["x", ndarray(new Float32Array(values), [1, values.length])]]),
  });
  return [...(hostTensor(response.outputs.get("y")!, "y").data as Float32Array)];
}

// Servers are created and deleted while others start, load and serve. Each server asks for a
// pinned pool, as every server does by default on a GPU host: the core creates that pool
// process-wide in `ServerNew` and frees it in any server's delete, without a lock, and a delete
// inside a create's window crashed the process (SIGSEGV in
// `PinnedMemoryManager::AddPinnedMemoryBuffer`) until the bridge serialized them. Without a GPU
// the core only warns that it cannot pin memory, and the window is shorter; 8 lanes of 30 bare
// starts and stops crashed a run every time (3 of 3) before the fix.
Deno.test({
  name: "several Triton engines start, serve and stop at once in one process, many times",
  ignore,
  async fn(): Promise<void> {
    const pinned = { pinnedMemoryPoolByteSize: 1 << 28 };
    const SERVING = 4;
    const ROUNDS = 4;
    const REQUESTS = 24;
    const BARE = 4;
    const BARE_ROUNDS = 40;
    let served = 0;
    let bare = 0;
    const serving = async (lane: number): Promise<void> => {
      for (let round = 0; round < ROUNDS; round++) {
        const factor = 10 * (lane + 1) + round;
        const engine = engineWith(pinned);
        await engine.start();
        try {
          await engine.loadModel(scaling(factor));
          // Requests at once, so the core batches them while other servers come and go.
          const results = await Promise.all(
            Array.from({ length: REQUESTS }, (_, i) => infer(engine, [i, -i])),
          );
          results.forEach((y, i) => assert.deepEqual(y, [i * factor, -i * factor]));
          served += results.length;
        } finally {
          await engine.stop();
        }
        assert.equal(engine.isLive(), false);
      }
    };
    const starting = async (): Promise<void> => {
      for (let round = 0; round < BARE_ROUNDS; round++) {
        const engine = engineWith(pinned);
        await engine.start();
        await engine.stop();
        bare++;
      }
    };
    await watchdog(
      Promise.all([
        ...Array.from({ length: SERVING }, (_, lane) => serving(lane)),
        ...Array.from({ length: BARE }, starting),
      ]),
      "the engines",
      240_000,
    );
    assert.equal(served, SERVING * ROUNDS * REQUESTS);
    assert.equal(bare, BARE * BARE_ROUNDS);
  },
});

// The core's log file is process-wide and follows the newest engine; a load's lines must still
// reach the engine that loads (its error carries the core's reasons), whichever engine started
// last.
Deno.test({
  name: "several Triton engines: a failed load says why while a newer engine holds the log",
  ignore,
  async fn(): Promise<void> {
    const older = engineWith();
    await older.start();
    const newer = engineWith();
    try {
      await newer.start();
      // bind() refuses this combination; straight to the engine, only the core can refuse it.
      const model = scaling(2);
      const config = {
        ...model.config,
        batcher: {
          ...model.config.batcher,
          preserveOrdering: true,
          priorityLevels: 2,
          defaultPriorityLevel: 1,
        },
      };
      await assert.rejects(older.loadModel({ ...model, config }), {
        name: "InferenceError",
        code: "INTERNAL",
        message:
          "Failed to load model 'm' version 1: failed to load 'm', failed to poll from model repository (the Triton core: Poll failed for model directory 'm': Only one priority level is allowed when 'preserve_ordering' is true for m)",
      });
      // Both keep serving their own model.
      await older.loadModel(scaling(2));
      await newer.loadModel(scaling(3));
      assert.deepEqual(await infer(older, [1, 2]), [2, 4]);
      assert.deepEqual(await infer(newer, [1, 2]), [3, 6]);
    } finally {
      await newer.stop();
      await older.stop();
    }
  },
});

// The core keeps one response cache manager per process, created by the first server alive with
// that server's cache directory, and holding at most one cache until no server is left. This
// needs a process where no other server lives: a process of its own.
testInOwnProcess({
  name: "several Triton engines: the core's one response cache per process",
  file: import.meta.url,
  ignore,
  fn: async () => {
    const cached = { responseCacheByteSize: 1 << 20 };
    const first = engineWith();
    await first.start();
    const second = engineWith(cached);
    try {
      // A server without a cache started first: the cache of a later one is found all the same
      // (the core looked in its default directory, /opt/tritonserver/caches, before the fix).
      await second.start();
      let calls = 0;
      const model = scaling(5, { responseCache: true });
      const counted = (requests: InferRequest[]): InferResult[] => {
        calls++;
        return requests.map((r) => ({ y: r.data.x! }));
      };
      await second.loadModel({ ...model, instances: new MainThreadInstances([counted]) });
      for (let i = 0; i < 3; i++) assert.deepEqual(await infer(second, [7]), [7]);
      assert.equal(calls, 1);
      // A second cache while the first is held: a clear refusal, and the process serves on.
      const third = engineWith(cached);
      await assert.rejects(
        third.start(),
        (error: unknown) =>
          error instanceof InferenceError && error.code === "UNAVAILABLE" &&
          error.message ===
            "Cannot start the Triton server with a response cache: the Triton core holds one response cache per process, and another server of this process holds it (it stays taken until no Triton-engine server is left in the process); stop the other Triton-engine servers of this process first, or serve this one from a process of its own",
      );
      await third.stop();
      assert.deepEqual(await infer(second, [7]), [7]);
    } finally {
      await second.stop();
      await first.stop();
    }
    // No server left: the next one gets the cache.
    const last = engineWith(cached);
    await last.start();
    await last.stop();
  },
});
