/**
 * The messages between the HTTP front end's main isolate (`threads.ts`) and its HTTP threads
 * (`thread_main.ts`, one Deno Worker each, listening on the same port through `reusePort`). A
 * thread answers inference requests itself up to the engine call, which crosses to the main
 * isolate as one message each way; everything else it forwards as a whole HTTP request, with the
 * body streams transferred.
 *
 * @module
 */

import type { CorsSettings } from "./cors.ts";
import type { ResolvedSecurityConfig } from "../../config/security_config.ts";
import type { InferenceRequest, InferenceResponse, SharedEngineData } from "../../engine/engine.ts";
import type { ParameterValue, SequenceRequest } from "../../callable/types.ts";
import type { LogLevel, LogSettings, LogSettingsChange } from "../../log.ts";
import {
  fromWireTensor,
  toWireTensor,
  type WireError,
  type WireTensor,
  zeroCounts,
} from "../../isolate/codec.ts";
import { hostTensors, type Tensor } from "../../tensor/device_tensor.ts";

/** What a thread needs to serve: the front end's settings, as data. */
export interface ThreadSettings {
  /** The address the threads share. */
  readonly hostname: string;
  /** The port: as configured for the first thread (0 picks one), the one it bound for the rest. */
  readonly port: number;
  /** The body limit. */
  readonly maxRequestBytes: number;
  /** Header forwarding, as a `RegExp`'s source and flags. */
  readonly headerForwardPattern?: { readonly source: string; readonly flags: string };
  /**
   * The logger's settings and prefix; the thread's lines carry `<prefix>/http<index>`. With
   * `relay`, the lines go to the main isolate instead (its logger hands them to the user's).
   */
  readonly log: {
    readonly settings: LogSettings;
    readonly prefix: string;
    readonly relay?: boolean;
  };
  /** The token and restricted groups, when inference may be restricted. */
  readonly security?: ResolvedSecurityConfig;
  /** CORS, when origins are allowed. */
  readonly cors?: Required<CorsSettings>;
  /** The engine, when the thread may submit to it itself (the Triton core). */
  readonly engine?: SharedEngineData;
  /**
   * The rings of the inference requests the thread hands to the main isolate, and of their
   * answers (`thread_lane.ts`).
   */
  readonly lanes?: { readonly toMain: SharedArrayBuffer; readonly toThread: SharedArrayBuffer };
}

/** What a thread keeps of a model the main isolate checked. */
export interface CheckedModel {
  /** Output names in declared order. */
  readonly outputs: readonly string[];
  /** Whether the model batches. */
  readonly batching: boolean;
  /**
   * Whether the model has sequence batching: its requests go through the main isolate, whose
   * engine keeps the sequences' clocks and checks their correlation IDs.
   */
  readonly sequenceBatching: boolean;
}

/** An inference request on the wire, without its model (named beside it) and signal. */
export interface WireInferRequest {
  readonly id?: string;
  readonly inputs: readonly (readonly [string, WireTensor])[];
  readonly outputs?: readonly string[];
  readonly parameters: Readonly<Record<string, ParameterValue>>;
  readonly priority?: number;
  readonly timeoutMicroseconds?: number;
  /** Its sequence (`sequence_id`, `sequence_start`, `sequence_end`). */
  readonly sequence?: SequenceRequest;
}

/** An inference response on the wire. */
export interface WireInferResponse {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id?: string;
  readonly outputs: readonly (readonly [string, WireTensor])[];
  readonly parameters?: Readonly<Record<string, ParameterValue>>;
}

/** The model an inference request names, from its URL. */
export interface ModelRef {
  readonly modelName: string;
  readonly modelVersion?: number;
}

/** Main → thread. */
export type ToThread =
  | { readonly type: "start"; readonly index: number; readonly settings: ThreadSettings }
  /** The main isolate's answer to a forwarded request. */
  | {
    readonly type: "answer";
    readonly id: number;
    readonly status: number;
    readonly headers: readonly (readonly [string, string])[];
    readonly body: ReadableStream<Uint8Array> | null;
  }
  | {
    readonly type: "inferred";
    readonly id: number;
    readonly response: WireInferResponse;
    readonly batching: boolean;
  }
  /** The model named in a "check" is served and not decoupled. */
  | { readonly type: "checked"; readonly id: number; readonly model: CheckedModel }
  /**
   * Stop submitting to the shared engine: answer "detached" at once, and "released" once every
   * request submitted to it is released.
   */
  | { readonly type: "detach" }
  | { readonly type: "failed"; readonly id: number; readonly error: WireError }
  | { readonly type: "log-settings"; readonly change: LogSettingsChange }
  /** Stop listening, finish the requests in flight, then answer "stopped". */
  | { readonly type: "stop" };

/** Thread → main. */
export type FromThread =
  | { readonly type: "listening"; readonly port: number }
  | { readonly type: "start-failed"; readonly error: WireError }
  | {
    readonly type: "forward";
    readonly id: number;
    readonly method: string;
    readonly url: string;
    readonly headers: readonly (readonly [string, string])[];
    readonly body: ReadableStream<Uint8Array> | Uint8Array<ArrayBuffer> | null;
  }
  | {
    readonly type: "infer";
    readonly id: number;
    readonly model: ModelRef;
    readonly request: WireInferRequest;
  }
  | { readonly type: "check"; readonly id: number; readonly model: ModelRef }
  /** The client of request `id` left: abort it. */
  | { readonly type: "cancel"; readonly id: number }
  /** For the engine's share (`EngineShare.settle`). */
  | { readonly type: "settle"; readonly report: unknown }
  | { readonly type: "detached" }
  | { readonly type: "released" }
  | { readonly type: "stopped" }
  /** A line for the main isolate's logger (`ThreadSettings.log.relay`). */
  | { readonly type: "log"; readonly level: LogLevel; readonly message: string };

