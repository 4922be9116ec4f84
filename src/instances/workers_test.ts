import assert from "node:assert/strict";
import type { InferRequest } from "../callable/types.ts";
import { resolveModelConfig } from "../config/model_config.ts";
import { Logger } from "../log.ts";
import { ndarray } from "../tensor/ndarray.ts";
import { workers } from "./workers.ts";
import type { ModelInfo } from "../config/model_info.ts";
import type { NDArray } from "../tensor/ndarray.ts";
import type { MetricChange } from "../callable/metrics.ts";

const MODULE = new URL("./_worker_test_instance.ts", import.meta.url);
const logger = new Logger({ file: Deno.makeTempFileSync() });

function modelInfo(decoupled = false): ModelInfo {
  return {
    name: "Echo",
    version: 1,
    strict: false,
    inputs: [
      { name: "x", dtype: "float32", shape: [-1], optional: false },
      { name: "s", dtype: "bytes", shape: [-1], optional: true },
    ],
    outputs: [
      { name: "y", dtype: "float32", shape: [-1], optional: false },
      { name: "t", dtype: "bytes", shape: [-1], optional: true },
    ],
    config: resolveModelConfig({ batching: false, decoupled }),
  };
}

function request(data: InferRequest["data"], outputs = ["y"]): InferRequest {
  return {
    data,
    parameters: {},
    requestedOutputNames: outputs,
    signal: new AbortController().signal,
  };
}

Deno.test("workers: a small batch and its results cross the ring, copied", async () => {
  const provider = workers(MODULE, { logger });
  const [instance] = await provider.start(modelInfo());
  try {
    const whole = new Float32Array([1, 2, 3, 4]);
    const view = new Float32Array([9, 9, 5, 6, 9]).subarray(2, 4);
    const [a, b] = await instance!.execute([
      request({ x: ndarray(whole) }),
      request({ x: ndarray(view), s: ndarray(["ab", ""]) }, ["y", "t"]),
    ]);
    assert.deepEqual([...((a!.y as NDArray).data as Float32Array)], [1, 2, 3, 4]);
    assert.deepEqual([...((b!.y as NDArray).data as Float32Array)], [5, 6]);
    assert.deepEqual(((b!.t as NDArray).data as Uint8Array[]).map((e) => [...e]), [[97, 98], []]);
    // Copied through the ring (worker_lane.ts): the caller's arrays stay as they were.
    assert.deepEqual([...whole], [1, 2, 3, 4]);
    assert.equal(view.byteLength, 8);
    assert.deepEqual({ ...provider.stats }, {
      batches: 1,
      requests: 2,
      inputCopiedBytes: 16 + 8 + 10, // x, the view, the packed BYTES (2 prefixes + 2 bytes)
      inputMovedBytes: 0,
      inputNativeBytes: 0,
      outputCopiedBytes: 16 + 8 + 10,
      outputMovedBytes: 0,
    });
  } finally {
    await instance![Symbol.asyncDispose]();
  }
});

Deno.test("workers: large inputs move or are copied once, outputs move back", async () => {
  const provider = workers(MODULE, { logger });
  const [instance] = await provider.start(modelInfo());
  try {
    // 128 KiB each: over what the ring copies (worker_lane.ts), so they go by message.
    const whole = new Float32Array(32768).fill(2);
    const view = new Float32Array(32770).fill(3).subarray(1, 32769);
    const [a, b] = await instance!.execute([
      request({ x: ndarray(whole) }),
      request({ x: ndarray(view), s: ndarray(["ab", ""]) }, ["y", "t"]),
    ]);
    assert.ok(((a!.y as NDArray).data as Float32Array).every((value) => value === 2));
    assert.ok(((b!.y as NDArray).data as Float32Array).every((value) => value === 3));
    assert.deepEqual(((b!.t as NDArray).data as Uint8Array[]).map((e) => [...e]), [[97, 98], []]);
    // The whole buffer was moved to the Worker (detached here), the view was copied.
    assert.equal(whole.byteLength, 0);
    assert.equal(view.byteLength, 131072);
    assert.deepEqual({ ...provider.stats }, {
      batches: 1,
      requests: 2,
      inputCopiedBytes: 131072 + 10, // the view, and the packed BYTES
      inputMovedBytes: 131072,
      inputNativeBytes: 0,
      outputCopiedBytes: 10, // the BYTES output is packed again; y arrays move
      outputMovedBytes: 2 * 131072,
    });
  } finally {
    await instance![Symbol.asyncDispose]();
  }
});

