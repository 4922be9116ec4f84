/**
 * Messages on a ring (`ring.ts`) that carry tensors: a JSON header, then each tensor's bytes at an
 * 8-byte boundary, described in the header (dtype, shape, byte count). The reader copies all the
 * tensors' bytes into one buffer of its own, since the ring's room is the writer's again as soon
 * as the record is read, and gets them back as wire tensors (`codec.ts`) over that buffer.
 *
 * Shared by the HTTP threads' lane (`frontend/http/thread_lane.ts`) and the Worker instances'
 * (`instances/worker_lane.ts`).
 *
 * @module
 */

import type { DType } from "../tensor/dtype.ts";
import type { NDArray } from "../tensor/ndarray.ts";
import { serializeBytes } from "../tensor/bytes_codec.ts";
import { ringBuffer, type RingWriter } from "./ring.ts";
import type { WireTensor } from "./codec.ts";

/** A tensor's bytes as a record carries them. */
export interface RecordTensor {
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Its bytes: a numeric tensor's view, or BYTES elements packed (`bytes_codec.ts`). */
  readonly bytes: Uint8Array;
}

/** A wire tensor in a buffer of the receiver's own. */
export type BufferWireTensor = Extract<WireTensor, { readonly buffer: ArrayBufferLike }>;

/**
 * The most tensor bytes a record copies through a ring (twice: in, and out at the reader); above
 * it `postMessage` moves the buffers instead, which costs less than the copies.
 */
export const RECORD_TENSOR_BYTES = 64 * 1024;

/**
 * A lane's ring, in data bytes: four times {@linkcode RECORD_TENSOR_BYTES}, so that a record of
 * that many tensor bytes and its header fits in the half of it a record may take, with room for
 * others behind it (an add_sub request takes about 250 bytes).
 */
const RECORD_RING_BYTES = 4 * RECORD_TENSOR_BYTES;

/**
 * A fresh ring for one direction of a lane of records (`ring.ts`'s memory, sized for them).
 *
 * @returns Its memory, for both ends.
 */
export function recordRing(): SharedArrayBuffer {
  return ringBuffer(RECORD_RING_BYTES);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const align8 = (n: number): number => (n + 7) & ~7;

/**
 * A host tensor's bytes, for {@linkcode writeRecord}: a view of a numeric tensor's data, or its
 * BYTES elements packed.
 *
 * @param array The tensor.
 * @returns Its dtype, shape and bytes.
 */
export function recordTensor(array: NDArray): RecordTensor {
  const bytes = array.dtype === "bytes"
    ? serializeBytes(array.data)
    : new Uint8Array(array.data.buffer, array.data.byteOffset, array.data.byteLength);
  return { dtype: array.dtype, shape: array.shape, bytes };
}

/**
 * A buffer-kind wire tensor's bytes, for {@linkcode writeRecord}; `undefined` for a tensor a
 * record does not carry: at a native address, on a device, over foreign memory (the receiver
 * views those in place), or in a `SharedArrayBuffer` (shared, not copied).
 *
 * @param wire The wire tensor.
 * @returns Its dtype, shape and bytes, or `undefined`.
 */
export function wireRecordTensor(wire: WireTensor): RecordTensor | undefined {
  if (!("buffer" in wire) || wire.foreign === true) return undefined;
  if (typeof SharedArrayBuffer !== "undefined" && wire.buffer instanceof SharedArrayBuffer) {
    return undefined;
  }
  return {
    dtype: wire.dtype,
    shape: wire.shape,
    bytes: new Uint8Array(wire.buffer, wire.byteOffset, wire.byteLength),
  };
}

/**
 * Writes a record: `header` (JSON) and the tensors' bytes.
 *
 * @param writer The ring.
 * @param kind The record's kind.
 * @param header Anything JSON carries.
 * @param tensors The tensors, in the order the reader gets them back.
 * @returns `false` when it does not fit (nothing was written): over
 *   {@linkcode RECORD_TENSOR_BYTES} of tensors, which `postMessage` moves for less than the
 *   copies cost, or no room in the ring.
 */
export function writeRecord(
  writer: RingWriter,
  kind: number,
  header: unknown,
  tensors: readonly RecordTensor[],
): boolean {
  let tensorBytes = 0;
  for (const tensor of tensors) tensorBytes += align8(tensor.bytes.byteLength);
  if (tensorBytes > RECORD_TENSOR_BYTES) return false;
  const json = JSON.stringify({
    h: header,
    t: tensors.map((tensor) => [tensor.dtype, tensor.shape, tensor.bytes.byteLength]),
  });
  // As many bytes as UTF-16 units if it is ASCII (the usual header), else at most 3 per unit;
  // the record is committed at its real size.
  let room: Uint8Array | undefined;
  let written = -1;
  for (const perUnit of [1, 3]) {
    const headRoom = 4 + json.length * perUnit;
    room = writer.claim(align8(headRoom) + tensorBytes);
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
  for (const tensor of tensors) {
    room.set(tensor.bytes, at);
    at += align8(tensor.bytes.byteLength);
  }
  writer.commit(kind, at);
  return true;
}

/**
 * Reads a record {@linkcode writeRecord} wrote: its header, and its tensors copied out.
 *
 * @typeParam H The header's type.
 * @param payload The record's payload (read before the ring's callback returns).
 * @returns The header, and the tensors in their order, over one buffer of this isolate's.
 *
 * @example A header and a tensor cross
 * ```ts
 * import { readRecord, recordTensor, writeRecord } from "./records.ts";
 * import { RingReader, ringBuffer, RingWriter } from "./ring.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const buffer = ringBuffer(1024);
 * const y = ndarray(new Int32Array([7, 8]), [2]);
 * assert.ok(writeRecord(new RingWriter(buffer), 1, { id: 3 }, [recordTensor(y)]));
 * new RingReader(buffer).drain((_kind, payload) => {
 *   const { header, tensors } = readRecord<{ id: number }>(payload);
 *   assert.equal(header.id, 3);
 *   const [t] = tensors;
 *   assert.deepEqual([t!.dtype, t!.shape, [...new Int32Array(t!.buffer, t!.byteOffset, 2)]], [
 *     "int32", [2], [7, 8],
 *   ]);
 * });
 * ```
 */
export function readRecord<H>(payload: Uint8Array): { header: H; tensors: BufferWireTensor[] } {
  const headBytes = new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0, true);
  const { h: header, t: heads } = JSON.parse(
    decoder.decode(payload.subarray(4, 4 + headBytes)),
  ) as {
    h: H;
    t: [DType, number[], number][];
  };
  const tensors: BufferWireTensor[] = [];
  if (heads.length === 0) return { header, tensors };
  // One buffer for all of them (not shared: `slice` makes a plain one).
  const copy = payload.slice(align8(4 + headBytes)).buffer;
  let at = 0;
  for (const [dtype, shape, byteLength] of heads) {
    tensors.push({ dtype, shape, buffer: copy, byteOffset: at, byteLength });
    at += align8(byteLength);
  }
  return { header, tensors };
}
