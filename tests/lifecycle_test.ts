// Model lifecycle at the facade: unbind() and binding a changed model under the same name, while
// stopped and while serving; and a second server on a port another server of the process holds.

import assert from "node:assert/strict";
import { type BindOptions, ndarray, Triton, TritonInvalidOperationError } from "../mod.ts";
import { ModelClient } from "../src/client/mod.ts";
import { ENGINES, startServer } from "./_helpers.ts";

/** `Scale`: y = factor * x, or y and z = x + 1 when `plusOne` is set (a changed signature). */
function scale(factor: number, plusOne = false): BindOptions {
  return {
    modelName: "Scale",
    inferFunc: (requests) =>
      requests.map(({ data: { x } }) => {
        const values = x!.data as Float32Array;
        const y = ndarray(values.map((v) => v * factor), x!.shape);
        return plusOne ? { y, z: ndarray(values.map((v) => v + 1), x!.shape) } : { y };
      }),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [
      { name: "y", dtype: "float32", shape: [-1] },
      ...(plusOne ? [{ name: "z", dtype: "float32" as const, shape: [-1] }] : []),
    ],
    config: { maxBatchSize: 4 },
  };
}

async function call(url: string): Promise<Record<string, number[]>> {
  await using client = new ModelClient(url, "Scale", { initTimeoutS: 10 });
  const outputs = await client.inferBatch({ x: ndarray(new Float32Array([1, 2]), [1, 2]) });
  return Object.fromEntries(
    Object.entries(outputs).map((
      [name, tensor],
    ) => [name, Array.from(tensor.data as Float32Array)]),
  );
}

/** An HTTP answer's status and JSON body (a POST of a one-element `x` when `infer` is set). */
async function answer(url: string, infer = false): Promise<{ status: number; body: unknown }> {
  const body = JSON.stringify({
    inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }],
  });
  const response = await fetch(url, infer ? { method: "POST", body } : {});
  return { status: response.status, body: await response.json() };
}

for (const engine of ENGINES) {
  Deno.test(`unbind and bind a changed model while serving [${engine}]`, async () => {
    await using triton = await startServer({ engine, models: [scale(2)] });
    for (const url of [triton.urls.http!, triton.urls.grpc!]) {
      assert.deepEqual(await call(url), { y: [2, 4] });
    }
    // One rule on both engines: a version the model does not have, then an unbound name.
    assert.deepEqual(await answer(`${triton.urls.http}/v2/models/Scale/versions/3`), {
      status: 404,
      body: { error: "Request for unknown model: 'Scale' version 3 is not found" },
    });
    await triton.unbind("Scale");
    const gone = await fetch(`${triton.urls.http}/v2/models/Scale/ready`);
    await gone.body?.cancel();
    assert.notEqual(gone.status, 200);
    for (const path of ["", "/config", "/infer"]) {
      assert.deepEqual(
        await answer(`${triton.urls.http}/v2/models/Scale${path}`, path === "/infer"),
        {
          status: 404,
          body: { error: "Request for unknown model: 'Scale' is not found" },
        },
      );
    }
    await triton.bind(scale(10, true));
    for (const url of [triton.urls.http!, triton.urls.grpc!]) {
      assert.deepEqual(await call(url), { y: [10, 20], z: [2, 3] });
    }
  });

  Deno.test(`unbind while stopped, bind again, run [${engine}]`, async () => {
    await using triton = await startServer({ engine, models: [scale(2)] });
    await triton.stop();
    assert.throws(() => triton.bind(scale(3)), {
      name: "TritonInvalidOperationError",
      message:
        "Cannot bind model 'Scale': version 1 is bound already (replace() serves a new model in its place)",
    });
    await triton.unbind("scale"); // names are matched case-insensitively, as bind() does
    await triton.bind(scale(3));
    await triton.run();
    assert.deepEqual(await call(triton.urls.http!), { y: [3, 6] });
  });
}

Deno.test("unbind refuses a model that is not bound", async () => {
  const triton = new Triton({ engine: "builtin" });
  await triton.bind(scale(2));
  await assert.rejects(triton.unbind("Other"), {
    name: "TritonInvalidOperationError",
    message: "Cannot unbind model 'Other': it is not bound",
  });
  await assert.rejects(triton.unbind("Scale", 2), {
    name: "TritonInvalidOperationError",
    message: "Cannot unbind model 'Scale': version 2 is not bound",
  });
  await triton.unbind("Scale", 1);
  await assert.rejects(triton.unbind("Scale"), TritonInvalidOperationError);
});

Deno.test("a second server of the process on a held port says which to stop", async () => {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const config = {
    httpAddress: "127.0.0.1",
    httpPort: port,
    allowGrpc: false,
    allowMetrics: false,
  };
  await using first = new Triton({ engine: "builtin", config });
  await first.run();
  await using second = new Triton({ engine: "builtin", config });
  await assert.rejects(second.run(), {
    name: "TritonInvalidOperationError",
    message:
      `Cannot run the server: another Triton of this process uses port ${port} (HTTP); stop it first (await triton.stop())`,
  });
  assert.equal(first.isAlive(), true);
  await first.stop();
  await second.run();
  assert.equal(second.isAlive(), true);
});
