/**
 * A Worker instance's hot path without `postMessage`: a batch the main isolate sends it, and the
 * results it sends back, as records (`isolate/records.ts`) on a pair of rings
 * (`isolate/ring.ts`), one each way per Worker. The records carry the same wire requests and
 * results as the "batch" and "results" messages (`worker_protocol.ts`), which each side then
 * handles as it handles those.
 *
 * Only a coupled batch whose tensors are plain host buffers, small enough to copy, goes this way;
 * the rest (native addresses, device handles, shared or foreign memory, a sequence's 64-bit
 * correlation ID, a decoupled batch's steps, tensors over `RECORD_TENSOR_BYTES`, a full ring) goes
 * by message as
 * before. Each side reads its ring before it handles a message, so a message posted after a
 * record (a "cancel" after its batch) finds it handled.
 *
 * @module
 */

import type { RingWriter } from "../isolate/ring.ts";
import type { WireCounts, WireTensor } from "../isolate/codec.ts";
import {
  readRecord,
  type RecordTensor,
  wireRecordTensor,
  writeRecord,
} from "../isolate/records.ts";
import type { FromWorker, ToWorker, WireRequest } from "./worker_protocol.ts";

/** Record kinds. */
export const LANE_BATCH = 1;
/** Record kinds. */
export const LANE_RESULTS = 2;

/** Tensors by name, as records carry them: the names, and the bytes in the same order. */
function tensorsOut(
  tensors: Readonly<Record<string, WireTensor>>,
  names: string[][],
  out: RecordTensor[],
): boolean {
  const these: string[] = [];
  for (const [name, wire] of Object.entries(tensors)) {
    const tensor = wireRecordTensor(wire);
    if (tensor === undefined) return false;
    these.push(name);
    out.push(tensor);
  }
  names.push(these);
  return true;
}

/** Tensors by name from a record's names and tensors, from `at` on. */
function tensorsIn(
  names: readonly string[],
  tensors: readonly WireTensor[],
  at: number,
): Record<string, WireTensor> {
  const out: Record<string, WireTensor> = {};
  names.forEach((name, i) => out[name] = tensors[at + i]!);
  return out;
}

/**
 * What packing counted, as the ring carries it: the bytes it would have moved are copied
 * instead (into the ring, and out at the reader).
 *
 * @param counts The counts of the message the record stands for.
 * @returns The counts of the record.
 */
export function asCopied(counts: WireCounts): WireCounts {
  return { copied: counts.copied + counts.moved, moved: 0, native: counts.native };
}

/** A batch record's header. */
interface BatchHead {
  readonly id: number;
  readonly credit: number;
  readonly traceparent?: string;
  /** Each request without its tensors. */
  readonly requests: readonly Omit<WireRequest, "data">[];
  /** Each request's tensor names, in the record's order. */
  readonly names: readonly (readonly string[])[];
}

/**
 * Writes a coupled batch for the Worker.
 *
 * @param writer The ring to the Worker.
 * @param message The "batch" message it stands for.
 * @returns `false` when it must go by `postMessage` instead (nothing was written).
 */
export function writeBatch(
  writer: RingWriter,
  message: Extract<ToWorker, { type: "batch" }>,
): boolean {
  if (message.decoupled) return false;
  const names: string[][] = [];
  const tensors: RecordTensor[] = [];
  const requests: Omit<WireRequest, "data">[] = [];
  for (const { data, ...rest } of message.requests) {
    // A sequence's correlation ID may be a bigint, which JSON does not carry.
    if (rest.sequence !== undefined || !tensorsOut(data, names, tensors)) return false;
    requests.push(rest);
  }
  const header: BatchHead = {
    id: message.id,
    credit: message.credit,
    ...(message.traceparent === undefined ? {} : { traceparent: message.traceparent }),
    requests,
    names,
  };
  return writeRecord(writer, LANE_BATCH, header, tensors);
}

/**
 * Reads a batch record as the "batch" message it stands for.
 *
 * @param payload The record's payload (read before the ring's callback returns).
 * @returns The message.
 */
export function readBatch(payload: Uint8Array): Extract<ToWorker, { type: "batch" }> {
  const { header, tensors } = readRecord<BatchHead>(payload);
  let at = 0;
  const requests = header.requests.map((request, i) => {
    const names = header.names[i]!;
    const data = tensorsIn(names, tensors, at);
    at += names.length;
    return { ...request, data };
  });
  return {
    type: "batch",
    id: header.id,
    decoupled: false,
    requests,
    credit: header.credit,
    ...(header.traceparent === undefined ? {} : { traceparent: header.traceparent }),
  };
}

/** A results record's header. */
interface ResultsHead {
  readonly id: number;
  readonly counts: WireCounts;
  /** Each result's tensor names, in the record's order. */
  readonly names: readonly (readonly string[])[];
}

/**
 * Writes a coupled batch's results for the main isolate. The counts say the bytes were copied:
 * they cross the ring as copies, where the message moved them.
 *
 * @param writer The ring to the main isolate.
 * @param message The "results" message it stands for.
 * @returns `false` when it must go by `postMessage` instead (nothing was written).
 */
export function writeResults(
  writer: RingWriter,
  message: Extract<FromWorker, { type: "results" }>,
): boolean {
  const names: string[][] = [];
  const tensors: RecordTensor[] = [];
  for (const result of message.results) {
    if (!tensorsOut(result, names, tensors)) return false;
  }
  const header: ResultsHead = { id: message.id, counts: asCopied(message.counts), names };
  return writeRecord(writer, LANE_RESULTS, header, tensors);
}

/**
 * Reads a results record as the "results" message it stands for.
 *
 * @param payload The record's payload (read before the ring's callback returns).
 * @returns The message.
 */
export function readResults(payload: Uint8Array): Extract<FromWorker, { type: "results" }> {
  const { header, tensors } = readRecord<ResultsHead>(payload);
  let at = 0;
  const results = header.names.map((names) => {
    const result = tensorsIn(names, tensors, at);
    at += names.length;
    return result;
  });
  return { type: "results", id: header.id, results, counts: header.counts };
}