Deno.test("workers: a metric the callable changed is applied before its batch's results arrive", async () => {
  const changes: MetricChange[] = [];
  const provider = workers(MODULE, { logger });
  const [instance] = await provider.start(modelInfo(), {
    metrics: { apply: (change) => changes.push(change) },
  });
  try {
    // The results must not overtake the metric (posted first): they go by message, behind it.
    for (let i = 1; i <= 50; i++) {
      const before = changes.length;
      await instance!.execute([{
        ...request({ x: ndarray(new Float32Array([i])) }),
        parameters: { count: true },
      }]);
      assert.ok(changes.length > before, `no change applied by request ${i}`);
    }
  } finally {
    await instance![Symbol.asyncDispose]();
  }
});

Deno.test("workers: native inputs are read in place by address", async () => {
  const provider = workers(MODULE, { logger });
  const [instance] = await provider.start(modelInfo());
  try {
    const memory = new Float32Array([7, 8, 9]);
    const address = Deno.UnsafePointer.value(Deno.UnsafePointer.of(memory));
    const [result] = await instance!.execute([request({ x: ndarray(memory) })], [
      { x: { address: BigInt(address), byteLength: 12 } },
    ]);
    assert.deepEqual([...((result!.y as NDArray).data as Float32Array)], [7, 8, 9]);
    assert.equal(memory.byteLength, 12); // not moved
    assert.equal(provider.stats.inputNativeBytes, 12);
    assert.equal(provider.stats.inputCopiedBytes + provider.stats.inputMovedBytes, 0);
  } finally {
    await instance![Symbol.asyncDispose]();
  }
});

Deno.test("workers: decoupled steps stream back", async () => {
  const provider = workers(MODULE, { logger });
  const [instance] = await provider.start(modelInfo(true));
  try {
    const steps: number[] = [];
    for await (
      const step of instance!.stream([request({ x: ndarray(new Float32Array([1, 2, 3])) })])
    ) {
      steps.push(((step[0]!.y as NDArray).data as Float32Array)[0]!);
    }
    assert.deepEqual(steps, [1, 2, 3]);
  } finally {
    await instance![Symbol.asyncDispose]();
  }
});

Deno.test("workers: a killed instance is restarted and a stopped one refuses batches", async () => {
  const provider = workers(MODULE, { logger, count: 2 });
  const instances = await provider.start(modelInfo());
  assert.deepEqual(instances.map((i) => [i.index, i.device, i.alive]), [[0, "cpu", true], [
    1,
    "cpu",
    true,
  ]]);
  provider.instances[1]!.kill();
  assert.equal(instances[1]!.alive, false);
  // The next batch waits for the restart.
  const [result] = await instances[1]!.execute([request({ x: ndarray(new Float32Array([1])) })]);
  assert.deepEqual([...((result!.y as NDArray).data as Float32Array)], [1]);
  assert.equal(instances[1]!.alive, true);
  for (const instance of instances) await instance[Symbol.asyncDispose]();
  assert.equal(instances[0]!.alive, false);
  await assert.rejects(
    instances[0]!.execute([request({ x: ndarray(new Float32Array([1])) })]),
    /Instance 0 \(cpu\) of model 'Echo' is not available: it was stopped/,
  );
});

Deno.test("workers: bad options fail at once", () => {
  assert.throws(() => workers(MODULE, { count: 0 }), /count must be a positive integer, got 0/);
  assert.throws(() => workers(MODULE, { devices: [] }), /no device given/);
  assert.throws(() => workers(MODULE, { devices: ["cuda:x"] }), {
    message:
      `Cannot create Worker instances: invalid device "cuda:x", expected "cpu", "cuda", "cuda:N", "gpu" or "gpu:N"`,
  });
  assert.throws(() => workers(MODULE, { maxRestarts: -1 }), /maxRestarts must be/);
});

Deno.test('workers: PyTriton\'s "cuda" and "gpu" name cuda:0', () => {
  assert.deepEqual(workers(MODULE, { devices: ["cuda", "gpu", "gpu:2", "cpu"] }).devices, [
    "cuda:0",
    "cuda:0",
    "cuda:2",
    "cpu",
  ]);
});

Deno.test("workers: start() refuses a GPU beyond those it is given", async () => {
  const provider = workers(MODULE, { devices: ["cuda:0", "cuda:1"], logger });
  const gpus = {
    devices: [{
      index: 0,
      name: "G",
      totalMemoryBytes: 1,
      computeCapability: [9, 0] as const,
      uuid: "",
    }],
  };
  await assert.rejects(provider.start(modelInfo(), { gpus }), {
    name: "TritonValidationError",
    message: "instance 1 is pinned to cuda:1 but this host has 1 GPU (cuda:0)",
  });
});

Deno.test("workers: a module without a factory fails to load", async () => {
  const provider = workers(new URL("./instance.ts", import.meta.url), { logger });
  await assert.rejects(
    provider.start(modelInfo()),
    /Instance 0 \(cpu\) of model 'Echo' failed to load .*instance\.ts: TritonValidationError: Invalid instance module .*: its default export must be a factory function, got undefined/,
  );
});
