/**
 * Calls from callables to other models of the server, on the engine's side: the
 * {@linkcode ModelCaller} an engine hands its instances (each call is an ordinary
 * {@linkcode InferenceRequest} through the target model's scheduler, with its caller as
 * `parent`), the rule that refuses a call no instance could ever take (every instance of the
 * target waits for it: A calls B calls A), and how the parent crosses the Triton core (a request
 * parameter, which the core's ensembles also pass on to their steps).
 *
 * @module
 */

import type { CallFrame, CallParent, ModelCall, ModelCaller, Tensors } from "../callable/types.ts";
import { InferenceError, toInferenceError } from "../errors.ts";
import type { ModelInfo } from "../config/model_info.ts";
import type { Engine, InferenceRequest } from "./engine.ts";
import { hostTensors } from "../tensor/device_tensor.ts";

/**
 * The request parameter that carries a call's parent through the Triton core (a `triton_` name:
 * clients cannot send it). The core's ensembles pass their request's parameters on to their
 * steps, so a step's request carries its ensemble as parent.
 */
export const PARENT_PARAMETER = "triton_denotriton_parent";

/**
 * Refuses a call that would never run: every instance of its model is held by a caller waiting
 * for it (each instance runs one batch at a time, and a caller's batch waits for its calls), as
 * when A calls B calls A and A has one instance. With a free instance the call runs; a cycle
 * through instances of other calls is bounded by the callers' signals and execution timeouts.
 *
 * @param parent Who calls; `undefined` for a client's request (nothing to check).
 * @param target The model called: its name, its version, and how many instances it has (0 for
 *   an ensemble: its steps are checked).
 * @throws {InferenceError} UNAVAILABLE naming the chain of calls.
 *
 * @example A calls B calls A, A with one instance
 * ```ts
 * import { refuseDeadlock } from "./calls.ts";
 * import assert from "node:assert/strict";
 *
 * const a = { model: "A", version: 1, instance: 0 };
 * const b = { model: "B", version: 1, instance: 0 };
 * const parent = { ...b, ensemble: false, waiting: [a, b] };
 * assert.throws(() => refuseDeadlock(parent, { name: "A", version: 1, instances: 1 }), {
 *   message: "Cannot call model 'A' from model 'B': its 1 instance waits for this call (A → B → A), so the call would never run",
 * });
 * refuseDeadlock(parent, { name: "A", version: 1, instances: 2 }); // a second instance is free
 * ```
 */
export function refuseDeadlock(
  parent: CallParent | undefined,
  target: { readonly name: string; readonly version: number; readonly instances: number },
): void {
  const { name: model, version, instances } = target;
  if (parent === undefined || instances === 0) return;
  const held = new Set(
    parent.waiting
      .filter((frame) => frame.model === model && frame.version === version)
      .map((frame) => frame.instance),
  );
  if (held.size < instances) return;
  const chain = [...parent.waiting.map((frame) => frame.model), model].join(" → ");
  throw InferenceError.unavailable(
    `Cannot call model '${model}' from model '${parent.model}': ${
      instances === 1 ? "its 1 instance waits" : `all ${instances} of its instances wait`
    } for this call (${chain}), so the call would never run`,
  );
}

function isFrame(value: unknown): value is CallFrame {
  const frame = value as CallFrame;
  return typeof frame === "object" && frame !== null && typeof frame.model === "string" &&
    Number.isInteger(frame.version) && Number.isInteger(frame.instance);
}

/**
 * The parent as the {@linkcode PARENT_PARAMETER} value.
 *
 * @param parent The parent.
 * @returns Its JSON.
 */
export function encodeParent(parent: CallParent): string {
  return JSON.stringify(parent);
}

/**
 * The parent from a {@linkcode PARENT_PARAMETER} value.
 *
 * @param value The parameter's value.
 * @returns The parent; `undefined` when the value is not one.
 *
 * @example A parent survives the round trip through the request parameter; other text is none
 * ```ts
 * import { decodeParent, encodeParent } from "./calls.ts";
 * import assert from "node:assert/strict";
 *
 * const parent = { model: "A", version: 1, instance: 0, ensemble: false, waiting: [{ model: "A", version: 1, instance: 0 }] };
 * assert.deepEqual(decodeParent(encodeParent(parent)), parent);
 * assert.equal(decodeParent("{"), undefined);
 * ```
 */
export function decodeParent(value: unknown): CallParent | undefined {
  if (typeof value !== "string") return undefined;
  try {
    const parent = JSON.parse(value) as CallParent;
    if (
      isFrame(parent) && typeof parent.ensemble === "boolean" && Array.isArray(parent.waiting) &&
      parent.waiting.every(isFrame)
    ) {
      return {
        model: parent.model,
        version: parent.version,
        instance: parent.instance,
        ensemble: parent.ensemble,
        waiting: parent.waiting.map(({ model, version, instance }) => ({
          model,
          version,
          instance,
        })),
      };
    }
  } catch {
    // Not JSON: not a parent.
  }
  return undefined;
}

