/**
 * The HTTP threads' hot path without `postMessage`: an inference request a thread hands to the
 * main isolate, and its answer, as records on a pair of rings (`isolate/ring.ts`), one each way
 * per thread. A record is a JSON header (the request or response without its tensors, and each
 * tensor's name, dtype, shape and byte count) followed by the tensors' bytes, each at an 8-byte
 * boundary; the reader copies the bytes into one buffer of its own, since the ring's room is
 * reused at once.
 *
 * What does not fit (a record over half the ring, or a ring the reader has not yet emptied) and
 * what JSON cannot carry (a sequence's 64-bit correlation ID) goes by `postMessage` as before
 * (`thread_protocol.ts`); both sides take either.
 *
 * @module
 */

import type { InferenceRequest, InferenceResponse } from "../../engine/engine.ts";
import type { WireError } from "../../isolate/codec.ts";
import type { RingWriter } from "../../isolate/ring.ts";
import { serializeBytes } from "../../tensor/bytes_codec.ts";
import { hostTensors, type Tensor } from "../../tensor/device_tensor.ts";
import type { DType } from "../../tensor/dtype.ts";
import { fromRawBytes, type NDArray } from "../../tensor/ndarray.ts";
import type { ModelRef } from "./thread_protocol.ts";

/** Record kinds. */
export const LANE_INFER = 1;
/** Record kinds. */
export const LANE_INFERRED = 2;
/** Record kinds. */
export const LANE_FAILED = 3;

/** A tensor's description in a header: name, dtype, shape, bytes. */
type TensorHead = [string, DType, readonly number[], number];

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const align8 = (n: number): number => (n + 7) & ~7;

/** The bytes of each host tensor as they cross: its view, or its BYTES elements packed. */
function tensorBytes(tensors: ReadonlyMap<string, Tensor>): [TensorHead[], Uint8Array[], number] {
  const heads: TensorHead[] = [];
  const parts: Uint8Array[] = [];
  let total = 0;
  for (const [name, array] of hostTensors(tensors)) {
    const bytes = array.dtype === "bytes"
      ? serializeBytes(array.data)
      : new Uint8Array(array.data.buffer, array.data.byteOffset, array.data.byteLength);
    heads.push([name, array.dtype, array.shape, bytes.byteLength]);
    parts.push(bytes);
    total += align8(bytes.byteLength);
  }
  return [heads, parts, total];
}

/**
 * Writes a record: a JSON header, then the tensors' bytes.
 *
 * @returns `false` when it does not fit (nothing was written).
 */
function writeRecord(
  writer: RingWriter,
  kind: number,
  header: unknown,
  parts: readonly Uint8Array[],
  partsBytes: number,
): boolean {
  const json = JSON.stringify(header);
  // As many bytes as UTF-16 units if it is ASCII (the usual header), else at most 3 per unit;
  // the record is committed at its real size.
  let room: Uint8Array | undefined;
  let written = -1;
  for (const perUnit of [1, 3]) {
    const headRoom = 4 + json.length * perUnit;
    room = writer.claim(align8(headRoom) + partsBytes);
    if (room === undefined) return false;
    const result = encoder.encodeInto(json, room.subarray(4, headRoom));
    if (result.read === json.length) {
      written = result.written;
      break;
    }
  }
  if (room === undefined || written < 0) return false;
  new DataView(room.buffer, room.byteOffset, 4).setUint32(0, written, true);
  let at = align8(4 + written);
  for (const part of parts) {
    room.set(part, at);
    at += align8(part.byteLength);
  }
  writer.commit(kind, at);
  return true;
}

/** A record's header and its tensors, copied out of the ring. */
function readRecord<H extends { t?: TensorHead[] }>(
  payload: Uint8Array,
): [H, Map<string, NDArray>] {
  const headBytes = new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0, true);
  const header = JSON.parse(decoder.decode(payload.subarray(4, 4 + headBytes))) as H;
  const tensors = new Map<string, NDArray>();
  const heads = header.t ?? [];
  if (heads.length === 0) return [header, tensors];
  const start = align8(4 + headBytes);
  // One buffer for all of them: the ring's room is the writer's again after this call.
  const copy = payload.slice(start);
  let at = 0;
  for (const [name, dtype, shape, byteLength] of heads) {
    tensors.set(name, fromRawBytes(dtype, shape, copy.subarray(at, at + byteLength)));
    at += align8(byteLength);
  }
  return [header, tensors];
}

/** An inference request's record header. */
interface InferHead {
  /** The thread's id of the request. */
  readonly i: number;
  /** The model its URL named. */
  readonly m: ModelRef;
  /** The request without its model, inputs and signal. */
  readonly r: Omit<InferenceRequest, "modelName" | "modelVersion" | "inputs" | "signal">;
  /** The inputs. */
  readonly t: TensorHead[];
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
  const {
    modelName: _,
    modelVersion: _v,
    signal: _s,
    outputBuffers: _o,
    outputGuards: _g,
    inputs,
    ...rest
  } = request;
  const [heads, parts, bytes] = tensorBytes(inputs);
  const header: InferHead = { i: id, m: model, r: rest, t: heads };
  return writeRecord(writer, LANE_INFER, header, parts, bytes);
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
  const [head, inputs] = readRecord<InferHead>(payload);
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
  /** The outputs. */
  readonly t?: TensorHead[];
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
  const [heads, parts, bytes] = tensorBytes(outputs);
  const header: AnswerHead = { i: id, b: batching, r: rest, t: heads };
  return writeRecord(writer, LANE_INFERRED, header, parts, bytes);
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
  return writeRecord(writer, LANE_FAILED, header, [], 0);
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
  const [head, outputs] = readRecord<AnswerHead>(payload);
  if (head.e !== undefined) return { id: head.i, error: head.e };
  return { id: head.i, response: { ...head.r!, outputs }, batching: head.b === true };
}
