import assert from "node:assert/strict";
import { ClientValueError } from "./errors.ts";
import { parseModelConfig } from "./model_config.ts";

Deno.test("parseModelConfig() reads a normalised DenoTriton config", () => {
  const config = parseModelConfig({
    name: "AddSub",
    backend: "denotriton",
    max_batch_size: 16,
    input: [
      { name: "a", data_type: "TYPE_FP32", dims: [-1], optional: false },
      { name: "s", data_type: "TYPE_STRING", dims: ["2", "-1"], optional: true },
    ],
    output: [{ name: "add", data_type: "TYPE_INT64", dims: [1] }],
    dynamic_batching: {
      preferred_batch_size: [4, 8],
      max_queue_delay_microseconds: "100",
      preserve_ordering: true,
      priority_levels: 2,
      default_priority_level: 1,
    },
    model_transaction_policy: { decoupled: false },
    response_cache: { enable: true },
    parameters: { shared_memory: { string_value: "on" } },
  });
  assert.equal(config.name, "AddSub");
  assert.equal(config.backend, "denotriton");
  assert.equal(config.maxBatchSize, 16);
  assert.equal(config.batching, true);
  assert.equal(config.decoupled, false);
  assert.equal(config.responseCache, true);
  assert.deepEqual(config.inputs, [
    { name: "a", dtype: "float32", shape: [-1], optional: false },
    { name: "s", dtype: "bytes", shape: [2, -1], optional: true },
  ]);
  assert.deepEqual(config.outputs, [{ name: "add", dtype: "int64", shape: [1], optional: false }]);
  assert.deepEqual(config.batcher, {
    preferredBatchSize: [4, 8],
    maxQueueDelayMicroseconds: 100,
    preserveOrdering: true,
    priorityLevels: 2,
    defaultPriorityLevel: 1,
  });
  assert.deepEqual(config.parameters, { shared_memory: "on" });
});

Deno.test("parseModelConfig() reads a decoupled model without batching", () => {
  const config = parseModelConfig({
    name: "Stream",
    max_batch_size: 0,
    input: [{ name: "n", data_type: "TYPE_INT32", dims: [1] }],
    output: [],
    model_transaction_policy: { decoupled: true },
  });
  assert.equal(config.batching, false);
  assert.equal(config.batcher, undefined);
  assert.equal(config.decoupled, true);
  assert.equal(config.responseCache, false);
  assert.deepEqual(config.outputs, []);
});

Deno.test("parseModelConfig() refuses what is not a model config", () => {
  assert.throws(() => parseModelConfig([]), ClientValueError);
  assert.throws(() => parseModelConfig({ max_batch_size: -1 }), /max_batch_size is negative/);
  assert.throws(() => parseModelConfig({ max_batch_size: "x" }), /must be an integer/);
  assert.throws(
    () => parseModelConfig({ input: [{ name: "a", data_type: "TYPE_FOO", dims: [1] }] }),
    { message: `Invalid model config: input 'a' has unknown data_type "TYPE_FOO"` },
  );
  assert.throws(() => parseModelConfig({ output: [{ dims: [1] }] }), /output 0 has no name/);
});
