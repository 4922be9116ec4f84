// Warm-up on both engines: every stage runs `count` times on every instance before the model is
// ready, with one-sample requests of the declared dtypes and zero, random or file data; a failing
// warm-up is logged unless the model is strict.

import assert from "node:assert/strict";
import type { BindOptions, InferRequest, InferResult } from "../mod.ts";
import { ENGINES, startServer } from "./_helpers.ts";

interface Seen {
  instance: number;
  requests: number;
  shapes: number[][];
  dtypes: string[];
  values: number[][];
}

function recordingModel(seen: Seen[], extra: Partial<BindOptions> = {}): BindOptions {
  const callable = (instance: number) => (requests: InferRequest[]): InferResult[] => {
    seen.push({
      instance,
      requests: requests.length,
      shapes: requests.map((r) => [...r.data.x!.shape]),
      dtypes: requests.map((r) => r.data.x!.dtype),
      values: requests.map((r) => [...(r.data.x!.data as Int32Array)]),
    });
    return requests.map((r) => ({ y: r.data.x! }));
  };
  return {
    modelName: "Warm",
    inferFunc: [callable(0), callable(1)],
    inputs: [{ name: "x", dtype: "int32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "int32", shape: [-1] }],
    config: { maxBatchSize: 4 },
    ...extra,
  };
}

for (const engine of ENGINES) {
  Deno.test(`warmup (${engine}): zero, random and file data, count x instances`, async () => {
    const file = await Deno.makeTempFile({ suffix: ".bin" });
    try {
      // One sample of shape [3] as little-endian int32: 7, 8, 9.
      await Deno.writeFile(file, new Uint8Array(new Int32Array([7, 8, 9]).buffer));
      const seen: Seen[] = [];
      const model = recordingModel(seen, {
        config: {
          maxBatchSize: 4,
          warmup: [
            {
              name: "zeros",
              batchSize: 3,
              count: 2,
              inputs: { x: { dtype: "int32", shape: [2], zeroData: true } },
            },
            {
              name: "random",
              batchSize: 1,
              inputs: { x: { dtype: "int32", shape: [5], randomData: true } },
            },
            {
              name: "file",
              batchSize: 2,
              inputs: { x: { dtype: "int32", shape: [3], inputDataFile: file } },
            },
          ],
        },
      });
      await using triton = await startServer({
        engine,
        models: [model],
        config: { allowGrpc: false, allowMetrics: false },
      });
      // Every stage ran before ready: (2 + 1 + 1) runs on each of the 2 instances.
      assert.equal(seen.length, 8);
      for (const instance of [0, 1]) {
        const mine = seen.filter((s) => s.instance === instance);
        assert.deepEqual(mine.map((s) => s.requests), [3, 3, 1, 2]);
        assert.deepEqual(mine[0]!.shapes, [[1, 2], [1, 2], [1, 2]]);
        assert.deepEqual(mine[0]!.values, [[0, 0], [0, 0], [0, 0]]);
        assert.deepEqual(mine[2]!.shapes, [[1, 5]]);
        assert.deepEqual(mine[3]!.shapes, [[1, 3], [1, 3]]);
        assert.deepEqual(mine[3]!.values, [[7, 8, 9], [7, 8, 9]]);
        assert.ok(mine.every((s) => s.dtypes.every((d) => d === "int32")));
      }
      const ready = await fetch(`${triton.urls.http}/v2/models/Warm/ready`);
      assert.equal(ready.status, 200);
      await ready.body?.cancel();
      const config = await (await fetch(`${triton.urls.http}/v2/models/Warm/config`)).json();
      assert.equal(config.model_warmup.length, 3);
      assert.equal(config.model_warmup[0].name, "zeros");
      assert.equal(config.model_warmup[0].batch_size, 3);
      assert.equal(config.model_warmup[0].count, 2);
      assert.deepEqual(config.model_warmup[0].inputs.x.dims.map(Number), [2]);
      assert.equal(config.model_warmup[0].inputs.x.zero_data, true);
    } finally {
      await Deno.remove(file);
    }
  });

  Deno.test(`warmup (${engine}): async and generator callables really run`, async () => {
    let asyncCalls = 0;
    let steps = 0;
    const stage = {
      name: "w",
      batchSize: 1,
      count: 3,
      inputs: { x: { dtype: "float32", shape: [1], zeroData: true } },
    } as const;
    await using _triton = await startServer({
      engine,
      models: [
        {
          modelName: "Async",
          inferFunc: async (requests) => {
            await new Promise((resolve) => setTimeout(resolve, 1));
            asyncCalls++;
            return requests.map((r) => ({ y: r.data.x! }));
          },
          inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
          outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
          config: { warmup: [stage] },
        },
        {
          modelName: "Stream",
          inferFunc: async function* (requests: InferRequest[]): AsyncGenerator<InferResult[]> {
            for (let i = 0; i < 2; i++) {
              await Promise.resolve();
              steps++;
              yield requests.map((r) => ({ y: r.data.x! }));
            }
          },
          inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
          outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
          config: { decoupled: true, warmup: [stage] },
        },
      ],
      config: { allowGrpc: false, allowMetrics: false },
    });
    assert.equal(asyncCalls, 3);
    assert.equal(steps, 6);
  });

  // Warm-up runs in JS on both engines, never in the core: Triton 2.51's core faults now and
  // then when one of its own warm-up samples fails (ffi/README.md, "Known limits"). The ASan run
  // of the bridge (.ci/asan) runs this test too.
  Deno.test(`warmup (${engine}): a failing warm-up is logged, strict fails the load`, async () => {
    let calls = 0;
    const failing = (strict: boolean): BindOptions => ({
      modelName: strict ? "StrictWarm" : "LaxWarm",
      inferFunc: (requests) => {
        calls++;
        if (requests[0]!.parameters.real === undefined) throw new Error("Warm-up data refused");
        return requests.map((r) => ({ y: r.data.x! }));
      },
      inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
      outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
      config: {
        warmup: [{
          name: "bad",
          batchSize: 1,
          inputs: { x: { dtype: "float32", shape: [2], zeroData: true } },
        }],
      },
      strict,
    });
    {
      await using triton = await startServer({
        engine,
        models: [failing(false)],
        config: { allowGrpc: false, allowMetrics: false },
      });
      assert.ok(calls >= 1);
      const response = await fetch(`${triton.urls.http}/v2/models/LaxWarm/infer`, {
        method: "POST",
        body: JSON.stringify({
          parameters: { real: true },
          inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], data: [1, 2] }],
        }),
      });
      assert.equal(response.status, 200);
      assert.deepEqual((await response.json()).outputs[0].data, [1, 2]);
    }
    await assert.rejects(
      startServer({
        engine,
        models: [failing(true)],
        config: { allowGrpc: false, allowMetrics: false },
      }),
      /Warm-up data refused/,
    );
  });

  Deno.test(`warmup (${engine}): a stage that does not fit the model`, async () => {
    const model = (strict: boolean): BindOptions => ({
      modelName: "Misfit",
      inferFunc: (requests) => requests.map((r) => ({ y: r.data.x! })),
      inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
      outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
      config: {
        warmup: [{
          name: "misfit",
          batchSize: 1,
          inputs: { x: { dtype: "int32", shape: [2], zeroData: true } },
        }],
      },
      strict,
    });
    {
      await using triton = await startServer({
        engine,
        models: [model(false)],
        config: { allowGrpc: false, allowMetrics: false },
      });
      const ready = await fetch(`${triton.urls.http}/v2/models/Misfit/ready`);
      assert.equal(ready.status, 200);
      await ready.body?.cancel();
    }
    await assert.rejects(
      startServer({
        engine,
        models: [model(true)],
        config: { allowGrpc: false, allowMetrics: false },
      }),
      /Invalid warm-up 'misfit' of model 'Misfit': input 'x' has dtype int32 but the model declares float32/,
    );
  });
}