/**
 * The parent of an ensemble's steps: the ensemble, after whoever waits for its request.
 *
 * @param request The ensemble's request.
 * @param name The ensemble's name.
 * @param version Its version.
 * @returns The steps' parent.
 */
export function ensembleParent(
  request: InferenceRequest,
  name: string,
  version: number,
): CallParent {
  const frame: CallFrame = { model: name, version, instance: -1 };
  return { ...frame, ensemble: true, waiting: [...(request.parent?.waiting ?? []), frame] };
}

/**
 * A call's failure, naming its model (the caller may call several).
 *
 * @param model The called model.
 * @param error What the call threw.
 * @returns An `InferenceError` with the inner code.
 */
export function callFailure(model: string, error: unknown): InferenceError {
  const inner = toInferenceError(error);
  return new InferenceError(`Call to model '${model}' failed: ${inner.message}`, {
    code: inner.code,
    cause: inner,
  });
}

/**
 * The request a call makes.
 *
 * @param call The call.
 * @returns The engine's request.
 */
export function requestOfCall(call: ModelCall): InferenceRequest {
  return {
    modelName: call.model,
    inputs: new Map(Object.entries(call.inputs)),
    parameters: call.parameters,
    parent: call.parent,
    ...(call.version === undefined ? {} : { modelVersion: call.version }),
    ...(call.outputs === undefined ? {} : { outputs: call.outputs }),
    ...(call.priority === undefined ? {} : { priority: call.priority }),
    ...(call.timeoutMicroseconds === undefined
      ? {}
      : { timeoutMicroseconds: call.timeoutMicroseconds }),
    ...(call.id === undefined ? {} : { id: call.id }),
    ...(call.signal === undefined ? {} : { signal: call.signal }),
  };
}

/**
 * The caller an engine hands its instances: each call is a request of the engine's own, through
 * the target's scheduler, and its outputs are the response's (as they are: the same arrays on
 * the built-in engine, views or copies of the core's response on the Triton engine).
 *
 * @param engine The engine.
 * @returns The caller.
 */
export function engineCaller(engine: Engine): ModelCaller {
  return {
    async infer(call: ModelCall): Promise<Tensors> {
      try {
        const response = await engine.infer(requestOfCall(call));
        return Object.fromEntries(hostTensors(response.outputs));
      } catch (error) {
        throw callFailure(call.model, error);
      }
    },
    async *inferStream(call: ModelCall): AsyncGenerator<Tensors, void, undefined> {
      try {
        for await (const step of engine.inferStream(requestOfCall(call))) {
          // The flags-only final response is the stream's end, not a step.
          if (step.final && step.outputs.size === 0) continue;
          yield Object.fromEntries(hostTensors(step.outputs));
        }
      } catch (error) {
        throw callFailure(call.model, error);
      }
    },
  };
}

/**
 * Refuses an ensemble with a step whose model is decoupled, on both engines: the core's ensemble
 * scheduler would answer a coupled request with the step's first response alone, and the
 * built-in engine's ensembles run coupled steps only.
 *
 * @param ensemble The ensemble being loaded.
 * @param modelOf The loaded model a step names, if any (a missing one is the load's to report).
 * @throws {InferenceError} UNSUPPORTED naming the ensemble and the step's model.
 *
 * @example A decoupled step
 * ```ts
 * import { refuseDecoupledSteps } from "./calls.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const model = (name: string, decoupled: boolean) => ({
 *   name, version: 1, strict: false, inputs: [], outputs: [],
 *   config: resolveModelConfig({ batching: false, decoupled }),
 * });
 * const ensemble = {
 *   ...model("E", false),
 *   ensemble: { steps: [{ model: "Counter", version: -1, inputMap: new Map(), outputMap: new Map() }] },
 * };
 * assert.throws(() => refuseDecoupledSteps(ensemble, (name) => model(name, true)), {
 *   message: "Failed to load model 'E' version 1: in ensemble E, step of model Counter is decoupled, which DenoTriton's ensembles do not run (call it from a callable with context.inferStream)",
 * });
 * refuseDecoupledSteps(ensemble, (name) => model(name, false));
 * ```
 */
export function refuseDecoupledSteps(
  ensemble: ModelInfo,
  modelOf: (name: string, version: number) => ModelInfo | undefined,
): void {
  for (const step of ensemble.ensemble?.steps ?? []) {
    if (modelOf(step.model, step.version)?.config.decoupled !== true) continue;
    throw InferenceError.unsupported(
      `Failed to load model '${ensemble.name}' version ${ensemble.version}: in ensemble ${ensemble.name}, step of model ${step.model} is decoupled, which DenoTriton's ensembles do not run (call it from a callable with context.inferStream)`,
    );
  }
}
