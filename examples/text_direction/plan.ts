/**
 * The graph as a plan both backends run: a list of steps over per-sample buffers, with each
 * BatchNormalization folded into the convolution before it, and the activations after a
 * convolution (Relu, HardSigmoid, and hard-swish as the graph spells it: `x * Clip(x + 3, 0, 6) /
 * 6`) fused into it. The Shape → Cast → Slice → Concat chain that builds the Reshape's target is
 * evaluated here, with the batch size kept symbolic; MatMul + Add becomes a 1x1 convolution over a
 * 1x1 image (a GEMM either way). Anything else is refused with an error naming the node.
 *
 * Buffers are sized per sample (a batch of N needs N times the size); a value fills a buffer's
 * start, its N samples packed one after the other (NCHW). A buffer whose value no later step
 * reads holds a later step's output.
 *
 * Over 500 lines for a reason: the step types, then one pass over the graph with each operator's
 * case beside the pattern it folds or fuses, read top to bottom as the graph is.
 *
 * @module
 */

import type { OnnxModel, OnnxNode, OnnxTensor } from "./onnx.ts";

/** What follows a convolution's bias. */
export type Activation =
  | { readonly kind: "none" }
  | { readonly kind: "relu" }
  /** `max(0, min(1, alpha x + beta))` */
  | { readonly kind: "hardsigmoid"; readonly alpha: number; readonly beta: number }
  /** `x * max(0, min(1, alpha x + beta))` */
  | { readonly kind: "hardswish"; readonly alpha: number; readonly beta: number };

/** A convolution (with folded BatchNorm, bias and activation), NCHW. */
export interface ConvStep {
  readonly op: "conv";
  /** The ONNX node it came from. */
  readonly node: string;
  readonly input: number;
  readonly output: number;
  readonly inChannels: number;
  readonly outChannels: number;
  /** 1, or `inChannels` (== `outChannels`) for a depthwise convolution. */
  readonly group: number;
  readonly inHeight: number;
  readonly inWidth: number;
  readonly outHeight: number;
  readonly outWidth: number;
  readonly kernelHeight: number;
  readonly kernelWidth: number;
  readonly strideHeight: number;
  readonly strideWidth: number;
  /** Zero padding at the top (and bottom). */
  readonly padHeight: number;
  /** Zero padding at the left (and right). */
  readonly padWidth: number;
  /** `[outChannels, inChannels / group, kernelHeight, kernelWidth]`. */
  readonly weights: Float32Array;
  /** `[outChannels]`. */
  readonly bias: Float32Array;
  readonly activation: Activation;
}

/** `output = a + b`, elementwise. */
export interface AddStep {
  readonly op: "add";
  readonly node: string;
  readonly a: number;
  readonly b: number;
  readonly output: number;
  /** Floats per sample. */
  readonly size: number;
}

/** `output[c, h, w] = input[c, h, w] * scale[c]` (squeeze-and-excitation's scaling). */
export interface ScaleStep {
  readonly op: "scale";
  readonly node: string;
  readonly input: number;
  /** `[channels]` per sample. */
  readonly scale: number;
  readonly output: number;
  readonly channels: number;
  /** Pixels per channel. */
  readonly pixels: number;
}

/** The mean of each channel. */
export interface GlobalAveragePoolStep {
  readonly op: "globalAveragePool";
  readonly node: string;
  readonly input: number;
  readonly output: number;
  readonly channels: number;
  readonly pixels: number;
}

/** Max pooling without padding. */
export interface MaxPoolStep {
  readonly op: "maxPool";
  readonly node: string;
  readonly input: number;
  readonly output: number;
  readonly channels: number;
  readonly inHeight: number;
  readonly inWidth: number;
  readonly outHeight: number;
  readonly outWidth: number;
  readonly kernelHeight: number;
  readonly kernelWidth: number;
  readonly strideHeight: number;
  readonly strideWidth: number;
}

/** Softmax over each sample's `classes` values. */
export interface SoftmaxStep {
  readonly op: "softmax";
  readonly node: string;
  readonly input: number;
  readonly output: number;
  readonly classes: number;
}

