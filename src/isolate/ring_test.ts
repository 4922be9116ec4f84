import assert from "node:assert/strict";
import { ringBuffer, RingReader, RingWriter } from "./ring.ts";

/** Fails instead of hanging: a record never announced leaves the pump asleep. */
async function watchdog<T>(promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error("Watchdog: the pump did not end in 30 s")),
          30_000,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A payload of `size` bytes that names its record: byte i is (seed + i) mod 256. */
function payloadOf(seed: number, size: number): Uint8Array {
  return Uint8Array.from({ length: size }, (_, i) => (seed + i) & 0xff);
}

Deno.test("a ring keeps records in order and whole across many wraps", () => {
  const buffer = ringBuffer(256);
  const writer = new RingWriter(buffer);
  const reader = new RingReader(buffer);
  const sizes = [0, 1, 7, 8, 9, 33, 64, 100, 120];
  const seen: string[] = [];
  const expected: string[] = [];
  let seed = 0;
  for (let round = 0; round < 200; round++) {
    // Up to three records before each drain, of sizes that leave the end at every offset.
    for (let k = 0; k < 1 + round % 3; k++) {
      const size = sizes[(round * 5 + k) % sizes.length]!;
      const room = writer.claim(size);
      if (room === undefined) break;
      room.set(payloadOf(seed, size));
      writer.commit(seed, size);
      expected.push(`${seed}:${size}`);
      seed++;
    }
    reader.drain((kind, payload) => {
      assert.deepEqual(payload, payloadOf(kind, payload.byteLength), `record ${kind}`);
      seen.push(`${kind}:${payload.byteLength}`);
    });
  }
  assert.deepEqual(seen, expected);
  assert.ok(seen.length > 300, `${seen.length} records`);
});

Deno.test("a ring refuses a record over half its room, and one the reader has not made room for", () => {
  const buffer = ringBuffer(128);
  const writer = new RingWriter(buffer);
  const reader = new RingReader(buffer);
  assert.equal(writer.maxPayload, 56);
  assert.equal(writer.claim(57), undefined);
  // Two records of 56 bytes (64 with the header) fill it.
  for (const seed of [1, 2]) {
    writer.claim(56)!.set(payloadOf(seed, 56));
    writer.commit(seed, 56);
  }
  assert.equal(writer.claim(0), undefined);
  const kinds: number[] = [];
  assert.equal(reader.drain((kind) => kinds.push(kind)), 2);
  assert.deepEqual(kinds, [1, 2]);
  assert.ok(writer.claim(56) !== undefined);
});

Deno.test("a record whose callback throws is consumed, and the error propagates", () => {
  const buffer = ringBuffer(64);
  const writer = new RingWriter(buffer);
  const reader = new RingReader(buffer);
  writer.claim(1)!.set([9]);
  writer.commit(1, 1);
  assert.throws(() =>
    reader.drain(() => {
      throw new Error("bad record");
    }), /bad record/);
  assert.equal(reader.drain(() => assert.fail("read twice")), 0);
});

Deno.test("with onError, a record whose callback throws is reported and the records after it are read", () => {
  const buffer = ringBuffer(256);
  const writer = new RingWriter(buffer);
  const reader = new RingReader(buffer);
  for (const kind of [1, 2, 3]) {
    writer.claim(1)!.set([kind]);
    writer.commit(kind, 1);
  }
  const kinds: number[] = [];
  const errors: string[] = [];
  const read = reader.drain((kind) => {
    kinds.push(kind);
    if (kind === 2) throw new Error("bad record 2");
  }, (error) => errors.push((error as Error).message));
  assert.equal(read, 3);
  assert.deepEqual(kinds, [1, 2, 3]);
  assert.deepEqual(errors, ["bad record 2"]);
  assert.equal(reader.drain(() => assert.fail("read twice")), 0);
});

Deno.test("a ring's memory must be control plus a power of two", () => {
  assert.throws(
    () => new RingReader(new SharedArrayBuffer(192 + 100)),
    /A ring's buffer must hold 192 bytes of control and a power of two \(at least 64\) of data, got 292 bytes/,
  );
});

Deno.test("a pump reads what a Worker writes, asleep between bursts, until the Worker closes it", async () => {
  const buffer = ringBuffer(1024);
  const ring = new URL("./ring.ts", import.meta.url).href;
  // The Worker writes 2,000 records in bursts of 100 with a pause between (so the pump sleeps
  // and is woken), retrying a claim the reader has not made room for yet, then closes the ring.
  const source = `
    import { closeRingBuffer, RingWriter } from ${JSON.stringify(ring)};
    self.onmessage = async (event) => {
      const writer = new RingWriter(event.data);
      for (let seed = 0; seed < 2000; seed++) {
        const size = seed % 200;
        let room;
        while ((room = writer.claim(size)) === undefined) await new Promise((r) => setTimeout(r, 1));
        for (let i = 0; i < size; i++) room[i] = (seed + i) & 0xff;
        writer.commit(seed, size);
        if (seed % 100 === 99) await new Promise((r) => setTimeout(r, 5));
      }
      closeRingBuffer(event.data);
    };`;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  const reader = new RingReader(buffer);
  const kinds: number[] = [];
  const errors: unknown[] = [];
  const pumped = reader.pump((kind, payload) => {
    assert.deepEqual(payload, payloadOf(kind, kind % 200));
    kinds.push(kind);
  }, (error) => errors.push(error));
  try {
    worker.postMessage(buffer);
    await watchdog(pumped);
    assert.deepEqual(errors, []);
    assert.deepEqual(kinds, Array.from({ length: 2000 }, (_, i) => i));
  } finally {
    reader.close();
    worker.terminate();
    URL.revokeObjectURL(url);
  }
});

Deno.test("closing a ring's reader ends its pump, asleep or not yet started", async () => {
  const buffer = ringBuffer(64);
  const reader = new RingReader(buffer);
  const pumped = reader.pump(() => {}, () => {});
  await new Promise((resolve) => setTimeout(resolve, 10));
  reader.close();
  await pumped;
  // Closed already: a new pump returns at once.
  await new RingReader(buffer).pump(() => assert.fail("no records"), () => {});
});

Deno.test("a pump passes a callback's error on and goes on reading", async () => {
  const buffer = ringBuffer(64);
  const writer = new RingWriter(buffer);
  const reader = new RingReader(buffer);
  const errors: string[] = [];
  const kinds: number[] = [];
  for (const kind of [1, 2, 3]) {
    writer.claim(0);
    writer.commit(kind, 0);
  }
  const { promise: third, resolve } = Promise.withResolvers<void>();
  const pumped = reader.pump((kind) => {
    kinds.push(kind);
    if (kind === 2) throw new Error("record 2");
    if (kind === 3) resolve();
  }, (error) => errors.push((error as Error).message));
  await third;
  reader.close();
  await pumped;
  assert.deepEqual([kinds, errors], [[1, 2, 3], ["record 2"]]);
});
