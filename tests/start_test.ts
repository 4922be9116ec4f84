// Triton.start, PyTriton's `with Triton() as triton:` for `await using`: the models given up
// front are served once it resolves, a model bound later loads at once, the end of the scope
// stops the server, and a start that fails leaves nothing running (the test sanitizers check
// that no listener or timer is left).

import assert from "node:assert/strict";
import { type BindOptions, type InstanceProvider, ndarray, Triton } from "../mod.ts";
import { ModelClient } from "../src/client/mod.ts";
import { ENGINES } from "./_helpers.ts";

function doubler(name: string): BindOptions {
  return {
    modelName: name,
    inferFunc: (requests) =>
      requests.map((request) => {
        const x = request.data["x"]!;
        return { y: ndarray((x.data as Float32Array).map((v) => v * 2), x.shape) };
      }),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 4 },
  };
}

const QUIET = {
  error: (): void => {},
  warn: (): void => {},
  info: (): void => {},
  debug: (): void => {},
};

const CONFIG = {
  httpAddress: "127.0.0.1",
  httpPort: 0,
  allowGrpc: false,
  allowMetrics: false,
} as const;

async function double(url: string, model: string): Promise<number[]> {
  await using client = new ModelClient(url, model, { initTimeoutS: 10 });
  const { y } = await client.inferBatch({ x: ndarray(new Float32Array([1, 2]), [1, 2]) });
  return Array.from(y!.data as Float32Array);
}

for (const engine of ENGINES) {
  Deno.test(`Triton.start serves its models, loads a later bind at once, stops at the end of the scope [${engine}]`, async () => {
    let outside: Triton;
    {
      await using triton = await Triton.start({
        engine,
        config: CONFIG,
        logger: QUIET,
        models: [doubler("First")],
      });
      outside = triton;
      assert.equal(triton.isAlive(), true);
      assert.equal(triton.engineKind, engine);
      const http = triton.urls.http!;
      // Ready at once: the model loaded before the port opened.
      const ready = await fetch(`${http}/v2/models/First/ready`);
      assert.equal(ready.status, 200);
      await ready.body?.cancel();
      assert.deepEqual(await double(http, "First"), [2, 4]);
      await triton.bind(doubler("Later"));
      assert.deepEqual(await double(http, "Later"), [2, 4]);
    }
    assert.equal(outside.isAlive(), false);
    assert.deepEqual(outside.urls, {});
  });

  Deno.test(`Triton.start rejects when a model cannot load, and leaves nothing running [${engine}]`, async () => {
    const refused: InstanceProvider = {
      count: 1,
      devices: ["cpu"],
      start: () => Promise.reject(new Error("instance start refused on purpose")),
    };
    await assert.rejects(
      Triton.start({
        engine,
        config: CONFIG,
        logger: QUIET,
        models: [doubler("Fine"), { ...doubler("Broken"), inferFunc: refused }],
      }),
      /instance start refused on purpose/,
    );
  });
}

Deno.test("Triton.start refuses an invalid model before anything starts", async () => {
  await assert.rejects(
    Triton.start({ engine: "builtin", config: CONFIG, models: [doubler("no spaces allowed")] }),
    { name: "TritonValidationError" },
  );
});
