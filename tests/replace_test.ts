// Live model replacement on both engines: clients loop over HTTP and gRPC while `replace()` swaps
// the model 20 times (every other swap a new version): no request fails, every client sees each
// new model's answers after its swap, and never an old one again; a replacement that fails to
// load leaves the old model serving; a bind() while the server starts loads the model once.
// Waits are bounded by watchdogs; nothing is timed.

import assert from "node:assert/strict";
import { type BindOptions, ndarray, Triton } from "../mod.ts";
import { ModelClient } from "../src/client/mod.ts";
import { ENGINES, startServer, watchdog } from "./_helpers.ts";

/**
 * `Scale`: y = factor * x, version `version`. Each batch waits a millisecond, so requests are in
 * flight, queued and running, whenever a swap happens.
 */
function scale(factor: number, version: number, extra: Partial<BindOptions> = {}): BindOptions {
  return {
    modelName: "Scale",
    modelVersion: version,
    inferFunc: async (requests) => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return requests.map(({ data: { x } }) => ({
        y: ndarray((x!.data as Float32Array).map((v) => v * factor), x!.shape),
      }));
    },
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 8 },
    ...extra,
  };
}

const X = ndarray(new Float32Array([1]), [1, 1]);

/** One client calling `Scale` in a loop until stopped, recording what it saw. */
class ClientLoop {
  /** The factor of each answer, in order. */
  readonly seen: number[] = [];
  /** The message of each failed request. */
  readonly failures: string[] = [];
  readonly done: Promise<void>;
  #running = true;

  constructor(url: string) {
    this.done = this.#loop(url);
  }

  get latest(): number | undefined {
    return this.seen.at(-1);
  }

  async #loop(url: string): Promise<void> {
    await using client = new ModelClient(url, "Scale", { initTimeoutS: 30 });
    while (this.#running) {
      try {
        const { y } = await client.inferBatch({ x: X });
        this.seen.push((y!.data as Float32Array)[0]!);
      } catch (error) {
        this.failures.push(error instanceof Error ? error.message : String(error));
      }
    }
  }

  stop(): Promise<void> {
    this.#running = false;
    return this.done;
  }
}

/** Resolves once `condition` holds, looking every millisecond (under the caller's watchdog). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 1));
}

/** An HTTP JSON inference of `Scale`: the version that answered and `y`. */
async function httpInfer(url: string): Promise<{ status: number; version: string; y: number[] }> {
  const response = await fetch(`${url}/v2/models/Scale/infer`, {
    method: "POST",
    body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }] }),
  });
  const body = await response.json();
  return { status: response.status, version: body.model_version, y: body.outputs?.[0]?.data };
}

async function grpcInfer(client: ModelClient): Promise<number[]> {
  const { y } = await client.inferBatch({ x: X });
  return Array.from(y!.data as Float32Array);
}

async function httpIndex(url: string): Promise<unknown> {
  const response = await fetch(`${url}/v2/repository/index`, { method: "POST" });
  return await response.json();
}

