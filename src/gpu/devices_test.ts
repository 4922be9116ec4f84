import assert from "node:assert/strict";
import {
  describeGpus,
  type GpuDevice,
  parseDevice,
  placeInstances,
  planPlacement,
} from "./devices.ts";

const GPU: GpuDevice = {
  index: 0,
  name: "G",
  totalMemoryBytes: 80 * 2 ** 30,
  computeCapability: [9, 0],
  uuid: "",
};

Deno.test("parseDevice() takes cpu, cuda:N and PyTriton's cuda, and gpu/gpu:N", () => {
  assert.deepEqual(parseDevice("cpu"), { device: "cpu", kind: "cpu", id: -1 });
  assert.deepEqual(parseDevice("cuda"), { device: "cuda:0", kind: "gpu", id: 0 });
  assert.deepEqual(parseDevice("cuda:3"), { device: "cuda:3", kind: "gpu", id: 3 });
  assert.deepEqual(parseDevice("gpu"), { device: "cuda:0", kind: "gpu", id: 0 });
  assert.deepEqual(parseDevice("gpu:1"), { device: "cuda:1", kind: "gpu", id: 1 });
  for (const bad of ["", "CPU", "cuda:", "cuda:-1", "cuda:1.5", "gpu0", "cuda:0 ", "tpu"]) {
    assert.equal(parseDevice(bad), undefined, bad);
  }
});

Deno.test("placeInstances(): GPUs when the host has them, the CPU when it has none", () => {
  assert.deepEqual(placeInstances(["cuda:0", "cuda:1", "cpu"], 2), [0, 1, undefined]);
  assert.deepEqual(placeInstances(["cuda:0", "cuda:7", "cpu"], 0), [
    undefined,
    undefined,
    undefined,
  ]);
  assert.throws(() => placeInstances(["cpu", "cuda:2"], 2), {
    name: "TritonValidationError",
    message: "instance 1 is pinned to cuda:2 but this host has 2 GPUs (cuda:0 to cuda:1)",
  });
  assert.throws(() => placeInstances(["cuda:0", "x"], 1), {
    message:
      `instance 1 has an invalid device "x", expected "cpu", "cuda", "cuda:N", "gpu" or "gpu:N"`,
  });
});

Deno.test("planPlacement(): one log line on a CPU host, none for CPU models or with GPUs", () => {
  const lines: string[] = [];
  const logger = { info: (line: string) => lines.push(line) };
  const none = { devices: [], reason: "the CUDA driver reports no devices" };
  assert.deepEqual(planPlacement("M", ["cpu", "cpu"], { gpus: none, logger }), [
    undefined,
    undefined,
  ]);
  assert.deepEqual(planPlacement("M", ["cuda:0", "cpu"], { gpus: { devices: [GPU] }, logger }), [
    0,
    undefined,
  ]);
  assert.deepEqual(lines, []);
  planPlacement("M", ["cuda:1", "cpu", "cuda:0"], { gpus: none, logger });
  assert.deepEqual(lines, [
    "Model 'M': instances pinned to cuda:1, cuda:0 run on the CPU: no GPUs (the CUDA driver reports no devices)",
  ]);
  assert.throws(() => planPlacement("M", ["cuda:1"], { gpus: { devices: [GPU] }, logger }), {
    name: "InferenceError",
    code: "INVALID_ARG",
    message:
      "Cannot load model 'M': instance 0 is pinned to cuda:1 but this host has 1 GPU (cuda:0)",
  });
});

Deno.test("describeGpus() names each GPU with its memory and compute capability", () => {
  assert.equal(
    describeGpus([GPU, { ...GPU, index: 1, name: "H", totalMemoryBytes: 2 ** 29 }]),
    "cuda:0 G (80.0 GiB, sm_90); cuda:1 H (0.5 GiB, sm_90)",
  );
});
