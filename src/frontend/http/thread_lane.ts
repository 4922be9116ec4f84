/**
 * The HTTP threads' hot path without `postMessage`: an inference request a thread hands to the
 * main isolate, and its answer, as records (`isolate/records.ts`: a JSON header, then the
 * tensors' bytes) on a pair of rings (`isolate/ring.ts`), one each way per thread.
 *
 * What does not fit (tensors over `RECORD_TENSOR_BYTES`, or a ring the reader has not yet
 * emptied) and what JSON cannot carry (a sequence's 64-bit correlation ID) goes by `postMessage`
 * as before (`thread_protocol.ts`); both sides take either.
 *
 * @module
 */

import type { InferenceRequest, InferenceResponse } from "../../engine/engine.ts";
import { fromWireTensor, type WireError, type WireTensor } from "../../isolate/codec.ts";
import type { RingWriter } from "../../isolate/ring.ts";
import { readRecord, type RecordTensor, recordTensor, writeRecord } from "../../isolate/records.ts";
import { hostTensors, type Tensor } from "../../tensor/device_tensor.ts";
import { type ModelRef, type SentInferFields, splitInferRequest } from "./thread_protocol.ts";

/** Record kinds. */
export const LANE_INFER = 1;
/** Record kinds. */
export const LANE_INFERRED = 2;
/** Record kinds. */
export const LANE_FAILED = 3;

/** Host tensors' names, and their bytes for the record. */
function tensorsOut(tensors: ReadonlyMap<string, Tensor>): [string[], RecordTensor[]] {
  const names: string[] = [];
  const out: RecordTensor[] = [];
  for (const [name, array] of hostTensors(tensors)) {
    names.push(name);
    out.push(recordTensor(array));
  }
  return [names, out];
}

/** A record's tensors by the names its header gives. */
function tensorsIn(names: readonly string[], tensors: readonly WireTensor[]): Map<string, Tensor> {
  return new Map(names.map((name, i) => [name, fromWireTensor(tensors[i]!)]));
}

/** An inference request's record header. */
interface InferHead {
  /** The thread's id of the request. */
  readonly i: number;
  /** The model its URL named. */
  readonly m: ModelRef;
  /** The request without its model, inputs and signal. */
  readonly r: SentInferFields;
  /** The inputs' names, in the record's order. */
  readonly n: readonly string[];
}

/**
 * Writes a thread's inference request (decoded from its HTTP body) for the main isolate.
 *
 * @param writer The thread's ring to the main isolate.
 * @param id The thread's id of the request.
 * @param model The model its URL named.
 * @param request The decoded request (its inputs in host memory; no shared-memory outputs).
 * @returns `false` when it must go by `postMessage` instead.
 *
 * @example A request crosses
 * ```ts
 * import { LANE_INFER, readInferRequest, writeInferRequest } from "./thread_lane.ts";
 * import { RingReader, RingWriter, ringBuffer } from "../../isolate/ring.ts";
 * import { hostTensor } from "../../tensor/device_tensor.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const buffer = ringBuffer(4096);
 * const request = {
 *   modelName: "m", id: "7", parameters: { p: 1 },
 *   inputs: new Map([["a", ndarray(new Float32Array([1, 2]), [1, 2])]]),
 * };
 * assert.ok(writeInferRequest(new RingWriter(buffer), 5, { modelName: "m" }, request));
 * new RingReader(buffer).drain((kind, payload) => {
 *   assert.equal(kind, LANE_INFER);
 *   const { id, request } = readInferRequest(payload, new AbortController().signal);
 *   assert.equal(id, 5);
 *   assert.deepEqual([request.modelName, request.id, request.parameters], ["m", "7", { p: 1 }]);
 *   assert.deepEqual([...(hostTensor(request.inputs.get("a")!, "a").data as Float32Array)], [1, 2]);
 * });
 * ```
 */
export function writeInferRequest(
  writer: RingWriter,
  id: number,
  model: ModelRef,
  request: InferenceRequest,
): boolean {
  // A sequence's correlation ID may be a bigint, which JSON does not carry.
  if (request.sequence !== undefined) return false;
  const { inputs, rest } = splitInferRequest(request);
  const [names, tensors] = tensorsOut(inputs);
  const header: InferHead = { i: id, m: model, r: rest, n: names };
  return writeRecord(writer, LANE_INFER, header, tensors);
}

/**
 * Reads an inference request's record.
 *
 * @param payload The record's payload (read before the ring's callback returns).
 * @param signal Aborted when the thread's client leaves.
 * @returns The thread's id of the request, the model its URL named, and the request.
 */
export function readInferRequest(
  payload: Uint8Array,
  signal: AbortSignal,
): { id: number; model: ModelRef; request: InferenceRequest } {
  const { header: head, tensors } = readRecord<InferHead>(payload);
  const inputs = tensorsIn(head.n, tensors);
  return { id: head.i, model: head.m, request: { ...head.m, ...head.r, inputs, signal } };
}

/** An answer's record header. */
interface AnswerHead {
  /** The thread's id of the request. */
  readonly i: number;
  /** Whether the model batches. */
  readonly b?: boolean;
  /** The response without its outputs. */
  readonly r?: Omit<InferenceResponse, "outputs">;
  /** The outputs' names, in the record's order. */
  readonly n?: readonly string[];
  /** The failure. */
  readonly e?: WireError;
}

/**
 * Writes the main isolate's answer to a thread's request: its response (outputs in host memory:
 * a thread's requests use no shared memory), copied, so the engine may keep using the outputs.
 *
 * @param writer The ring to the thread.
 * @param id The thread's id of the request.
 * @param response The engine's response.
 * @param batching Whether the model batches.
 * @returns `false` when it must go by `postMessage` instead.
 */
export function writeInferResponse(
  writer: RingWriter,
  id: number,
  response: InferenceResponse,
  batching: boolean,
): boolean {
  const { outputs, ...rest } = response;
  const [names, tensors] = tensorsOut(outputs);
  const header: AnswerHead = { i: id, b: batching, r: rest, n: names };
  return writeRecord(writer, LANE_INFERRED, header, tensors);
}

/**
 * Writes the main isolate's failure of a thread's request.
 *
 * @param writer The ring to the thread.
 * @param id The thread's id of the request.
 * @param error The error, as it crosses.
 * @returns `false` when it must go by `postMessage` instead.
 */
export function writeInferFailure(writer: RingWriter, id: number, error: WireError): boolean {
  const header: AnswerHead = { i: id, e: error };
  return writeRecord(writer, LANE_FAILED, header, []);
}

/**
 * Reads an answer's record (either kind).
 *
 * @param payload The record's payload (read before the ring's callback returns).
 * @returns The thread's id of the request, and its response and whether the model batches, or
 *   its error.
 */
export function readAnswer(
  payload: Uint8Array,
):
  | { id: number; response: InferenceResponse; batching: boolean }
  | { id: number; error: WireError } {
  const { header: head, tensors } = readRecord<AnswerHead>(payload);
  if (head.e !== undefined) return { id: head.i, error: head.e };
  const outputs = tensorsIn(head.n ?? [], tensors);
  return { id: head.i, response: { ...head.r!, outputs }, batching: head.b === true };
}