/** A request's fields that cross to the main isolate besides its inputs. */
export type SentInferFields = Omit<
  InferenceRequest,
  "modelName" | "modelVersion" | "inputs" | "signal" | "outputBuffers" | "outputGuards"
>;

/**
 * A thread's request as it crosses: its inputs, and its other fields without those not cloneable
 * or not sent: the model (named beside it), the signal, and shared-memory outputs (a thread
 * forwards requests that use shared memory).
 *
 * @param request The decoded request.
 * @returns Its inputs, and the rest.
 */
export function splitInferRequest(
  request: InferenceRequest,
): { inputs: InferenceRequest["inputs"]; rest: SentInferFields } {
  const {
    modelName: _,
    modelVersion: _v,
    signal: _s,
    outputBuffers: _o,
    outputGuards: _g,
    inputs,
    ...rest
  } = request;
  return { inputs, rest };
}

/**
 * Packs a decoded request's inputs to move them: a view of a buffer (the request body) moves the
 * whole buffer and keeps its offset, since nothing else in the thread uses it afterwards.
 *
 * @param request The decoded request.
 * @param transfer Collects the buffers to move.
 * @returns The request on the wire.
 *
 * @example Two inputs viewing one body move it once
 * ```ts
 * import { fromWireInferRequest, toWireInferRequest } from "./thread_protocol.ts";
 * import { hostTensor } from "../../tensor/device_tensor.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const body = new ArrayBuffer(16);
 * new Float32Array(body).set([1, 2, 3, 4]);
 * const transfer: Transferable[] = [];
 * const wire = toWireInferRequest({
 *   modelName: "m", parameters: {},
 *   inputs: new Map([
 *     ["a", ndarray(new Float32Array(body, 0, 2), [2])],
 *     ["b", ndarray(new Float32Array(body, 8, 2), [2])],
 *   ]),
 * }, transfer);
 * assert.equal(transfer.length, 1);
 * const back = fromWireInferRequest(wire, { modelName: "m" }, new AbortController().signal);
 * assert.deepEqual([...(hostTensor(back.inputs.get("b")!, "b").data as Float32Array)], [3, 4]);
 * ```
 */
export function toWireInferRequest(
  request: InferenceRequest,
  transfer: Transferable[],
): WireInferRequest {
  const { inputs, rest } = splitInferRequest(request);
  const counts = zeroCounts();
  const wire: (readonly [string, WireTensor])[] = [];
  // A thread forwards requests that use shared memory: its inputs are all in host memory.
  for (const [name, array] of hostTensors(inputs)) {
    wire.push([name, toWireTensor(array, { transfer, counts }, { moveViews: true })]);
  }
  return { ...rest, inputs: wire };
}

/** Tensors from the wire, by name. */
function tensorsFromWire(wire: readonly (readonly [string, WireTensor])[]): Map<string, Tensor> {
  return new Map(wire.map(([name, tensor]) => [name, fromWireTensor(tensor)]));
}

/**
 * A request from the wire.
 *
 * @param wire The request on the wire.
 * @param model The model its URL named.
 * @param signal Aborted when the thread's client leaves.
 * @returns The request for the engine.
 */
export function fromWireInferRequest(
  wire: WireInferRequest,
  model: ModelRef,
  signal: AbortSignal,
): InferenceRequest {
  return { ...model, ...wire, inputs: tensorsFromWire(wire.inputs), signal };
}

/**
 * Packs a response's outputs to be copied, never moved: the engine may still use them (a
 * model's own buffer, the response cache).
 *
 * @param response The engine's response.
 * @returns The response on the wire; post it without a transfer list.
 *
 * @example The outputs stay usable
 * ```ts
 * import { fromWireInferResponse, toWireInferResponse } from "./thread_protocol.ts";
 * import { hostTensor } from "../../tensor/device_tensor.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const y = ndarray(new Int32Array([7]), [1]);
 * const wire = toWireInferResponse({ modelName: "m", modelVersion: "1", outputs: new Map([["y", y]]) });
 * const copy = structuredClone(wire);
 * assert.deepEqual([...(y.data as Int32Array)], [7]);
 * assert.deepEqual([...(hostTensor(fromWireInferResponse(copy).outputs.get("y")!, "y").data as Int32Array)], [7]);
 * ```
 */
export function toWireInferResponse(response: InferenceResponse): WireInferResponse {
  // toWireTensor lists buffers to move; left unused, posting clones them.
  const unused: Transferable[] = [];
  const counts = zeroCounts();
  const { outputs, ...rest } = response;
  const wire: (readonly [string, WireTensor])[] = [];
  // Requests from a thread use no shared memory: their outputs are all in host memory.
  for (const [name, array] of hostTensors(outputs)) {
    wire.push([name, toWireTensor(array, { transfer: unused, counts })]);
  }
  return { ...rest, outputs: wire };
}

/**
 * A response from the wire.
 *
 * @param wire The response on the wire.
 * @returns The response.
 */
export function fromWireInferResponse(wire: WireInferResponse): InferenceResponse {
  return { ...wire, outputs: tensorsFromWire(wire.outputs) };
}
