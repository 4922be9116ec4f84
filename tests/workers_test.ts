/**
 * Worker instances end to end on both engines: factory contexts, concurrent batches (proved by
 * overlap, not timing), crash → failed batch → restart, not-ready when no instance is alive, load
 * failures, and device strings on a host without GPUs.
 */

import assert from "node:assert/strict";
import { type BindOptions, workers } from "../mod.ts";
import { ENGINES, startServer, watchdog } from "./_helpers.ts";

const MODULE = new URL("./_workers/instance.ts", import.meta.url);
const STEPS = new URL("./_workers/steps.ts", import.meta.url);
const HANG = new URL("./_workers/hang.ts", import.meta.url);

function model(name: string, inferFunc: BindOptions["inferFunc"]): BindOptions {
  return {
    modelName: name,
    inferFunc,
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }, {
      name: "who",
      dtype: "bytes",
      shape: [1],
    }],
    config: { maxBatchSize: 1 },
  };
}

interface Answer {
  status: number;
  body: {
    error?: string;
    outputs?: { name: string; data: (number | string)[] }[];
  };
}

async function infer(
  http: string,
  name: string,
  x: number[],
  parameters: Record<string, boolean> = {},
): Promise<Answer> {
  const response = await fetch(`${http}/v2/models/${name}/infer`, {
    method: "POST",
    body: JSON.stringify({
      inputs: [{ name: "x", datatype: "FP32", shape: [1, x.length], data: x }],
      parameters,
    }),
  });
  return { status: response.status, body: await response.json() };
}

function output(answer: Answer, name: string): (number | string)[] {
  const found = answer.body.outputs?.find((o) => o.name === name);
  assert.ok(found, `no output ${name} in ${JSON.stringify(answer.body)}`);
  return found.data;
}

async function ready(http: string, name: string): Promise<boolean> {
  const response = await fetch(`${http}/v2/models/${name}/ready`);
  await response.body?.cancel();
  return response.status === 200;
}

/** Polls until `check` holds (bounded by iterations, not by a timed assertion). */
async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`Gave up waiting until ${what}`);
}

