/**
 * The text_direction example's model: the ONNX reader and the plan of PaddleOCR's
 * text-direction classifier, the CPU backend against ONNX Runtime (the real thing, CPU) on text
 * lines rendered upright and upside down, and the model served on both engines from Worker
 * instances pinned to cuda:0 on a host without GPUs (the CPU fallback). The GPU backend's tests
 * are in text_direction_gpu_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { FONT_PATH, fontAvailable } from "../examples/ocr/render.ts";
import { CLASSIFIER_PATH, loadClassifierPlan } from "../examples/text_direction/classifier.ts";
import { renderedCrops, runClient, SAMPLE_LINES } from "../examples/text_direction/client.ts";
import { CpuBackend } from "../examples/text_direction/cpu.ts";
import { bindTextDirection } from "../examples/text_direction/model.ts";
import { readOnnx } from "../examples/text_direction/onnx.ts";
import { planModel, type Step } from "../examples/text_direction/plan.ts";
import {
  classifierInput,
  CLS_SAMPLE,
  cropToText,
  rotateHalfTurn,
} from "../examples/text_direction/preprocess.ts";

const FONT = fontAvailable();
const fontMissing = FONT ? "" : ` (skipped: no font at ${FONT_PATH})`;
/** More lines than the client's four, for the agreement with ONNX Runtime. */
const LINES = [
  ...SAMPLE_LINES,
  "Serving 42 models",
  "Total: 349.90 EUR",
  "jumps over the lazy dog",
  "HTTP and gRPC",
];

/** `count` samples of uniform noise in [-1, 1): inputs whose softmax is not saturated. */
function noise(count: number, seed: number): Float32Array {
  const out = new Float32Array(count * CLS_SAMPLE);
  let state = seed;
  for (let i = 0; i < out.length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    out[i] = (state / 2 ** 32) * 2 - 1;
  }
  return out;
}

function kindOf(step: Step): string {
  if (step.op !== "conv") return step.op;
  const shape = step.group > 1 ? "depthwise" : step.kernelHeight > 1 ? "full" : "pointwise";
  return `${shape} conv + ${step.activation.kind}`;
}

Deno.test("text_direction: the classifier's graph reads and plans into 54 convolutions with BatchNorm and activations folded in", () => {
  const model = readOnnx(Deno.readFileSync(CLASSIFIER_PATH));
  assert.equal(model.opset, 9);
  assert.deepEqual(model.inputs, [{ name: "x", dims: [-1, 3, -1, -1] }]);
  assert.deepEqual(model.outputs, [{ name: "softmax_0.tmp_0", dims: [-1, 2] }]);
  const ops = new Map<string, number>();
  for (const node of model.nodes) ops.set(node.opType, (ops.get(node.opType) ?? 0) + 1);
  assert.equal(ops.get("Conv"), 53);
  assert.equal(ops.get("BatchNormalization"), 35);
  assert.equal(ops.get("HardSigmoid"), 9);

  const plan = loadClassifierPlan();
  const counts: Record<string, number> = {};
  for (const step of plan.steps) counts[kindOf(step)] = (counts[kindOf(step)] ?? 0) + 1;
  assert.deepEqual(counts, {
    // The stem (3x3, stride 2) is the only full convolution.
    "full conv + hardswish": 1,
    "pointwise conv + relu": 12,
    "pointwise conv + hardswish": 9,
    "pointwise conv + hardsigmoid": 9,
    // 11 projections and MatMul + Add, the classifier.
    "pointwise conv + none": 12,
    "depthwise conv + relu": 3,
    "depthwise conv + hardswish": 8,
    globalAveragePool: 10,
    scale: 9,
    add: 7,
    maxPool: 1,
    softmax: 1,
  });
  assert.deepEqual(plan.input, { name: "x", buffer: 0, shape: [3, 48, 192] });
  assert.deepEqual(plan.output.shape, [2]);
  // The classifier: 200 features (after max pool and global pool) to 2 classes.
  const classifier = plan.steps.at(-2)!;
  assert.ok(classifier.op === "conv");
  assert.deepEqual([classifier.inChannels, classifier.outChannels], [200, 2]);
  // 11 buffers hold the 81 steps' outputs.
  assert.equal(plan.buffers.length, 11);
});

Deno.test("text_direction: the planner refuses what it does not know, naming the node", () => {
  const tensor = { name: "", dims: [1], data: new Float32Array([1]) };
  const node = (opType: string, inputs: string[], output: string) => ({
    name: output,
    opType,
    inputs,
    outputs: [output],
    attributes: new Map(),
  });
  const model = (nodes: ReturnType<typeof node>[]) => ({
    opset: 9,
    producer: "test",
    nodes,
    initializers: new Map([["w", { ...tensor, dims: [3, 3, 1, 1], data: new Float32Array(9) }]]),
    inputs: [{ name: "x", dims: [-1, 3, 4, 4] }],
    outputs: [{ name: "y", dims: [-1, 3, 4, 4] }],
  });
  assert.throws(
    () => planModel(model([node("Tanh", ["x"], "y")]), [3, 4, 4]),
    { message: "Cannot plan node 'y' (Tanh): the operator is not supported" },
  );
  assert.throws(
    () => planModel(model([node("Relu", ["x"], "y")]), [3, 4, 4]),
    { message: "Cannot plan node 'y' (Relu): its input is not a convolution's alone" },
  );
  assert.throws(
    () => readOnnx(new Uint8Array([0x3a, 0x02, 0x0a, 0x05])),
    /^Error: Cannot read ONNX model: /,
  );
});

