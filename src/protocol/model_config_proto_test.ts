import assert from "node:assert/strict";
import { resolveModelConfig } from "../config/model_config.ts";
import { toTritonModelConfig } from "../config/triton_model_config.ts";
import { codecs } from "./grpc_codec.ts";
import { modelConfigToJson, modelConfigToMessage } from "./model_config_proto.ts";

Deno.test("A normalised Triton config survives JSON → protobuf → JSON", () => {
  const json = toTritonModelConfig({
    name: "m",
    version: 1,
    strict: false,
    inputs: [{ name: "a", dtype: "bytes", shape: [-1, 2], optional: true }],
    outputs: [{ name: "b", dtype: "float16", shape: [3], optional: false }],
    config: resolveModelConfig({
      maxBatchSize: 16,
      batcher: {
        maxQueueDelayMicroseconds: 100,
        priorityLevels: 2,
        defaultPriorityLevel: 1,
        priorityQueuePolicy: { 2: { timeoutAction: "DELAY", maxQueueSize: 3 } },
      },
      responseCache: true,
    }),
  }, { normalized: true, parameters: { k: "v" } });
  const bytes = codecs.ModelConfigResponse.encode({ config: modelConfigToMessage(json) });
  const back = modelConfigToJson(codecs.ModelConfigResponse.decode(bytes).config!);
  const comparable = (value: unknown): unknown => JSON.parse(JSON.stringify(value));
  for (const key of Object.keys(json)) {
    if (Array.isArray(json[key]) && (json[key] as unknown[]).length === 0) continue;
    const expected = comparable(json[key]);
    const actual = comparable(back[key]);
    if (typeof expected === "object" && expected !== null && !Array.isArray(expected)) {
      assert.deepEqual(
        actual,
        { ...(actual as object), ...(expected as object) },
        `${key} differs`,
      );
    } else if (Array.isArray(expected)) {
      (expected as Record<string, unknown>[]).forEach((item, index) => {
        const got = (actual as Record<string, unknown>[])[index];
        assert.deepEqual(got, { ...got, ...item }, `${key}[${index}] differs`);
      });
    } else {
      assert.deepEqual(actual, expected, `${key} differs`);
    }
  }
  const batching = back.dynamic_batching as Record<string, unknown>;
  assert.deepEqual(batching.priority_queue_policy, {
    "2": {
      timeout_action: "DELAY",
      default_timeout_microseconds: 0,
      allow_timeout_override: false,
      max_queue_size: 3,
    },
  });
  assert.deepEqual(back.parameters, { k: { string_value: "v" } });
});

Deno.test("modelConfigToMessage drops fields the schema does not model", () => {
  assert.deepEqual(
    modelConfigToMessage({
      name: "m",
      model_repository_agents: {},
      input: [{ name: "a", extra: 1 }],
    }),
    { name: "m", input: [{ name: "a" }] },
  );
});
