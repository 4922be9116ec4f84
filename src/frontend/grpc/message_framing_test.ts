import { Buffer } from "node:buffer";
import assert from "node:assert/strict";
import { codecs } from "../../protocol/grpc_codec.ts";
import { lengthDelimitedStart } from "../../protocol/protobuf_wire.ts";
import { BufferPool } from "./buffer_pool.ts";
import {
  AlignedMessageDecoder,
  frameMessage,
  MESSAGE_PREFIX_BYTES,
  RAW_ALIGNMENT,
} from "./message_framing.ts";

/** A message with its 5-byte gRPC prefix. */
function frame(message: Uint8Array): Uint8Array {
  const framed = new Uint8Array(message.byteLength + 5);
  new DataView(framed.buffer).setUint32(1, message.byteLength);
  framed.set(message, 5);
  return framed;
}

function request(modelName: string, raw: Uint8Array): Uint8Array {
  return codecs.ModelInferRequest.encode({
    model_name: modelName,
    inputs: [{ name: "x", datatype: "UINT8", shape: [raw.byteLength] }],
    raw_input_contents: [raw],
  });
}

function bytes(count: number, seed: number): Uint8Array {
  return new Uint8Array(count).map((_, i) => (i * 7 + seed) % 251);
}

Deno.test("AlignedMessageDecoder keeps copies of borrowed pieces it cannot place yet", () => {
  // A message with no raw field and a large head: its buffer is placed only once complete,
  // while the lender reuses one buffer for every chunk.
  const message = codecs.ModelInferRequest.encode({ model_name: "m".repeat(100) });
  const wire = frame(message);
  const lent = new Uint8Array(16);
  for (const borrowed of [true, false]) {
    const decoder = new AlignedMessageDecoder(-1, 7, borrowed);
    const out: Uint8Array[] = [];
    for (let start = 0; start < wire.byteLength; start += lent.byteLength) {
      const piece = wire.subarray(start, start + lent.byteLength);
      lent.set(piece);
      out.push(...decoder.write(lent.subarray(0, piece.byteLength)));
      lent.fill(0xee);
    }
    assert.equal(out.length, 1);
    // Without copies, the pieces held until the end read what the lender wrote over them.
    assert.equal(Buffer.from(out[0]!).equals(Buffer.from(wire)), borrowed, `borrowed ${borrowed}`);
  }
});

Deno.test("AlignedMessageDecoder yields each message whole however the bytes are split", () => {
  const messages = [
    request("m", bytes(300, 1)),
    new Uint8Array(0),
    request("a".repeat(200), bytes(5, 2)),
  ];
  const wire = new Uint8Array(messages.reduce((n, m) => n + m.byteLength + 5, 0));
  let at = 0;
  for (const message of messages) {
    wire.set(frame(message), at);
    at += message.byteLength + 5;
  }
  for (const chunk of [1, 2, 3, 7, 64, 1000, wire.byteLength]) {
    const decoder = new AlignedMessageDecoder(-1, 7);
    const out: Uint8Array[] = [];
    for (let start = 0; start < wire.byteLength; start += chunk) {
      out.push(...decoder.write(Buffer.from(wire.subarray(start, start + chunk))));
    }
    assert.deepEqual(out.map((m) => [...m]), messages.map((m) => [...frame(m)]), `chunk ${chunk}`);
    // The raw entries (5 bytes after the prefix and the head) start on the alignment.
    for (const [index, message] of out.entries()) {
      if (index === 1) continue;
      const start = lengthDelimitedStart(message.subarray(5), 7) as number;
      assert.equal((message.byteOffset + 5 + start) % RAW_ALIGNMENT, 0, `chunk ${chunk}`);
    }
  }
});

Deno.test("AlignedMessageDecoder without a raw field, or with no entry, keeps the bytes as sent", () => {
  const live = frame(codecs.ServerLiveResponse.encode({ live: true }));
  assert.deepEqual(new AlignedMessageDecoder(-1).write(Buffer.from(live)).map((m) => [...m]), [
    [...live],
  ]);
  const noRaw = frame(codecs.ModelInferRequest.encode({ model_name: "m" }));
  assert.deepEqual(new AlignedMessageDecoder(-1, 7).write(Buffer.from(noRaw)).map((m) => [...m]), [
    [...noRaw],
  ]);
});

Deno.test("AlignedMessageDecoder refuses a message over the limit, and everything after it", () => {
  const decoder = new AlignedMessageDecoder(1024, 7);
  const refused = { message: "Received message larger than max (2048 vs 1024)" };
  assert.throws(() => decoder.write(Buffer.from([0, 0, 0, 8, 0])), refused);
  // The client goes on sending the body: none of it is taken as a message, or buffered.
  assert.throws(() => decoder.write(Buffer.from(new Uint8Array(2048))), refused);
});

Deno.test("AlignedMessageDecoder holds a message over the stream window until it is whole", () => {
  const raw = bytes(17 * 1024 * 1024, 3);
  const wire = frame(request("m", raw));
  const decoder = new AlignedMessageDecoder(-1, 7);
  const chunk = 64 * 1024;
  let out: Uint8Array[] = [];
  for (let start = 0; start < wire.byteLength; start += chunk) {
    assert.deepEqual(out, [], `a message before its last byte (at ${start})`);
    out = decoder.write(Buffer.from(wire.subarray(start, start + chunk)));
  }
  assert.equal(out.length, 1);
  const message = out[0]!;
  assert.equal(message.byteLength, wire.byteLength);
  const mismatch = message.findIndex((value, i) => value !== wire[i]);
  assert.equal(mismatch, -1, `differs at byte ${mismatch}`);
  const start = lengthDelimitedStart(message.subarray(5), 7) as number;
  assert.equal((message.byteOffset + 5 + start) % RAW_ALIGNMENT, 0);
});

Deno.test("frameMessage encodes a large response once, into the buffer the pool gives", () => {
  const pool = new BufferPool();
  const raw = bytes(100_000, 3);
  const response = {
    model_name: "m",
    model_version: "1",
    outputs: [{ name: "y", datatype: "UINT8", shape: [raw.byteLength] }],
    raw_output_contents: [raw],
  };
  const first = frameMessage(codecs.ModelInferResponse, response, (n) => pool.take(n));
  const wire = codecs.ModelInferResponse.encode(response);
  // The prefix, then the message as encoded alone.
  assert.deepEqual([...first.subarray(0, MESSAGE_PREFIX_BYTES)], [0, 0, 1, 134, 187]);
  assert.equal(first.byteLength - MESSAGE_PREFIX_BYTES, wire.byteLength);
  assert.ok(Buffer.from(first.subarray(MESSAGE_PREFIX_BYTES)).equals(wire));
  // The pool's 128 KiB buffer holds it: given back, the next response reuses it.
  assert.equal(first.buffer.byteLength, 128 * 1024);
  pool.give(first);
  const second = frameMessage(codecs.ModelInferResponse, response, (n) => pool.take(n));
  assert.equal(second.buffer, first.buffer);
});
