import assert from "node:assert/strict";
import { resolveModelConfig } from "./model_config.ts";
import {
  checkSequenceTensors,
  resolveSequenceBatching,
  type SequenceBatching,
} from "./sequence_batching.ts";

function refuses(config: SequenceBatching, message: string, maxBatchSize = 4): void {
  assert.throws(() => resolveSequenceBatching(config, { maxBatchSize }), {
    name: "TritonBadParameterError",
    message: `Invalid model config: sequenceBatching.${message}`,
  });
}

Deno.test("resolveSequenceBatching: Triton's defaults, and slots as each strategy counts them", () => {
  assert.deepEqual(resolveSequenceBatching({}, { maxBatchSize: 0 }), {
    strategy: "direct",
    maxSequenceIdleMicroseconds: 1000000,
    maxQueueDelayMicroseconds: 0,
    minimumSlotUtilization: 0,
    maxCandidateSequences: 0,
    slots: 1,
    preferredBatchSize: [],
    preserveOrdering: false,
    states: [],
  });
  assert.equal(resolveSequenceBatching({}, { maxBatchSize: 8 }).slots, 8);
  assert.equal(resolveSequenceBatching({ strategy: "oldest" }, { maxBatchSize: 8 }).slots, 8);
  assert.equal(
    resolveSequenceBatching({ strategy: "oldest", maxCandidateSequences: 3 }, { maxBatchSize: 8 })
      .slots,
    3,
  );
  const controls = resolveSequenceBatching({
    controls: {
      start: { name: "S", dtype: "bool" },
      end: { name: "E", dtype: "float32", falseTrue: [-1, 0.5] },
      correlationId: { name: "C", dtype: "bytes" },
    },
  }, { maxBatchSize: 1 });
  assert.deepEqual(controls.start, { name: "S", dtype: "bool", falseTrue: [0, 1] });
  assert.deepEqual(controls.end, { name: "E", dtype: "float32", falseTrue: [-1, 0.5] });
  assert.deepEqual(controls.correlationId, { name: "C", dtype: "bytes" });
});

Deno.test("resolveSequenceBatching refuses what Triton refuses, naming the field", () => {
  refuses(
    { strategy: "newest" as "oldest" },
    'strategy must be "direct" or "oldest", got "newest"',
  );
  refuses(
    { maxCandidateSequences: 2 },
    'maxCandidateSequences applies to the "oldest" strategy only',
  );
  refuses({ preferredBatchSize: [2] }, 'preferredBatchSize applies to the "oldest" strategy only');
  refuses(
    { strategy: "oldest", minimumSlotUtilization: 0.5 },
    'minimumSlotUtilization applies to the "direct" strategy only',
  );
  refuses(
    { maxSequenceIdleMicroseconds: -1 },
    "maxSequenceIdleMicroseconds must be an integer within [0, 2147483647000], got -1",
  );
  refuses(
    { strategy: "oldest", preferredBatchSize: [8] },
    "preferredBatchSize must be an integer within [1, 4], got 8",
  );
  refuses(
    { controls: { start: { name: "" } } },
    "controls.start.name must be a non-empty string",
  );
  refuses(
    { controls: { ready: { name: "R", dtype: "int64" as "int32" } } },
    'controls.ready.dtype must be one of bool, int32, float32, got "int64"',
  );
  refuses(
    { controls: { end: { name: "E", dtype: "int32", falseTrue: [0, 0.5] } } },
    "controls.end.falseTrue must hold integers for dtype int32, got [0,0.5]",
  );
  refuses(
    { controls: { correlationId: { name: "C", dtype: "float32" as "int32" } } },
    'controls.correlationId.dtype must be one of uint64, int64, uint32, int32, bytes, got "float32"',
  );
  refuses(
    { controls: { start: { name: "X" }, end: { name: "X" } } },
    "controls name the tensor 'X' for more than one control",
  );
  refuses(
    { states: [{ inputName: "A", outputName: "B", dtype: "int32", shape: [0] }] },
    "states[0].shape must be a list of dims >= 1 or -1, got [0]",
  );
  refuses(
    {
      states: [
        { inputName: "A", outputName: "B", dtype: "int32", shape: [1] },
        { inputName: "A", outputName: "C", dtype: "int32", shape: [1] },
      ],
    },
    "states name the inputName 'A' more than once",
  );
});

Deno.test("resolveModelConfig: one scheduler per model, and no response cache with sequences", () => {
  assert.throws(
    () => resolveModelConfig({ batcher: {}, sequenceBatching: {} }),
    {
      message:
        "Invalid model config: batcher and sequenceBatching cannot both be set (a model has one scheduler: the sequence batcher takes the place of the dynamic batcher)",
    },
  );
  assert.throws(
    () => resolveModelConfig({ responseCache: true, sequenceBatching: {} }),
    { message: "Invalid model config: responseCache cannot be enabled with sequenceBatching" },
  );
  assert.equal(resolveModelConfig({}).sequenceBatching, undefined);
});

Deno.test("checkSequenceTensors: controls and states may not take the model's own names", () => {
  const x = { name: "x", dtype: "int32" as const, shape: [1], optional: false };
  const y = { name: "y", dtype: "int32" as const, shape: [1], optional: false };
  const sequence = (config: SequenceBatching) =>
    resolveSequenceBatching(config, { maxBatchSize: 1 });
  const state = { inputName: "S", outputName: "S_OUT", dtype: "int32", shape: [1] } as const;
  checkSequenceTensors("M", sequence({ controls: { start: { name: "START" } } }), {
    inputs: [x],
    outputs: [y],
  });
  assert.throws(
    () =>
      checkSequenceTensors("M", sequence({ states: [{ ...state, outputName: "y" }] }), {
        inputs: [x],
        outputs: [y],
      }),
    {
      message:
        "Cannot bind model 'M': sequenceBatching.states[0].outputName names 'y', which is a declared output",
    },
  );
  assert.throws(
    () =>
      checkSequenceTensors(
        "M",
        sequence({ controls: { end: { name: "S" } }, states: [state] }),
        { inputs: [x], outputs: [y] },
      ),
    {
      message:
        "Cannot bind model 'M': sequenceBatching.states[0].inputName names 'S', which is a declared control input",
    },
  );
});
