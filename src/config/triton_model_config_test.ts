import assert from "node:assert/strict";
import { resolveModelConfig } from "./model_config.ts";
import { toTritonModelConfig } from "./triton_model_config.ts";

const MODEL = {
  name: "Linear",
  version: 1,
  strict: false,
  inputs: [],
  outputs: [],
  config: resolveModelConfig({ maxBatchSize: 4 }),
};

Deno.test("toTritonModelConfig(): one group per instance, KIND_GPU on hosts with GPUs", () => {
  const devices = ["cuda:1", "cpu", "cuda:0"];
  assert.deepEqual(toTritonModelConfig(MODEL, { devices, gpuCount: 2 }).instance_group, [
    { name: "Linear_0", kind: "KIND_GPU", count: 1, gpus: [1] },
    { name: "Linear_1", kind: "KIND_CPU", count: 1, gpus: [] },
    { name: "Linear_2", kind: "KIND_GPU", count: 1, gpus: [0] },
  ]);
  // Without GPUs the same instances are CPU instances.
  assert.deepEqual(toTritonModelConfig(MODEL, { devices }).instance_group, [
    { name: "Linear_0", kind: "KIND_CPU", count: 1, gpus: [] },
    { name: "Linear_1", kind: "KIND_CPU", count: 1, gpus: [] },
    { name: "Linear_2", kind: "KIND_CPU", count: 1, gpus: [] },
  ]);
});

Deno.test("toTritonModelConfig(): the normalised groups carry Triton's default fields", () => {
  const json = toTritonModelConfig(MODEL, { devices: ["cuda:0"], gpuCount: 1, normalized: true });
  assert.deepEqual(json.instance_group, [{
    name: "Linear_0",
    kind: "KIND_GPU",
    count: 1,
    gpus: [0],
    secondary_devices: [],
    profile: [],
    passive: false,
    host_policy: "",
  }]);
});

Deno.test("toTritonModelConfig(): a GPU beyond the host's is an error", () => {
  assert.throws(() => toTritonModelConfig(MODEL, { devices: ["cpu", "cuda:1"], gpuCount: 1 }), {
    name: "TritonValidationError",
    message: "instance 1 is pinned to cuda:1 but this host has 1 GPU (cuda:0)",
  });
});
