import assert from "node:assert/strict";
import { Packer, Unpacker } from "./packer.ts";

const TEXTS = [
  "",
  "AddSub",
  "INPUT__0",
  "é名前",
  "tensor-ü",
  "a".repeat(64),
  "x".repeat(200) + "é",
];

Deno.test("Packer writes ASCII, non-ASCII and long strings as UTF-8 with a NUL", () => {
  const packer = new Packer(8);
  for (const text of TEXTS) packer.string(text);
  const bytes = packer.bytes();
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  for (const text of TEXTS) {
    const length = view.getUint32(at, true);
    const utf8 = new TextEncoder().encode(text);
    assert.equal(length, utf8.byteLength);
    assert.deepEqual(bytes.slice(at + 4, at + 4 + length), utf8);
    assert.equal(bytes[at + 4 + length], 0);
    at += 4 + length + 1;
  }
  assert.equal(at, bytes.byteLength);
});

Deno.test("Unpacker reads ASCII, non-ASCII and long strings the bridge wrote", () => {
  // The bridge's layout: u32 byte length, then the UTF-8 bytes (no NUL).
  const parts = TEXTS.map((text) => new TextEncoder().encode(text));
  const bytes = new Uint8Array(parts.reduce((sum, part) => sum + 4 + part.byteLength, 0));
  const view = new DataView(bytes.buffer);
  let at = 0;
  for (const part of parts) {
    view.setUint32(at, part.byteLength, true);
    bytes.set(part, at + 4);
    at += 4 + part.byteLength;
  }
  const reader = new Unpacker(bytes);
  assert.deepEqual(TEXTS.map(() => reader.string()), TEXTS);
});

Deno.test("Packer writes 64-bit integers above 2^32 without losing bits", () => {
  const packer = new Packer();
  const values = [0, 1, 0xffffffff, 0x100000000, 0x7f1234567890, Number.MAX_SAFE_INTEGER, -1];
  for (const value of values) packer.i64(value);
  packer.i64(0x7fffffffffffffffn);
  const bytes = packer.bytes();
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  values.forEach((value, i) => assert.equal(view.getBigInt64(i * 8, true), BigInt(value)));
  assert.equal(view.getBigInt64(values.length * 8, true), 0x7fffffffffffffffn);
});