/** One step of the plan. */
export type Step =
  | ConvStep
  | AddStep
  | ScaleStep
  | GlobalAveragePoolStep
  | MaxPoolStep
  | SoftmaxStep;

/** The network as steps over buffers. */
export interface Plan {
  /** The graph input's name and per-sample shape (`[C, H, W]`). */
  readonly input: { readonly name: string; readonly buffer: number; readonly shape: number[] };
  /** The graph output's name and per-sample shape. */
  readonly output: { readonly name: string; readonly buffer: number; readonly shape: number[] };
  /** Floats per sample of each buffer: the largest value it holds (values are packed). */
  readonly buffers: readonly number[];
  readonly steps: readonly Step[];
}

/** A value during planning: an activation in a buffer, or a known tensor. */
type Value =
  | { kind: "activation"; buffer: number; shape: number[]; producer: number | undefined }
  | { kind: "constant"; tensor: OnnxTensor }
  /** An integer vector whose entries may be the symbolic batch size. */
  | { kind: "shape"; values: (number | "N")[] };

const IDENTITY: Activation = { kind: "none" };

function fail(node: OnnxNode, why: string): never {
  throw new Error(`Cannot plan node '${node.name || node.outputs[0]}' (${node.opType}): ${why}`);
}

function ints(node: OnnxNode, name: string, fallback?: number[]): number[] {
  const value = node.attributes.get(name);
  if (value === undefined && fallback !== undefined) return fallback;
  if (!Array.isArray(value)) fail(node, `attribute '${name}' is missing or not a list of ints`);
  return value as number[];
}

function num(node: OnnxNode, name: string, fallback?: number): number {
  const value = node.attributes.get(name);
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== "number") fail(node, `attribute '${name}' is missing or not a number`);
  return value;
}

function scalarOf(value: Value | undefined): number | undefined {
  if (value?.kind !== "constant" || value.tensor.data.length !== 1) return undefined;
  return value.tensor.data[0];
}

/**
 * Plans a model whose input is `[N, C, H, W]` float32, for one fixed `H` and `W`.
 *
 * @param model The ONNX graph.
 * @param inputShape The per-sample input shape `[C, H, W]`.
 * @returns The plan.
 * @throws {Error} For an operator or pattern outside this model family, naming the node.
 */
