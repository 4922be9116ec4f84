/**
 * An ensemble: a model made of steps, each running a bound model on tensors of the ensemble
 * (Triton's `ensemble_scheduling`): a step's `inputMap` names, for each input of its model, the
 * ensemble tensor it reads, and its `outputMap`, for each output it keeps, the ensemble tensor it
 * writes. The ensemble's inputs are tensors from the start; its outputs are the tensors steps
 * write. This file checks the graph by Triton's rules, on its own (the steps' models are checked
 * when the ensemble loads, by the engine); both engines then run it by the same rules.
 *
 * @module
 */

import { TritonValidationError } from "../errors.ts";
import { isObject } from "../json_values.ts";
import type { ResolvedTensorSpec } from "./tensor_spec.ts";

/** One step as `bind()` takes it (see `ensembleStep()` for a step typed by its model). */
export interface EnsembleStepSpec {
  /** The model the step runs: its name. */
  readonly model: string;
  /**
   * The model's version.
   *
   * @default {-1 (the version the engine serves)}
   */
  readonly version?: number;
  /** Input of the step's model → the ensemble tensor it reads. */
  readonly inputMap: Readonly<Record<string, string>>;
  /** Output of the step's model → the ensemble tensor it writes. */
  readonly outputMap: Readonly<Record<string, string>>;
}

/** A step after its checks. */
export interface ResolvedEnsembleStep {
  /** The model the step runs. */
  readonly model: string;
  /** Its version; -1 for the served one. */
  readonly version: number;
  /** Input of the step's model → ensemble tensor, in the order given. */
  readonly inputMap: ReadonlyMap<string, string>;
  /** Output of the step's model → ensemble tensor, in the order given. */
  readonly outputMap: ReadonlyMap<string, string>;
}

/** The steps of an ensemble, checked (`ModelInfo.ensemble`). */
export interface ResolvedEnsemble {
  /** The steps, in the order given (they run as their inputs become ready). */
  readonly steps: readonly ResolvedEnsembleStep[];
}

function mapOf(
  fail: (why: string) => never,
  map: unknown,
  where: string,
): ReadonlyMap<string, string> {
  if (!isObject(map)) fail(`${where} must be an object of tensor names`);
  const entries = Object.entries(map as Record<string, unknown>);
  if (entries.length === 0) fail(`${where} is empty`);
  for (const [key, value] of entries) {
    if (key === "" || typeof value !== "string" || value === "") {
      fail(`${where} maps '${key}' to ${JSON.stringify(value)}: names must be non-empty strings`);
    }
  }
  return new Map(entries as [string, string][]);
}

/**
 * Checks an ensemble's steps against its inputs and outputs by Triton's rules: each ensemble
 * tensor is written once (by no step for an input, by one step otherwise), each step reads only
 * tensors that are inputs or that some step writes, every output is written, every input is read,
 * and the steps form no cycle.
 *
 * @param name The ensemble's name (for messages).
 * @param steps The steps.
 * @param tensors The ensemble's inputs and outputs (its resolved model is one).
 * @returns The checked steps.
 * @throws {TritonValidationError} Naming the step and tensor that break a rule.
 *
 * @example Detection then recognition
 * ```ts
 * import { resolveEnsemble } from "./ensemble.ts";
 * import assert from "node:assert/strict";
 *
 * const tensor = (name: string) => ({ name, dtype: "uint8" as const, shape: [-1], optional: false });
 * const ensemble = resolveEnsemble("Ocr", [
 *   { model: "Detect", inputMap: { image: "image" }, outputMap: { crops: "crops" } },
 *   { model: "Recognize", inputMap: { crops: "crops" }, outputMap: { text: "text" } },
 * ], { inputs: [tensor("image")], outputs: [tensor("text")] });
 * assert.equal(ensemble.steps[1]!.inputMap.get("crops"), "crops");
 * assert.throws(
 *   () => resolveEnsemble("Ocr", [{ model: "Detect", inputMap: { image: "picture" }, outputMap: { crops: "text" } }],
 *     { inputs: [tensor("image")], outputs: [tensor("text")] }),
 *   { message: "Cannot bind ensemble 'Ocr': step 1 (model 'Detect') reads 'picture', which is no input of the ensemble and no step writes" },
 * );
 * ```
 */
