// ModelConfig.executionTimeoutS on both engines: a batch that outlives it fails with 503 naming
// the model and the timeout; a Worker instance is replaced, a main-thread instance stays busy
// until its callable returns.

import assert from "node:assert/strict";
import { type BindOptions, type Request, workers } from "../mod.ts";
import { ENGINES, startServer, watchdog } from "./_helpers.ts";

const HANG = new URL("./_workers/hang.ts", import.meta.url);

function model(name: string, inferFunc: BindOptions["inferFunc"]): BindOptions {
  return {
    modelName: name,
    inferFunc,
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 1, executionTimeoutS: 1 },
  };
}

async function infer(
  http: string,
  name: string,
  x: number,
  parameters: Record<string, boolean> = {},
): Promise<{ status: number; body: { error?: string; outputs?: { data: number[] }[] } }> {
  const response = await fetch(`${http}/v2/models/${name}/infer`, {
    method: "POST",
    body: JSON.stringify({
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [x] }],
      parameters,
    }),
  });
  return { status: response.status, body: await response.json() };
}

for (const engine of ENGINES) {
  Deno.test(`execution timeout on the ${engine} engine: a Worker is replaced`, async () => {
    await using triton = await startServer({
      engine,
      models: [model("SlowWorker", workers(HANG, { count: 1 }))],
    });
    const http = triton.urls.http!;
    const timedOut = await watchdog(infer(http, "SlowWorker", 1), "the timed-out request");
    assert.deepEqual(timedOut, {
      status: 503,
      body: {
        error:
          "Model 'SlowWorker' version 1 did not finish within its execution timeout of 1 s (instance 0)",
      },
    });
    // The hung Worker exits and a new one serves.
    const next = await watchdog(infer(http, "SlowWorker", 2, { fast: true }), "the next request");
    assert.deepEqual(next.status, 200, JSON.stringify(next.body));
    assert.deepEqual(next.body.outputs?.[0]?.data, [2]);
  });

  Deno.test(`execution timeout on the ${engine} engine: a main-thread instance stays busy`, async () => {
    const release = Promise.withResolvers<void>();
    const calls: number[] = [];
    await using triton = await startServer({
      engine,
      models: [model("SlowMain", async (requests: Request[]) => {
        const x = (requests[0]!.data.x!.data as Float32Array)[0]!;
        calls.push(x);
        if (x === 1) await release.promise;
        return requests.map((r) => ({ y: r.data.x! }));
      })],
    });
    const http = triton.urls.http!;
    const timedOut = await watchdog(infer(http, "SlowMain", 1), "the timed-out request");
    assert.deepEqual(timedOut, {
      status: 503,
      body: {
        error:
          "Model 'SlowMain' version 1 did not finish within its execution timeout of 1 s (instance 0)",
      },
    });
    // The callable cannot be interrupted: the next request waits until it has returned.
    const next = infer(http, "SlowMain", 2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(calls, [1]);
    release.resolve();
    const answer = await watchdog(next, "the next request");
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.deepEqual(answer.body.outputs?.[0]?.data, [2]);
    assert.deepEqual(calls, [1, 2]);
  });
}
