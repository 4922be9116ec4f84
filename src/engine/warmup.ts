/**
 * Warm-up, one rule for both engines. A warm-up stage becomes `batchSize` requests of one sample
 * each (shape `[1, ...dims]` with batching, `dims` without), run together as one batch `count`
 * times on every instance, through the same instance calls as inference, before the model takes
 * requests: the same requests Triton's core builds from `model_warmup`. The Triton-core engine
 * runs them here too, before it loads the model into the core, and never hands the core a
 * `model_warmup`: the core's own warm-up faults now and then when a sample fails (see
 * `ffi/README.md`, "Known limits").
 *
 * @module
 */

import type { InferRequest } from "../callable/types.ts";
import type { ModelWarmup, WarmupInput } from "../config/model_config.ts";
import { messageOf, TritonBadParameterError } from "../errors.ts";
import type { ModelInstance } from "../instances/instance.ts";
import type { Logger } from "../log.ts";
import { type DType, newTypedArray, toDType } from "../tensor/dtype.ts";
import { fromRawBytes, type NDArray, shapeSize } from "../tensor/ndarray.ts";
import type { ModelInfo } from "../config/model_info.ts";

/** A warm-up input checked against the model: its dtype resolved. */
export interface CheckedWarmupInput {
  /** Input name. */
  readonly name: string;
  /** Element type (the model input's). */
  readonly dtype: DType;
  /** Dimensions without the batch axis, all fixed. */
  readonly dims: readonly number[];
  /** The user's input settings. */
  readonly input: WarmupInput;
}

/**
 * Checks a warm-up stage against the model's inputs: every name is an input, every required
 * input is given, dtypes match and the dims are fixed and fit the declared shape.
 *
 * @param model The model.
 * @param stage The warm-up stage.
 * @returns The inputs with resolved dtypes.
 * @throws {TritonBadParameterError} For a stage that does not fit the model.
 *
 * @example A stage that names an unknown input
 * ```ts
 * import { checkWarmupStage } from "./warmup.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "m", version: 1, strict: false, config: resolveModelConfig({}),
 *   inputs: [{ name: "x", dtype: "float32" as const, shape: [-1], optional: false }],
 *   outputs: [],
 * };
 * const stage = { name: "s", batchSize: 1, inputs: { x: { dtype: "float32", shape: [2], zeroData: true } } } as const;
 * assert.equal(checkWarmupStage(model, stage)[0]!.dtype, "float32");
 * assert.throws(
 *   () => checkWarmupStage(model, { ...stage, inputs: { z: { dtype: "float32", shape: [2], zeroData: true } } }),
 *   { message: "Invalid warm-up 's' of model 'm': 'z' is not an input of the model" },
 * );
 * ```
 */
export function checkWarmupStage(model: ModelInfo, stage: ModelWarmup): CheckedWarmupInput[] {
  const fail = (detail: string): never => {
    throw new TritonBadParameterError(
      `Invalid warm-up '${stage.name}' of model '${model.name}': ${detail}`,
    );
  };
  if (!model.config.batching && stage.batchSize !== 1) {
    fail(`batchSize must be 1 for a model without batching, got ${stage.batchSize}`);
  }
  const checked: CheckedWarmupInput[] = [];
  for (const [name, input] of Object.entries(stage.inputs)) {
    const spec = model.inputs.find((s) => s.name === name);
    if (spec === undefined) fail(`'${name}' is not an input of the model`);
    let dtype: DType;
    try {
      dtype = toDType(input.dtype);
    } catch (error) {
      return fail(`input '${name}': ${(error as Error).message}`);
    }
    if (dtype !== spec!.dtype) {
      fail(`input '${name}' has dtype ${dtype} but the model declares ${spec!.dtype}`);
    }
    const dims = [...input.shape];
    const fits = dims.length === spec!.shape.length &&
      dims.every((d, i) =>
        Number.isInteger(d) && d >= 0 && (spec!.shape[i] === -1 || spec!.shape[i] === d)
      );
    if (!fits) {
      fail(
        `input '${name}' shape [${dims}] must be fixed and match the declared shape [${
          spec!.shape
        }]`,
      );
    }
    checked.push({ name, dtype, dims, input });
  }
  for (const spec of model.inputs) {
    if (!spec.optional && !(spec.name in stage.inputs)) {
      fail(`required input '${spec.name}' has no warm-up data`);
    }
  }
  return checked;
}

function randomTensor(dtype: DType, shape: readonly number[]): NDArray {
  const count = shapeSize(shape);
  if (dtype === "bytes") {
    // Triton treats random data of strings as zero data: empty strings.
    return { dtype, shape, data: Array.from({ length: count }, () => new Uint8Array()) };
  }
  // Written by index below with a number or a bigint as the dtype takes.
  const data = newTypedArray(dtype, count) as { [index: number]: number | bigint };
  for (let i = 0; i < count; i++) {
    const r = Math.random();
    if (dtype === "bool") data[i] = r < 0.5 ? 0 : 1;
    else if (dtype === "float16" || dtype === "float32" || dtype === "float64") data[i] = r;
    else if (dtype === "bfloat16") data[i] = 0x3f80 + Math.floor(r * 0x7f);
    else if (dtype === "int64" || dtype === "uint64") data[i] = BigInt(Math.floor(r * 128));
    else data[i] = Math.floor(r * 128);
  }
  return { dtype, shape, data } as NDArray;
}