for (const engine of ENGINES) {
  Deno.test(`workers on the ${engine} engine: contexts, devices and concurrent batches`, async () => {
    const sab = new SharedArrayBuffer(8);
    const flags = new Int32Array(sab);
    const devices = ["cuda:0", "cuda:1", "cpu"];
    await using triton = await startServer({
      engine,
      // The contexts, not the GPUs, are under test: the same on every host (tests/gpu_test.ts
      // has the GPU cases).
      gpus: { devices: [] },
      models: [model("Pinned", workers(MODULE, { devices, data: sab }))],
    });
    const http = triton.urls.http!;
    // Each batch waits until all three have started: only three concurrent Workers finish.
    const answers = [1, 2, 3].map((v) => infer(http, "Pinned", [v], { wait: true }));
    await until(() => Atomics.load(flags, 0) === 3, "three batches run at once");
    Atomics.store(flags, 1, 1);
    Atomics.notify(flags, 1);
    const done = await Promise.all(answers);
    done.forEach((answer, i) => {
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      assert.deepEqual(output(answer, "y"), [2 * (i + 1)]);
    });
    assert.deepEqual(done.map((a) => output(a, "who")[0]).sort(), [
      "cpu|cpu|-1|2|Pinned|1|0",
      "cuda:0|gpu|0|0|Pinned|1|0",
      "cuda:1|gpu|1|1|Pinned|1|0",
    ]);
    assert.equal(await ready(http, "Pinned"), true);
  });

  Deno.test(`workers on the ${engine} engine: a crash fails the batch and restarts`, async () => {
    const sab = new SharedArrayBuffer(8);
    const provider = workers(MODULE, { count: 1, data: sab });
    await using triton = await startServer({ engine, models: [model("Crashy", provider)] });
    const http = triton.urls.http!;
    assert.equal(output(await infer(http, "Crashy", [1]), "who")[0], "cpu|cpu|-1|0|Crashy|1|0");
    const crashed = await infer(http, "Crashy", [1], { crash: true });
    assert.notEqual(crashed.status, 200);
    assert.match(crashed.body.error!, /Instance 0 \(cpu\) of model 'Crashy' crashed: .*boom/);
    // Requests sent while the restart is pending wait for it (no 503 burst).
    const meanwhile = await watchdog(
      Promise.all([1, 2, 3, 4].map((v) => infer(http, "Crashy", [v]))),
      "the requests sent during the restart",
    );
    assert.deepEqual(meanwhile.map((answer) => [answer.status, output(answer, "y")]), [
      [200, [2]],
      [200, [4]],
      [200, [6]],
      [200, [8]],
    ]);
    await until(() => ready(http, "Crashy"), "the instance is restarted");
    const after = await infer(http, "Crashy", [3]);
    assert.equal(after.status, 200, JSON.stringify(after.body));
    assert.deepEqual(output(after, "y"), [6]);
    assert.equal(output(after, "who")[0], "cpu|cpu|-1|0|Crashy|1|1");
    // A terminated Worker is handled the same way.
    provider.instances[0]!.kill();
    await until(() => ready(http, "Crashy"), "the instance is restarted again");
    assert.equal(output(await infer(http, "Crashy", [1]), "who")[0], "cpu|cpu|-1|0|Crashy|1|2");
  });

  Deno.test(`workers on the ${engine} engine: not ready once no instance is alive`, async () => {
    const sab = new SharedArrayBuffer(8);
    await using triton = await startServer({
      engine,
      models: [model("NoRestart", workers(MODULE, { count: 1, data: sab, maxRestarts: 2 }))],
    });
    const http = triton.urls.http!;
    assert.equal(await ready(http, "NoRestart"), true);
    const crashed = await infer(http, "NoRestart", [1], { crash: true });
    assert.match(crashed.body.error!, /Instance 0 \(cpu\) of model 'NoRestart' crashed/);
    assert.equal(await ready(http, "NoRestart"), false);
    // Restarts fail (the factory refuses a second start): the request waited for them, and the
    // instance stays down.
    const refused = await infer(http, "NoRestart", [1]);
    assert.equal(refused.status, 503);
    assert.match(
      refused.body.error!,
      /Instance 0 \(cpu\) of model 'NoRestart' is not available: its Worker crashed and could not be restarted/,
    );
    assert.equal(await ready(http, "NoRestart"), false);
  });

  Deno.test(`workers on the ${engine} engine: a stream cancelled mid-way ends in its Worker first`, async () => {
    const sab = new SharedArrayBuffer(12);
    const flags = new Int32Array(sab);
    await using triton = await startServer({
      engine,
      models: [{
        modelName: "Steps",
        inferFunc: workers(STEPS, { count: 1, data: sab }),
        inputs: [{ name: "n", dtype: "int32", shape: [1] }],
        outputs: [{ name: "i", dtype: "int32", shape: [1] }],
        config: { decoupled: true, batching: false },
      }],
    });
    const http = triton.urls.http!;
    const controller = new AbortController();
    const response = await fetch(`${http}/v2/models/Steps/generate_stream`, {
      method: "POST",
      body: '{"n":300}',
      signal: controller.signal,
    });
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes('"i":1,')) {
      text += (await watchdog(reader.read(), "the first steps")).value ?? "";
    }
    controller.abort();
    await reader.cancel().catch(() => {});
    // The next stream goes to the same Worker: it may start only once the cancelled one has
    // ended there (its inputs stay valid until then).
    const next = await watchdog(
      fetch(`${http}/v2/models/Steps/generate_stream`, { method: "POST", body: '{"n":2}' })
        .then((r) => r.text()),
      "the next stream",
    );
    assert.equal(
      next,
      'data: {"i":0,"model_name":"Steps","model_version":"1"}\n\n' +
        'data: {"i":1,"model_name":"Steps","model_version":"1"}\n\n',
    );
    assert.equal(Atomics.load(flags, 1), 1, "two streams ran at once in one Worker");
    assert.equal(Atomics.load(flags, 2), 0, "a step found its input changed");
    await until(() => Atomics.load(flags, 0) === 0, "no stream runs");
  });

  Deno.test(`workers on the ${engine} engine: Deno.exit() in a Worker fails its batch and restarts it`, async () => {
    await using triton = await startServer({
      engine,
      models: [{
        modelName: "Exits",
        inferFunc: workers(HANG, { count: 1 }),
        inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
        outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
        config: { maxBatchSize: 1 },
      }],
    });
    const http = triton.urls.http!;
    const sent = performance.now();
    const exited = await watchdog(infer(http, "Exits", [1], { exit: true }), "the failed request");
    const seconds = (performance.now() - sent) / 1000;
    console.log(`${engine}: the request failed ${seconds.toFixed(2)} s after it was sent`);
    assert.equal(exited.status, 503);
    assert.equal(
      exited.body.error,
      "Instance 0 (cpu) of model 'Exits' crashed: it exited (Deno.exit() or close() in the Worker)",
    );
    // The next request waits for the restart (queued, on both engines) and succeeds.
    const next = await watchdog(infer(http, "Exits", [2], { fast: true }), "the next request");
    assert.equal(next.status, 200, JSON.stringify(next.body));
    assert.deepEqual(output(next, "y"), [2]);
  });

  Deno.test(`workers on the ${engine} engine: a factory that throws fails bind`, async () => {
    await using triton = await startServer({ engine });
    await assert.rejects(
      triton.bind(model("FailsToLoad", workers(MODULE, { count: 2 }))),
      /Instance \d \(cpu\) of model 'FailsToLoad' failed to load .*instance\.ts: Error: cannot load weights/,
    );
    const http = triton.urls.http!;
    assert.equal(await ready(http, "FailsToLoad"), false);
    // The model never loaded: the server stays ready and lists nothing, on both engines alike.
    const health = await fetch(`${http}/v2/health/ready`);
    await health.body?.cancel();
    assert.equal(health.status, 200);
    const index = await fetch(`${http}/v2/repository/index`, { method: "POST", body: "{}" });
    assert.deepEqual(await index.json(), []);
  });
}