export function planModel(model: OnnxModel, inputShape: readonly number[]): Plan {
  if (model.inputs.length !== 1 || model.outputs.length !== 1) {
    throw new Error(
      `Cannot plan model: it has ${model.inputs.length} inputs and ${model.outputs.length} outputs, not 1 and 1`,
    );
  }
  const values = new Map<string, Value>();
  for (const [name, tensor] of model.initializers) values.set(name, { kind: "constant", tensor });
  const consumers = new Map<string, number>();
  for (const node of model.nodes) {
    for (const input of node.inputs) consumers.set(input, (consumers.get(input) ?? 0) + 1);
  }
  const buffers: number[] = [];
  const steps: Step[] = [];
  const activation = (shape: number[], producer?: number): Value & { kind: "activation" } => {
    buffers.push(shape.reduce((a, b) => a * b, 1));
    return { kind: "activation", buffer: buffers.length - 1, shape, producer };
  };
  const inputName = model.inputs[0]!.name;
  const input = activation([...inputShape]);
  values.set(inputName, input);
  const get = (node: OnnxNode, index: number): Value => {
    const value = values.get(node.inputs[index] ?? "");
    if (value === undefined) fail(node, `input '${node.inputs[index]}' is not known`);
    return value;
  };
  const act = (node: OnnxNode, index: number): Value & { kind: "activation" } => {
    const value = get(node, index);
    if (value.kind !== "activation") fail(node, `input ${index} is not an activation`);
    return value;
  };
  const constant = (node: OnnxNode, index: number): OnnxTensor => {
    const value = get(node, index);
    if (value.kind !== "constant") fail(node, `input ${index} is not a constant`);
    return value.tensor;
  };
  /** The conv step producing `value`, when nothing else reads it and its output is still raw. */
  const fusable = (value: Value & { kind: "activation" }, name: string, readers = 1) => {
    const step = value.producer === undefined ? undefined : steps[value.producer];
    if (step?.op !== "conv" || step.activation.kind !== "none") return undefined;
    return consumers.get(name) === readers ? { step, index: value.producer! } : undefined;
  };
  const skipped = new Set<number>();

  model.nodes.forEach((node, nodeIndex) => {
    if (skipped.has(nodeIndex)) return;
    const output = node.outputs[0]!;
    switch (node.opType) {
      case "Constant": {
        const value = node.attributes.get("value");
        if (typeof value !== "object" || Array.isArray(value)) fail(node, "it has no tensor");
        values.set(output, { kind: "constant", tensor: value as OnnxTensor });
        return;
      }
      case "Conv": {
        const x = act(node, 0);
        const weights = constant(node, 1);
        const [outChannels, perGroup, kernelHeight, kernelWidth] = weights.dims as number[];
        const [inChannels, inHeight, inWidth] = x.shape as [number, number, number];
        const group = num(node, "group", 1);
        if (ints(node, "dilations", [1, 1]).some((d) => d !== 1)) fail(node, "dilation is not 1");
        const [padTop, padLeft, padBottom, padRight] = ints(node, "pads", [0, 0, 0, 0]);
        if (padTop !== padBottom || padLeft !== padRight) fail(node, "padding is not symmetric");
        if (!(group === 1 || (group === inChannels && group === outChannels && perGroup === 1))) {
          fail(node, `group ${group} is neither 1 nor depthwise`);
        }
        if (perGroup! * group !== inChannels) {
          fail(node, `weights expect ${perGroup! * group} input channels, not ${inChannels}`);
        }
        const [strideHeight, strideWidth] = ints(node, "strides", [1, 1]) as [number, number];
        const outHeight = Math.floor((inHeight + 2 * padTop! - kernelHeight!) / strideHeight) + 1;
        const outWidth = Math.floor((inWidth + 2 * padLeft! - kernelWidth!) / strideWidth) + 1;
        const bias = node.inputs.length > 2 && node.inputs[2] !== ""
          ? Float32Array.from(constant(node, 2).data)
          : new Float32Array(outChannels!);
        const y = activation([outChannels!, outHeight, outWidth], steps.length);
        steps.push({
          op: "conv",
          node: node.name || output,
          input: x.buffer,
          output: y.buffer,
          inChannels,
          outChannels: outChannels!,
          group,
          inHeight,
          inWidth,
          outHeight,
          outWidth,
          kernelHeight: kernelHeight!,
          kernelWidth: kernelWidth!,
          strideHeight,
          strideWidth,
          padHeight: padTop!,
          padWidth: padLeft!,
          weights: Float32Array.from(weights.data),
          bias,
          activation: IDENTITY,
        });
        values.set(output, y);
        return;
      }
      case "BatchNormalization": {
        const x = act(node, 0);
        const conv = fusable(x, node.inputs[0]!);
        if (conv === undefined) fail(node, "its input is not a convolution's alone");
        const [gamma, beta, mean, variance] = [1, 2, 3, 4].map((i) => constant(node, i).data);
        const epsilon = num(node, "epsilon", 1e-5);
        const { weights, bias, outChannels } = conv.step;
        const perChannel = weights.length / outChannels;
        for (let c = 0; c < outChannels; c++) {
          const scale = gamma![c]! / Math.sqrt(variance![c]! + epsilon);
          for (let i = c * perChannel; i < (c + 1) * perChannel; i++) weights[i]! *= scale;
          bias[c] = (bias[c]! - mean![c]!) * scale + beta![c]!;
        }
        values.set(output, x);
        return;
      }
      case "Relu":
      case "HardSigmoid": {
        const x = act(node, 0);
        const conv = fusable(x, node.inputs[0]!);
        if (conv === undefined) fail(node, "its input is not a convolution's alone");
        steps[conv.index] = {
          ...conv.step,
          activation: node.opType === "Relu" ? { kind: "relu" } : {
            kind: "hardsigmoid",
            alpha: num(node, "alpha", 0.2),
            beta: num(node, "beta", 0.5),
          },
        };
        values.set(output, x);
        return;
      }
      case "Add": {
        const a = get(node, 0);
        const b = get(node, 1);
        if (a.kind === "activation" && scalarOf(b) !== undefined) {
          hardSwish(node, nodeIndex, a, scalarOf(b)!);
          return;
        }
        if (a.kind === "activation" && b.kind === "activation") {
          if (a.shape.join() !== b.shape.join()) fail(node, "the shapes differ");
          const y = activation(a.shape);
          steps.push({
            op: "add",
            node: node.name || output,
            a: a.buffer,
            b: b.buffer,
            output: y.buffer,
            size: buffers[y.buffer]!,
          });
          values.set(output, y);
          return;
        }
        if (a.kind === "activation" && b.kind === "constant") {
          // MatMul's bias: fold into the 1x1 convolution MatMul became.
          const conv = fusable(a, node.inputs[0]!);
          if (conv === undefined || b.tensor.data.length !== conv.step.outChannels) {
            fail(node, "a constant is added to something other than a MatMul's output");
          }
          conv.step.bias.forEach((_, i, bias) => bias[i]! += b.tensor.data[i]!);
          values.set(output, a);
          return;
        }
        fail(node, "unsupported operands");
        break;
      }
      case "Mul": {
        const x = act(node, 0);
        const s = act(node, 1);
        if (s.shape[1] !== 1 || s.shape[2] !== 1 || s.shape[0] !== x.shape[0]) {
          fail(node, "only a per-channel scale ([N, C, 1, 1]) is supported");
        }
        const y = activation(x.shape);
        steps.push({
          op: "scale",
          node: node.name || output,
          input: x.buffer,
          scale: s.buffer,
          output: y.buffer,
          channels: x.shape[0]!,
          pixels: x.shape[1]! * x.shape[2]!,
        });
        values.set(output, y);
        return;
      }
      case "GlobalAveragePool": {
        const x = act(node, 0);
        const y = activation([x.shape[0]!, 1, 1]);
        steps.push({
          op: "globalAveragePool",
          node: node.name || output,
          input: x.buffer,
          output: y.buffer,
          channels: x.shape[0]!,
          pixels: x.shape[1]! * x.shape[2]!,
        });
        values.set(output, y);
        return;
      }
      case "MaxPool": {
        const x = act(node, 0);
        if (ints(node, "pads", [0, 0, 0, 0]).some((p) => p !== 0)) fail(node, "it pads");
        const [kernelHeight, kernelWidth] = ints(node, "kernel_shape") as [number, number];
        const [strideHeight, strideWidth] = ints(node, "strides", [1, 1]) as [number, number];
        const [channels, inHeight, inWidth] = x.shape as [number, number, number];
        const outHeight = Math.floor((inHeight - kernelHeight) / strideHeight) + 1;
        const outWidth = Math.floor((inWidth - kernelWidth) / strideWidth) + 1;
        const y = activation([channels, outHeight, outWidth]);
        steps.push({
          op: "maxPool",
          node: node.name || output,
          input: x.buffer,
          output: y.buffer,
          channels,
          inHeight,
          inWidth,
          outHeight,
          outWidth,
          kernelHeight,
          kernelWidth,
          strideHeight,
          strideWidth,
        });
        values.set(output, y);
        return;
      }
      case "Shape": {
        values.set(output, { kind: "shape", values: ["N", ...act(node, 0).shape] });
        return;
      }
      case "Cast": {
        const x = get(node, 0);
        if (x.kind === "shape") values.set(output, x);
        else if (x.kind === "constant") {
          values.set(output, { kind: "shape", values: Array.from(x.tensor.data, Math.trunc) });
        } else fail(node, "only shapes and constants are cast");
        return;
      }
      case "Slice": {
        const x = get(node, 0);
        if (x.kind !== "shape" || ints(node, "axes", [0]).join() !== "0") {
          fail(node, "only the slicing of a shape is supported");
        }
        const [start] = ints(node, "starts");
        const [end] = ints(node, "ends");
        values.set(output, { kind: "shape", values: x.values.slice(start, end) });
        return;
      }
      case "Concat": {
        const parts = node.inputs.map((_, i) => get(node, i));
        if (parts.some((part) => part.kind !== "shape")) fail(node, "only shapes are joined");
        values.set(output, {
          kind: "shape",
          values: parts.flatMap((part) => (part as { values: (number | "N")[] }).values),
        });
        return;
      }
      case "Reshape": {
        const x = act(node, 0);
        const target = get(node, 1);
        const size = buffers[x.buffer]!;
        const dims = target.kind === "shape"
          ? target.values
          : target.kind === "constant"
          ? Array.from(target.tensor.data)
          : fail(node, "the target shape is not known");
        const rest = dims.slice(1) as number[];
        if (dims[0] !== "N" || rest.reduce((a, b) => a * b, 1) !== size) {
          fail(node, `target [${dims.join(", ")}] does not keep the batch and ${size} values`);
        }
        values.set(output, { ...x, shape: rest, producer: undefined });
        return;
      }
      case "MatMul": {
        const x = act(node, 0);
        const w = constant(node, 1);
        const [inFeatures, outFeatures] = w.dims as [number, number];
        if (x.shape.length !== 1 || x.shape[0] !== inFeatures) {
          fail(node, `input [N, ${x.shape.join(", ")}] does not match weights [${w.dims}]`);
        }
        // [in, out] → [out, in, 1, 1]: a 1x1 convolution over a 1x1 image.
        const weights = new Float32Array(inFeatures * outFeatures);
        for (let i = 0; i < inFeatures; i++) {
          for (let o = 0; o < outFeatures; o++) {
            weights[o * inFeatures + i] = w.data[i * outFeatures + o]!;
          }
        }
        const y = activation([outFeatures], steps.length);
        steps.push({
          op: "conv",
          node: node.name || output,
          input: x.buffer,
          output: y.buffer,
          inChannels: inFeatures,
          outChannels: outFeatures,
          group: 1,
          inHeight: 1,
          inWidth: 1,
          outHeight: 1,
          outWidth: 1,
          kernelHeight: 1,
          kernelWidth: 1,
          strideHeight: 1,
          strideWidth: 1,
          padHeight: 0,
          padWidth: 0,
          weights,
          bias: new Float32Array(outFeatures),
          activation: IDENTITY,
        });
        values.set(output, y);
        return;
      }
      case "Softmax": {
        const x = act(node, 0);
        if (x.shape.length !== 1 || num(node, "axis", 1) !== 1) {
          fail(node, "only a softmax over the features of [N, C] is supported");
        }
        const y = activation(x.shape);
        steps.push({
          op: "softmax",
          node: node.name || output,
          input: x.buffer,
          output: y.buffer,
          classes: x.shape[0]!,
        });
        values.set(output, y);
        return;
      }
      default:
        fail(node, "the operator is not supported");
    }
  });

  /**
   * `Add(x, 3) → Clip(0, 6) → Mul(x, ·) → Div(·, 6)`: hard-swish, `x * clip(x/6 + 1/2, 0, 1)`,
   * fused into the convolution that produced `x`.
   */
  function hardSwish(
    add: OnnxNode,
    addIndex: number,
    x: Value & { kind: "activation" },
    offset: number,
  ): void {
    const next = (after: number, value: string | undefined, op: string): number =>
      model.nodes.findIndex((n, i) => i > after && n.opType === op && n.inputs.includes(value!));
    const clipIndex = next(addIndex, add.outputs[0], "Clip");
    const clip = model.nodes[clipIndex];
    const mulIndex = next(clipIndex, clip?.outputs[0], "Mul");
    const mul = model.nodes[mulIndex];
    const divIndex = next(mulIndex, mul?.outputs[0], "Div");
    const div = model.nodes[divIndex];
    if (
      clip === undefined || num(clip, "min", -Infinity) !== 0 || mul === undefined ||
      !mul.inputs.includes(add.inputs[0]!) || div === undefined || div.inputs[0] !== mul.outputs[0]
    ) {
      fail(add, "adding a constant is supported only as hard-swish's x + 3");
    }
    const max = num(clip, "max", Infinity);
    const divisor = scalarOf(values.get(div.inputs[1]!));
    if (max !== divisor) fail(add, `hard-swish clips at ${max} but divides by ${divisor}`);
    const conv = fusable(x, add.inputs[0]!, 2);
    if (conv === undefined) fail(add, "hard-swish's input is not a convolution's alone");
    steps[conv.index] = {
      ...conv.step,
      activation: { kind: "hardswish", alpha: 1 / divisor!, beta: offset / divisor! },
    };
    for (const index of [clipIndex, mulIndex, divIndex]) skipped.add(index);
    values.set(div.outputs[0]!, x);
  }

  const outputName = model.outputs[0]!.name;
  const result = values.get(outputName);
  if (result?.kind !== "activation") throw new Error(`Cannot plan model: output '${outputName}'`);
  return reuseBuffers({
    input: { name: inputName, buffer: input.buffer, shape: input.shape },
    output: { name: outputName, buffer: result.buffer, shape: result.shape },
    buffers,
    steps,
  });
}