for (const engine of ENGINES) {
  Deno.test(`20 live replacements under HTTP and gRPC client loops fail no request [${engine}]`, async () => {
    await using triton = await startServer({
      engine,
      models: [scale(1, 1)],
      config: { allowMetrics: false },
    });
    const { http, grpc } = triton.urls;
    const loops = [http!, grpc!, http!, grpc!].map((url) => new ClientLoop(url));
    await using grpcClient = new ModelClient(grpc!, "Scale", { initTimeoutS: 30 });
    try {
      await watchdog(until(() => loops.every((loop) => loop.latest === 1)), "the first answers");
      let version = 1;
      for (let swap = 1; swap <= 20; swap++) {
        // Odd swaps bring a new version; even ones replace the version that serves.
        if (swap % 2 === 1) version++;
        const factor = swap + 1;
        await watchdog(triton.replace(scale(factor, version)), `replacement ${swap}`);
        // Requests sent after replace() resolved get the new model, on both protocols.
        assert.deepEqual(await httpInfer(http!), {
          status: 200,
          version: String(version),
          y: [factor],
        });
        assert.deepEqual(await grpcInfer(grpcClient), [factor]);
        await watchdog(
          until(() => loops.every((loop) => loop.latest === factor)),
          `every client's answer from replacement ${swap}`,
        );
      }
    } finally {
      await Promise.all(loops.map((loop) => loop.stop()));
    }
    for (const loop of loops) {
      assert.deepEqual(loop.failures, []);
      // In order: each model's answers came after the last one's, and every model answered.
      const changes = loop.seen.filter((factor, i) => i === 0 || factor !== loop.seen[i - 1]);
      assert.deepEqual(changes, Array.from({ length: 21 }, (_, i) => i + 1));
    }
    assert.deepEqual(await httpIndex(http!), [{ name: "Scale", version: "11", state: "READY" }]);
    // The replaced versions are gone: a request naming one is answered like an unknown version.
    const old = await fetch(`${http}/v2/models/Scale/versions/10`);
    assert.deepEqual({ status: old.status, body: await old.json() }, {
      status: 404,
      body: { error: "Request for unknown model: 'Scale' version 10 is not found" },
    });
  });

  Deno.test(`a replacement that fails to load leaves the old model serving [${engine}]`, async () => {
    await using triton = await startServer({
      engine,
      models: [scale(2, 1)],
      config: { allowGrpc: false, allowMetrics: false },
    });
    const http = triton.urls.http!;
    // A strict model whose warm-up fails does not load.
    const failing = scale(3, 2, {
      strict: true,
      inferFunc: () => {
        throw new Error("no weights");
      },
      config: {
        maxBatchSize: 8,
        warmup: [{
          name: "w",
          batchSize: 1,
          inputs: { x: { dtype: "float32", shape: [1], zeroData: true } },
        }],
      },
    });
    await assert.rejects(triton.replace(failing), {
      name: "InferenceError",
      message: /^Failed to load model 'Scale' version 2: .*no weights/,
    });
    assert.deepEqual(await httpInfer(http), { status: 200, version: "1", y: [2] });
    assert.deepEqual(await httpIndex(http), [{ name: "Scale", version: "1", state: "READY" }]);
    await triton.replace(scale(4, 2));
    assert.deepEqual(await httpInfer(http), { status: 200, version: "2", y: [4] });
  });

  Deno.test(`bind() while the server starts loads the model once [${engine}]`, async () => {
    let warmups = 0;
    const counted = scale(5, 1, {
      inferFunc: (requests) => {
        // Only the warm-up sends a zero: one warm-up per load.
        if ((requests[0]!.data.x!.data as Float32Array)[0] === 0) warmups++;
        return requests.map(({ data: { x } }) => ({
          y: ndarray((x!.data as Float32Array).map((v) => v * 5), x!.shape),
        }));
      },
      config: {
        maxBatchSize: 8,
        warmup: [{
          name: "w",
          batchSize: 1,
          inputs: { x: { dtype: "float32", shape: [1], zeroData: true } },
        }],
      },
    });
    const triton = new Triton({
      engine,
      securityConfig: { restrictedEndpoints: [] },
      config: { httpAddress: "127.0.0.1", httpPort: 0, allowGrpc: false, allowMetrics: false },
    });
    try {
      const running = triton.run();
      const bound = triton.bind(counted);
      await watchdog(Promise.all([running, bound]), "the start and the bind");
      assert.equal(warmups, 1);
      const http = triton.urls.http!;
      assert.deepEqual(await httpInfer(http), { status: 200, version: "1", y: [5] });
      assert.deepEqual(await httpIndex(http), [{ name: "Scale", version: "1", state: "READY" }]);
      await triton.unbind("Scale");
      assert.deepEqual(await httpIndex(http), []);
    } finally {
      await triton.stop();
    }
  });
}

Deno.test("replace() before run swaps the bound model; an unbound name is bound", async () => {
  await using triton = new Triton({
    engine: "builtin",
    securityConfig: { restrictedEndpoints: [] },
    config: { httpAddress: "127.0.0.1", httpPort: 0, allowGrpc: false, allowMetrics: false },
  });
  await triton.replace(scale(2, 1)); // nothing bound: binds
  await triton.replace(scale(3, 4));
  assert.throws(() => triton.replace({ ...scale(5, 1), modelName: "scale" }), {
    name: "TritonInvalidOperationError",
    message: "Cannot replace model 'scale': it is bound as 'Scale' (replace it under that name)",
  });
  await triton.run();
  const http = triton.urls.http!;
  assert.deepEqual(await httpInfer(http), { status: 200, version: "4", y: [3] });
  assert.deepEqual(await httpIndex(http), [{ name: "Scale", version: "4", state: "READY" }]);
  await triton.stop();
  assert.throws(() => triton.bind(scale(6, 4)), {
    name: "TritonInvalidOperationError",
    message:
      "Cannot bind model 'Scale': version 4 is bound already (replace() serves a new model in its place)",
  });
});
