import assert from "node:assert/strict";
import {
  LANE_BATCH,
  LANE_RESULTS,
  readBatch,
  readResults,
  writeBatch,
  writeResults,
} from "./worker_lane.ts";
import { ringBuffer, RingReader, RingWriter } from "../isolate/ring.ts";
import type { ToWorker, WireRequest } from "./worker_protocol.ts";
import type { BufferWireTensor } from "../isolate/records.ts";

function tensor(values: number[]): BufferWireTensor & { readonly buffer: ArrayBuffer } {
  const buffer = new Float32Array(values).buffer;
  return {
    dtype: "float32" as const,
    shape: [values.length],
    buffer,
    byteOffset: 0,
    byteLength: buffer.byteLength,
  };
}

function batch(requests: WireRequest[], decoupled = false): Extract<ToWorker, { type: "batch" }> {
  return { type: "batch", id: 4, decoupled, requests, credit: 16, traceparent: "00-ab-cd-01" };
}

const plain: WireRequest = {
  data: { x: tensor([1, 2]) },
  parameters: { p: "v", n: 2 },
  requestedOutputNames: ["y"],
  cancelled: true,
  parent: { model: "Caller", version: 1, instance: 0, ensemble: false, waiting: [] },
};

Deno.test("a coupled batch and its results cross the lane as the messages they stand for", () => {
  const buffer = ringBuffer(4096);
  assert.ok(writeBatch(new RingWriter(buffer), batch([plain, { ...plain, data: {} }])));
  const back = ringBuffer(4096);
  assert.ok(writeResults(new RingWriter(back), {
    type: "results",
    id: 4,
    results: [{ y: tensor([3]) }, {}],
    counts: { copied: 1, moved: 4, native: 0 },
  }));
  new RingReader(buffer).drain((kind, payload) => {
    assert.equal(kind, LANE_BATCH);
    const message = readBatch(payload);
    const x = message.requests[0]!.data["x"]! as { buffer: ArrayBuffer; byteOffset: number };
    assert.deepEqual([...new Float32Array(x.buffer, x.byteOffset, 2)], [1, 2]);
    const { data: _, ...rest } = message.requests[0]!;
    const { data: _d, ...expected } = plain;
    assert.deepEqual(rest, expected);
    assert.deepEqual(message.requests[1]!.data, {});
    assert.deepEqual(
      [message.id, message.decoupled, message.credit, message.traceparent],
      [4, false, 16, "00-ab-cd-01"],
    );
  });
  new RingReader(back).drain((kind, payload) => {
    assert.equal(kind, LANE_RESULTS);
    const message = readResults(payload);
    const y = message.results[0]!["y"]! as { buffer: ArrayBuffer; byteOffset: number };
    assert.deepEqual([...new Float32Array(y.buffer, y.byteOffset, 1)], [3]);
    assert.deepEqual(message.results[1], {});
    // The bytes crossed as copies.
    assert.deepEqual(message.counts, { copied: 5, moved: 0, native: 0 });
  });
});

Deno.test("what the lane does not carry is left for postMessage", () => {
  const writer = new RingWriter(ringBuffer(1024 * 1024));
  const native = { dtype: "float32" as const, shape: [1], address: 64n, byteLength: 4 };
  const shared = { ...tensor([1]), buffer: new SharedArrayBuffer(4) };
  const large = tensor(Array.from({ length: 20000 }, () => 1));
  for (
    const [why, message] of [
      ["decoupled", batch([plain], true)],
      [
        "a sequence",
        batch([{ ...plain, sequence: { id: 2n ** 63n, start: true, end: false, ready: true } }]),
      ],
      ["native memory", batch([{ ...plain, data: { x: native } }])],
      ["a shared buffer", batch([{ ...plain, data: { x: shared } }])],
      [
        "foreign memory",
        batch([{ ...plain, data: { x: { ...tensor([1]), foreign: true as const } } }]),
      ],
      ["80,000 bytes", batch([{ ...plain, data: { x: large } }])],
    ] as const
  ) {
    assert.equal(writeBatch(writer, message), false, why);
  }
  assert.equal(
    writeResults(writer, {
      type: "results",
      id: 1,
      results: [{ y: native }],
      counts: { copied: 0, moved: 0, native: 4 },
    }),
    false,
  );
});
