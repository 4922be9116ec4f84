import assert from "node:assert/strict";
import type { InferRequest } from "../callable/types.ts";
import { resolveModelConfig } from "../config/model_config.ts";
import { Logger } from "../log.ts";
import { ndarray } from "../tensor/ndarray.ts";
import { workers } from "./workers.ts";
import type { ModelInfo } from "../config/model_info.ts";
import type { NDArray } from "../tensor/ndarray.ts";

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

Deno.test("workers: inputs move or are copied once, outputs move back", async () => {
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
    // The whole buffer was moved to the Worker (detached here), the view was copied.
    assert.equal(whole.byteLength, 0);
    assert.equal(view.byteLength, 8);
    assert.deepEqual({ ...provider.stats }, {
      batches: 1,
      requests: 2,
      inputCopiedBytes: 8 + 10, // the view, and the packed BYTES (2 prefixes + 2 bytes)
      inputMovedBytes: 16,
      inputNativeBytes: 0,
      outputCopiedBytes: 10, // the BYTES output is packed again; y arrays move
      outputMovedBytes: 16 + 8,
    });
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