Deno.test(`text_direction: the CPU backend agrees with ONNX Runtime and tells upright from upside down${fontMissing}`, async () => {
  if (!FONT) {
    assert.ok(!PEERS_REQUIRED, `The test needs the font ${FONT_PATH}`);
    return;
  }
  const crops = renderedCrops(LINES);
  const lines = crops.length;
  const input = new Float32Array((lines + 8) * CLS_SAMPLE);
  input.set(classifierInput(crops));
  input.set(noise(8, 7), lines * CLS_SAMPLE);
  const batch = lines + 8;
  const session = await ort.InferenceSession.create(CLASSIFIER_PATH, { intraOpNumThreads: 1 });
  let reference: Float32Array;
  try {
    const out = await session.run({ x: new ort.Tensor("float32", input, [batch, 3, 48, 192]) });
    reference = out["softmax_0.tmp_0"]!.data as Float32Array;
  } finally {
    await session.release();
  }
  const cpu = new CpuBackend(loadClassifierPlan());
  const ours = cpu.run(input, batch);
  assert.equal(ours.length, batch * 2);
  let maxDiff = 0;
  for (let i = 0; i < ours.length; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(ours[i]! - reference[i]!));
  }
  console.log(
    `CPU backend vs ONNX Runtime: max abs diff ${maxDiff.toExponential(2)} over ${batch} samples`,
  );
  assert.ok(maxDiff < 1e-5, `max abs diff ${maxDiff}`);
  // Noise is not text: its answers are not saturated, so the comparison above has teeth.
  assert.ok(reference.subarray(lines * 2).some((p) => p > 0.05 && p < 0.95));
  for (let i = 0; i < lines; i++) {
    const upsideDown = ours[2 * i + 1]! > ours[2 * i]!;
    assert.equal(upsideDown, i % 2 === 1, `crop ${i} (${LINES[i >> 1]}): ${ours[2 * i + 1]}`);
  }
  // One sample at a time gives the batch's answers.
  const single = cpu.run(input.subarray(3 * CLS_SAMPLE, 4 * CLS_SAMPLE), 1);
  assert.deepEqual([...single], [...ours.subarray(6, 8)]);
});

Deno.test("text_direction: a crop is cut to its dark pixels and turned a half turn", () => {
  // 4 x 3 white, with dark pixels at (1, 0) and (2, 1).
  const data = new Uint8Array(4 * 3 * 3).fill(255);
  data.fill(0, (0 * 4 + 1) * 3, (0 * 4 + 1) * 3 + 3);
  data.fill(10, (1 * 4 + 2) * 3, (1 * 4 + 2) * 3 + 3);
  const crop = cropToText({ width: 4, height: 3, data }, 0);
  assert.deepEqual([crop.width, crop.height], [2, 2]);
  assert.deepEqual([...crop.data], [0, 0, 0, 255, 255, 255, 255, 255, 255, 10, 10, 10]);
  const turned = rotateHalfTurn(crop);
  assert.deepEqual([...turned.data], [10, 10, 10, 255, 255, 255, 255, 255, 255, 0, 0, 0]);
  // Height 48 at the aspect ratio (2 x 2 → 48 x 48), the rest of the 192 columns zero; a black
  // pixel is -1, a white one 1, channels B, G, R.
  const x = classifierInput([crop]);
  assert.equal(x.length, CLS_SAMPLE);
  assert.equal(x[0], -1);
  assert.equal(x[47], 1);
  assert.equal(x[48], 0);
});

for (const engine of ENGINES) {
  Deno.test({
    name:
      `text_direction: served on the ${engine} engine from a Worker pinned to cuda:0 on a host without GPUs (the CPU), over HTTP and gRPC${fontMissing}`,
    ignore: !FONT && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      await using triton = await startServer({ engine, gpus: { devices: [] } });
      await bindTextDirection(triton);
      const crops = renderedCrops();
      const expected = new CpuBackend(loadClassifierPlan()).run(
        classifierInput(crops),
        crops.length,
      );
      for (const url of [triton.urls.http!, triton.urls.grpc!]) {
        const answers = await runClient(url, crops);
        assert.deepEqual(
          answers.map((answer) => answer.label),
          ["0", "180", "0", "180", "0", "180", "0", "180"],
        );
        assert.deepEqual(new Set(answers.map((answer) => answer.device)), new Set(["cuda:0 CPU"]));
        assert.deepEqual(answers.flatMap((answer) => answer.probs), [...expected]);
      }
    },
  });
}
