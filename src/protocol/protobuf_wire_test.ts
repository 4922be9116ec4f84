import assert from "node:assert/strict";
import { lengthDelimitedStart } from "./protobuf_wire.ts";

Deno.test("lengthDelimitedStart skips varint, fixed and other length-delimited fields", () => {
  const message = new Uint8Array([
    ...[0x08, 0x96, 0x01], // field 1, varint 150
    ...[0x11, 1, 2, 3, 4, 5, 6, 7, 8], // field 2, fixed64
    ...[0x1d, 1, 2, 3, 4], // field 3, fixed32
    ...[0x22, 0x02, 0x3a, 0x00], // field 4, bytes that look like field 7
    ...[0x3a, 0x03, 9, 9, 9], // field 7
  ]);
  assert.equal(lengthDelimitedStart(message, 7), 23);
  assert.equal(lengthDelimitedStart(message.subarray(0, 22), 7), "more");
  assert.equal(lengthDelimitedStart(new Uint8Array([0x0b]), 7), "none"); // a group: not ours to read
});