export function resolveEnsemble(
  name: string,
  steps: readonly EnsembleStepSpec[],
  tensors: {
    readonly inputs: readonly ResolvedTensorSpec[];
    readonly outputs: readonly ResolvedTensorSpec[];
  },
): ResolvedEnsemble {
  const { inputs, outputs } = tensors;
  const fail = (why: string): never => {
    throw new TritonValidationError(`Cannot bind ensemble '${name}': ${why}`);
  };
  if (!Array.isArray(steps) || steps.length === 0) fail("it has no steps");
  const inputNames = new Set(inputs.map((input) => input.name));
  for (const output of outputs) {
    if (inputNames.has(output.name)) fail(`'${output.name}' is both an input and an output`);
  }
  for (const input of inputs) {
    if (input.optional) fail(`input '${input.name}' is optional, which an ensemble cannot be`);
  }
  const resolved: ResolvedEnsembleStep[] = steps.map((step, index) => {
    const where = `step ${index + 1}`;
    if (!isObject(step)) fail(`${where} is not an object`);
    if (typeof step.model !== "string" || step.model === "") fail(`${where} names no model`);
    if (step.model === name) fail(`${where} runs the ensemble itself`);
    const version = step.version ?? -1;
    if (!Number.isInteger(version) || (version < 1 && version !== -1)) {
      fail(`${where} has version ${version}: give an integer >= 1, or -1 for the served one`);
    }
    const label = `${where} (model '${step.model}')`;
    return {
      model: step.model,
      version,
      inputMap: mapOf(fail, step.inputMap, `${label}: inputMap`),
      outputMap: mapOf(fail, step.outputMap, `${label}: outputMap`),
    };
  });
  // Who writes each tensor: inputs are written by no step (-1).
  const writer = new Map<string, number>([...inputNames].map((input) => [input, -1]));
  resolved.forEach((step, index) => {
    for (const tensor of step.outputMap.values()) {
      const other = writer.get(tensor);
      if (other === -1) {
        fail(
          `step ${index + 1} (model '${step.model}') writes '${tensor}', an input of the ensemble`,
        );
      }
      if (other !== undefined) {
        fail(`steps ${other + 1} and ${index + 1} both write '${tensor}'`);
      }
      writer.set(tensor, index);
    }
  });
  const read = new Set<string>();
  resolved.forEach((step, index) => {
    for (const tensor of step.inputMap.values()) {
      if (!writer.has(tensor)) {
        fail(
          `step ${
            index + 1
          } (model '${step.model}') reads '${tensor}', which is no input of the ensemble and no step writes`,
        );
      }
      read.add(tensor);
    }
  });
  for (const output of outputs) {
    if (!writer.has(output.name)) fail(`no step writes output '${output.name}'`);
  }
  for (const input of inputNames) {
    if (!read.has(input)) fail(`no step reads input '${input}'`);
  }
  // No cycle: every step must become ready once the inputs are there.
  const ready = new Set(inputNames);
  const left = new Set(resolved.keys());
  while (left.size > 0) {
    const runnable = [...left].filter((index) =>
      [...resolved[index]!.inputMap.values()].every((tensor) => ready.has(tensor))
    );
    if (runnable.length === 0) {
      fail(
        `steps ${[...left].map((index) => index + 1).join(", ")} wait for each other's outputs`,
      );
    }
    for (const index of runnable) {
      left.delete(index);
      for (const tensor of resolved[index]!.outputMap.values()) ready.add(tensor);
    }
  }
  return { steps: resolved };
}

/**
 * Triton's `ensemble_scheduling` JSON of an ensemble.
 *
 * @param ensemble The checked steps.
 * @returns `{ step: [{ model_name, model_version, input_map, output_map }] }`.
 */
export function ensembleSchedulingJson(ensemble: ResolvedEnsemble): Record<string, unknown> {
  return {
    step: ensemble.steps.map((step) => ({
      model_name: step.model,
      model_version: step.version,
      input_map: Object.fromEntries(step.inputMap),
      output_map: Object.fromEntries(step.outputMap),
    })),
  };
}
