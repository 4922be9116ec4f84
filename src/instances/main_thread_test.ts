import assert from "node:assert/strict";
import type { InferContext, InferRequest, InferResult } from "../callable/types.ts";
import { resolveModelConfig } from "../config/model_config.ts";
import { InferenceError, TritonValidationError } from "../errors.ts";
import { ndarray } from "../tensor/ndarray.ts";
import { MainThreadInstances } from "./main_thread.ts";
import type { NDArray } from "../tensor/ndarray.ts";

const model = {
  name: "m",
  version: 1,
  strict: false,
  inputs: [],
  outputs: [{ name: "y", dtype: "float64" as const, shape: [1], optional: false }],
  config: resolveModelConfig({ batching: false }),
};
const request: InferRequest = {
  data: {},
  parameters: {},
  requestedOutputNames: ["y"],
  signal: new AbortController().signal,
};

Deno.test("MainThreadInstances gives each instance its index and device in the context", async () => {
  const contexts: InferContext[] = [];
  const fn = (requests: InferRequest[], context: InferContext): InferResult[] => {
    contexts.push(context);
    return requests.map(() => ({ y: ndarray([context.instanceIndex]) }));
  };
  const provider = new MainThreadInstances([fn, fn], { devices: ["cuda:0", "cuda:1"] });
  assert.equal(provider.count, 2);
  const instances = await provider.start(model);
  assert.deepEqual(instances.map((i) => [i.index, i.device, i.alive]), [
    [0, "cuda:0", true],
    [1, "cuda:1", true],
  ]);
  await instances[1]!.execute([request]);
  assert.deepEqual(contexts.map((c) => [c.instanceIndex, c.device, c.model.name]), [[
    1,
    "cuda:1",
    "m",
  ]]);
  await instances[0]![Symbol.asyncDispose]();
  assert.equal(instances[0]!.alive, false);
});

Deno.test("MainThreadInstances runs one batch at a time per instance", async () => {
  const gate = Promise.withResolvers<void>();
  const started: number[] = [];
  let calls = 0;
  const fn = async (requests: InferRequest[]): Promise<InferResult[]> => {
    started.push(++calls);
    if (calls === 1) await gate.promise;
    return requests.map(() => ({ y: ndarray([calls]) }));
  };
  const [instance] = await new MainThreadInstances([fn]).start(model);
  const first = instance!.execute([request]);
  const second = instance!.execute([request]);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(started, [1]);
  gate.resolve();
  await Promise.all([first, second]);
  assert.deepEqual(started, [1, 2]);
});

Deno.test("MainThreadInstances validates results and streams steps", async () => {
  const [bad] = await new MainThreadInstances([() => [{ y: [1] }] as unknown as InferResult[]])
    .start(model);
  await assert.rejects(bad!.execute([request]), (error: unknown) => {
    assert.ok(error instanceof InferenceError);
    assert.match(error.message, /output 'y' of request 0 is an array/);
    return true;
  });
  const [streaming] = await new MainThreadInstances([function* (): Generator<InferResult[]> {
    yield [{ y: ndarray([1]) }];
    yield [{ y: ndarray([2]) }];
  }]).start({ ...model, config: resolveModelConfig({ batching: false, decoupled: true }) });
  const steps: number[] = [];
  for await (const step of streaming!.stream([request])) {
    steps.push(((step[0]!.y as NDArray).data as Float64Array)[0]!);
  }
  assert.deepEqual(steps, [1, 2]);
});

Deno.test("MainThreadInstances: a step past the execution timeout fails, the instance stays busy", async () => {
  const hang = Promise.withResolvers<void>();
  let closed = false;
  const [instance] = await new MainThreadInstances([async function* (): AsyncGenerator<
    InferResult[]
  > {
    try {
      yield [{ y: ndarray([1]) }];
      await hang.promise;
      yield [{ y: ndarray([2]) }];
    } finally {
      closed = true;
    }
  }]).start({
    ...model,
    config: resolveModelConfig({ batching: false, decoupled: true, executionTimeoutS: 0.05 }),
  });
  const steps: number[] = [];
  await assert.rejects(
    (async () => {
      for await (const step of instance!.stream([request])) {
        steps.push(((step[0]!.y as NDArray).data as Float64Array)[0]!);
      }
    })(),
    (error: unknown) => {
      assert.ok(error instanceof InferenceError);
      assert.equal(error.code, "UNAVAILABLE");
      assert.equal(
        error.message,
        "Model 'm' version 1 did not finish within its execution timeout of 0.05 s (instance 0)",
      );
      return true;
    },
  );
  assert.deepEqual(steps, [1]);
  let idle = false;
  const waiting = instance!.idle!().then(() => idle = true);
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(idle, false);
  hang.resolve();
  await waiting;
  // The step that outlived the timeout ran to its end, then the generator was closed.
  assert.equal(closed, true);
});

Deno.test("MainThreadInstances refuses bad arguments", () => {
  assert.throws(() => new MainThreadInstances([]), TritonValidationError);
  assert.throws(
    () => new MainThreadInstances([() => []], { devices: ["cpu", "cpu"] }),
    /2 devices given for 1 callables/,
  );
});
