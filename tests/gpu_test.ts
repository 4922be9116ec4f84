// GPU placement on both engines: instance groups in /v2/models/<m>/config, the bind-time error
// for a GPU the host lacks, and the device each Worker has current. On a host without GPUs, the
// KIND_GPU cases run on the built-in engine with a given GPU inventory, the Triton engine's with
// the core's own refusal, and the Workers' with a stand-in CUDA driver (tests/_gpu/); what needs
// a real GPU is skipped with a message.

import assert from "node:assert/strict";
import {
  type BindOptions,
  discoverGpus,
  type GpuDevice,
  type GpuInventory,
  type InferCallable,
  workers,
} from "../mod.ts";
import { MainThreadInstances } from "../src/instances/main_thread.ts";
import { ENGINES, startServer } from "./_helpers.ts";
import { buildStandInDriver, standInMissing } from "./_gpu/stand_in.ts";

const HOST = discoverGpus();
const NO_GPU = `GPU path not verified: this host has no GPUs (${HOST.reason})`;

const copy: InferCallable = (requests) => requests.map((request) => ({ y: request.data.x! }));

function model(name: string, devices: string[]): BindOptions {
  return {
    modelName: name,
    inferFunc: new MainThreadInstances(devices.map(() => copy), { devices }),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 4 },
  };
}

function group(name: string, kind: "KIND_CPU" | "KIND_GPU", gpus: number[]): unknown {
  return {
    name,
    kind,
    count: 1,
    gpus,
    secondary_devices: [],
    profile: [],
    passive: false,
    host_policy: "",
  };
}

async function instanceGroups(http: string, name: string): Promise<unknown> {
  const response = await fetch(`${http}/v2/models/${name}/config`);
  assert.equal(response.status, 200);
  return (await response.json()).instance_group;
}

async function infer(http: string, name: string, value: number): Promise<Response> {
  return await fetch(`${http}/v2/models/${name}/infer`, {
    method: "POST",
    body: JSON.stringify({
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [value] }],
    }),
  });
}

const FAKE: GpuDevice = {
  index: 0,
  name: "Given GPU",
  totalMemoryBytes: 2 ** 34,
  computeCapability: [9, 0],
  uuid: "",
};
const ONE_GPU: GpuInventory = { devices: [FAKE] };

for (const engine of ENGINES) {
  Deno.test(`without GPUs, instances pinned to cuda:N are KIND_CPU groups, one per instance [${engine}]`, async () => {
    await using triton = await startServer({
      engine,
      gpus: { devices: [] },
      models: [model("NoGpus", ["cuda:0", "cpu", "cuda"])],
    });
    const http = triton.urls.http!;
    assert.deepEqual(await instanceGroups(http, "NoGpus"), [
      group("NoGpus_0", "KIND_CPU", []),
      group("NoGpus_1", "KIND_CPU", []),
      group("NoGpus_2", "KIND_CPU", []),
    ]);
    const answer = await infer(http, "NoGpus", 3);
    assert.equal(answer.status, 200);
    assert.deepEqual((await answer.json()).outputs[0].data, [3]);
  });
}

for (const engine of ENGINES) {
  Deno.test(`a cuda:N beyond the host's GPUs fails the load, naming both [${engine}]`, async () => {
    await using triton = await startServer({ engine, gpus: ONE_GPU });
    await assert.rejects(triton.bind(model("Beyond", ["cpu", "cuda:1"])), {
      message:
        "Cannot load model 'Beyond': instance 1 is pinned to cuda:1 but this host has 1 GPU (cuda:0)",
    });
    const ready = await fetch(`${triton.urls.http}/v2/models/Beyond/ready`);
    await ready.body?.cancel();
    assert.notEqual(ready.status, 200);
  });
}

Deno.test("with GPUs, the built-in engine reports KIND_GPU groups on their GPU", async () => {
  await using triton = await startServer({
    engine: "builtin",
    gpus: { devices: [FAKE, { ...FAKE, index: 1 }] },
    models: [model("TwoGpus", ["cuda:1", "cpu", "gpu"])],
  });
  assert.deepEqual(await instanceGroups(triton.urls.http!, "TwoGpus"), [
    group("TwoGpus_0", "KIND_GPU", [1]),
    group("TwoGpus_1", "KIND_CPU", []),
    group("TwoGpus_2", "KIND_GPU", [0]),
  ]);
});