function zeroTensor(dtype: DType, shape: readonly number[]): NDArray {
  const count = shapeSize(shape);
  if (dtype === "bytes") {
    return { dtype, shape, data: Array.from({ length: count }, () => new Uint8Array()) };
  }
  return { dtype, shape, data: newTypedArray(dtype, count) } as NDArray;
}

/**
 * Builds the requests of one warm-up stage: `batchSize` requests, one sample each.
 *
 * @param model The model.
 * @param stage The warm-up stage.
 * @param signal The signal the requests carry.
 * @returns The requests, ready for `ModelInstance.execute`.
 * @throws {TritonBadParameterError} For a stage that does not fit the model or an unreadable or
 *   mis-sized data file.
 *
 * @example Two zero samples
 * ```ts
 * import { warmupRequests } from "./warmup.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "m", version: 1, strict: false, config: resolveModelConfig({}),
 *   inputs: [{ name: "x", dtype: "int32" as const, shape: [-1], optional: false }],
 *   outputs: [],
 * };
 * const requests = await warmupRequests(model, {
 *   name: "zeros", batchSize: 2, inputs: { x: { dtype: "int32", shape: [3], zeroData: true } },
 * }, new AbortController().signal);
 * assert.equal(requests.length, 2);
 * assert.deepEqual(requests[0]!.data.x!.shape, [1, 3]);
 * assert.deepEqual([...(requests[1]!.data.x!.data as Int32Array)], [0, 0, 0]);
 * ```
 */
export async function warmupRequests(
  model: ModelInfo,
  stage: ModelWarmup,
  signal: AbortSignal,
): Promise<InferRequest[]> {
  const inputs = checkWarmupStage(model, stage);
  const files = new Map<string, Uint8Array>();
  for (const { name, input } of inputs) {
    if (input.inputDataFile === undefined) continue;
    try {
      files.set(name, await Deno.readFile(input.inputDataFile));
    } catch (error) {
      throw new TritonBadParameterError(
        `Invalid warm-up '${stage.name}' of model '${model.name}': cannot read the data file of input '${name}': ${
          (error as Error).message
        }`,
      );
    }
  }
  const requests: InferRequest[] = [];
  for (let i = 0; i < stage.batchSize; i++) {
    const data: Record<string, NDArray> = {};
    for (const { name, dtype, dims, input } of inputs) {
      const shape = model.config.batching ? [1, ...dims] : dims;
      const file = files.get(name);
      if (file !== undefined) {
        try {
          data[name] = fromRawBytes(dtype, shape, file);
        } catch (error) {
          throw new TritonBadParameterError(
            `Invalid warm-up '${stage.name}' of model '${model.name}': the data file of input '${name}' does not hold one sample: ${
              (error as Error).message
            }`,
          );
        }
      } else if (input.randomData) data[name] = randomTensor(dtype, shape);
      else data[name] = zeroTensor(dtype, shape);
    }
    requests.push({
      data,
      parameters: {},
      requestedOutputNames: model.outputs.map((o) => o.name),
      signal,
    });
  }
  return requests;
}

/**
 * Runs every warm-up stage of a model `count` times on every instance, through the same instance
 * calls as inference (a decoupled model's streams are read to their end). A stage that fails is
 * logged and skipped, unless the model is strict.
 *
 * @param model The model.
 * @param instances Its started instances.
 * @param logger Where failures (and, at verbose level 1, finished stages) are logged.
 * @throws {Error} For a strict model, the first stage that fails:
 *   `Warm-up '<stage>' of model '<name>' failed: <reason>`.
 *
 * @example A failing stage of a lax model is skipped
 * ```ts
 * import { warmUp } from "./warmup.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import { MainThreadInstances } from "../instances/main_thread.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "m", version: 1, strict: false,
 *   inputs: [{ name: "x", dtype: "int32" as const, shape: [-1], optional: false }],
 *   outputs: [],
 *   config: resolveModelConfig({
 *     warmup: [{ name: "w", batchSize: 1, inputs: { x: { dtype: "int32", shape: [2], zeroData: true } } }],
 *   }),
 * };
 * let calls = 0;
 * const instances = await new MainThreadInstances([() => {
 *   calls++;
 *   throw new Error("not now");
 * }]).start(model);
 * await warmUp(model, instances);
 * assert.equal(calls, 1);
 * await assert.rejects(
 *   warmUp({ ...model, strict: true }, instances),
 *   { message: "Warm-up 'w' of model 'm' failed: not now" },
 * );
 * ```
 */
export async function warmUp(
  model: ModelInfo,
  instances: readonly ModelInstance[],
  logger?: Logger,
): Promise<void> {
  const signal = new AbortController().signal;
  for (const stage of model.config.warmup) {
    try {
      const requests = await warmupRequests(model, stage, signal);
      await Promise.all(instances.map(async (instance) => {
        for (let i = 0; i < (stage.count ?? 1); i++) {
          if (model.config.decoupled) {
            for await (const _ of instance.stream(requests)) { /* read to the end */ }
          } else {
            await instance.execute(requests);
          }
        }
      }));
      logger?.debug(1, () => `Warm-up '${stage.name}' of '${model.name}' done`);
    } catch (error) {
      const message = `Warm-up '${stage.name}' of model '${model.name}' failed: ${
        messageOf(error)
      }`;
      if (model.strict) throw new Error(message, { cause: error });
      logger?.warn(message);
    }
  }
}