function readsOf(step: Step): number[] {
  switch (step.op) {
    case "add":
      return [step.a, step.b];
    case "scale":
      return [step.input, step.scale];
    default:
      return [step.input];
  }
}

/**
 * Gives buffers whose values are no longer read to later steps' outputs (never a step's own
 * input), so a batch touches less memory; the input and output buffers stay apart.
 */
function reuseBuffers(plan: Plan): Plan {
  const lastRead = new Map<number, number>();
  plan.steps.forEach((step, i) => readsOf(step).forEach((b) => lastRead.set(b, i)));
  lastRead.set(plan.output.buffer, Infinity);
  const sizes: number[] = [plan.buffers[plan.input.buffer]!];
  const mapping = new Map<number, number>([[plan.input.buffer, 0]]);
  /** Physical buffers free for reuse after the step at which they were last read. */
  const free: number[] = [];
  const release: [number, number][] = [];
  const steps = plan.steps.map((step, i) => {
    for (const [at, physical] of release.splice(0)) {
      if (at < i) free.push(physical);
      else release.push([at, physical]);
    }
    const size = plan.buffers[step.output]!;
    let physical = free.findIndex((b) => sizes[b]! >= size);
    if (physical >= 0) physical = free.splice(physical, 1)[0]!;
    else {
      sizes.push(size);
      physical = sizes.length - 1;
    }
    mapping.set(step.output, physical);
    for (const read of new Set(readsOf(step))) {
      if (lastRead.get(read) === i && read !== plan.input.buffer) {
        release.push([i, mapping.get(read)!]);
      }
    }
    const map = (b: number): number => mapping.get(b)!;
    switch (step.op) {
      case "add":
        return { ...step, a: map(step.a), b: map(step.b), output: physical };
      case "scale":
        return { ...step, input: map(step.input), scale: map(step.scale), output: physical };
      default:
        return { ...step, input: map(step.input), output: physical };
    }
  });
  return {
    input: { ...plan.input, buffer: 0 },
    output: { ...plan.output, buffer: mapping.get(plan.output.buffer)! },
    buffers: sizes,
    steps,
  };
}

/**
 * Floats per sample of the largest im2col matrix a full (not depthwise, not 1x1) convolution
 * needs: `inChannels * kernelHeight * kernelWidth * outHeight * outWidth`.
 *
 * @param plan The plan.
 * @returns The size (0 when no convolution needs one).
 */
export function im2colSize(plan: Plan): number {
  let size = 0;
  for (const step of plan.steps) {
    if (step.op === "conv" && step.group === 1 && !isPointwise(step)) {
      size = Math.max(
        size,
        step.inChannels * step.kernelHeight * step.kernelWidth * step.outHeight * step.outWidth,
      );
    }
  }
  return size;
}

/**
 * Whether a convolution is a plain matrix product: 1x1, stride 1, no padding.
 *
 * @param step The convolution.
 * @returns `true` for a pointwise convolution.
 */
export function isPointwise(step: ConvStep): boolean {
  return step.kernelHeight === 1 && step.kernelWidth === 1 && step.strideHeight === 1 &&
    step.strideWidth === 1 && step.padHeight === 0 && step.padWidth === 0;
}