if (ENGINES.includes("triton")) {
  Deno.test("with GPUs, the Triton engine hands the core KIND_GPU groups", async () => {
    if (HOST.devices.length === 0) {
      // The core finds no GPU 0 here: its refusal shows it was asked for a KIND_GPU instance.
      await using triton = await startServer({ engine: "triton", gpus: ONE_GPU });
      await assert.rejects(
        triton.bind(model("CoreGpu", ["cuda:0", "cpu"])),
        /instance group CoreGpu_0 of model CoreGpu specifies invalid or unsupported gpu id 0/,
      );
      console.log(NO_GPU);
      return;
    }
    await using triton = await startServer({
      engine: "triton",
      models: [model("CoreGpu", ["cuda:0", "cpu"])],
    });
    const http = triton.urls.http!;
    assert.deepEqual(await instanceGroups(http, "CoreGpu"), [
      group("CoreGpu_0", "KIND_GPU", [0]),
      group("CoreGpu_1", "KIND_CPU", []),
    ]);
    const answer = await infer(http, "CoreGpu", 5);
    assert.equal(answer.status, 200);
    assert.deepEqual((await answer.json()).outputs[0].data, [5]);
  });
}

for (const engine of ENGINES) {
  Deno.test({
    name: `on this host's GPUs, both engines report the same KIND_GPU groups [${engine}]`,
    ignore: HOST.devices.length === 0,
    async fn(): Promise<void> {
      await using triton = await startServer({
        engine,
        models: [model("HostGpus", ["cuda:0", "cpu"])],
      });
      assert.deepEqual(await instanceGroups(triton.urls.http!, "HostGpus"), [
        group("HostGpus_0", "KIND_GPU", [0]),
        group("HostGpus_1", "KIND_CPU", []),
      ]);
    },
  });
}
if (HOST.devices.length === 0) {
  Deno.test({ name: `the host-GPU tests are skipped: ${NO_GPU}`, ignore: true, fn(): void {} });
}

const WORKER_MODULE = new URL("./_gpu/device_instance.ts", import.meta.url);

function whoModel(name: string, devices: string[], driver: string): BindOptions {
  return {
    modelName: name,
    inferFunc: workers(WORKER_MODULE, { devices, data: driver }),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [
      { name: "y", dtype: "float32", shape: [-1] },
      { name: "who", dtype: "bytes", shape: [1] },
    ],
    config: { maxBatchSize: 4 },
  };
}

/** `who` of each instance, asking until every instance answered (bounded). */
async function whoAnswers(http: string, name: string, count: number): Promise<string[]> {
  const seen = new Set<string>();
  for (let round = 0; round < 50 && seen.size < count; round++) {
    const answers = await Promise.all(
      Array.from({ length: count * 2 }, (_, i) => infer(http, name, i)),
    );
    for (const answer of answers) {
      assert.equal(answer.status, 200);
      const body = await answer.json();
      seen.add(body.outputs.find((o: { name: string }) => o.name === "who").data[0]);
    }
  }
  return [...seen].sort();
}

const standIn = await buildStandInDriver();

Deno.test({
  name: "each GPU Worker has its GPU current before its factory runs (stand-in CUDA driver)",
  ignore: standIn === undefined,
  async fn(): Promise<void> {
    const gpus = discoverGpus({ driverLibrary: standIn! });
    assert.equal(gpus.devices.length, 2);
    await using triton = await startServer({
      engine: "builtin",
      gpus,
      models: [whoModel("Current", ["cuda:1", "cuda", "cpu"], standIn!)],
    });
    assert.deepEqual(await whoAnswers(triton.urls.http!, "Current", 3), [
      "cpu|-|-|-|-",
      "cuda:0|0|Stand-in GPU 0|0|0",
      "cuda:1|1|Stand-in GPU 1|1|1",
    ]);
  },
});

Deno.test({
  name: "a GPU Worker whose inventory names no driver fails to load, saying so",
  ignore: standIn === undefined,
  async fn(): Promise<void> {
    await using triton = await startServer({ engine: "builtin", gpus: ONE_GPU });
    await assert.rejects(
      triton.bind(whoModel("NoDriver", ["cuda:0"], standIn!)),
      /Instance 0 \(cuda:0\) of model 'NoDriver' failed to load .*: TritonError: Cannot make cuda:0 current: the GPU inventory names no CUDA driver library/,
    );
  },
});

for (const engine of ENGINES) {
  Deno.test({
    name: `on this host's GPUs, each Worker has its GPU current [${engine}]`,
    ignore: HOST.devices.length === 0,
    async fn(): Promise<void> {
      await using triton = await startServer({
        engine,
        models: [whoModel("HostCurrent", ["cuda:0", "cpu"], HOST.driverLibrary!)],
      });
      const name = HOST.devices[0]!.name;
      assert.deepEqual(await whoAnswers(triton.urls.http!, "HostCurrent", 2), [
        "cpu|-|-|-|-",
        `cuda:0|0|${name}|0|0`,
      ]);
    },
  });
}

if (standIn === undefined) {
  Deno.test({
    name: `the stand-in CUDA driver tests are skipped: ${standInMissing}`,
    ignore: true,
    fn(): void {},
  });
}
