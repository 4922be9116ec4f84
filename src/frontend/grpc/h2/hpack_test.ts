import assert from "node:assert/strict";
import {
  HeaderListTooLargeError,
  HpackDecoder,
  HpackEncoder,
  HpackError,
  huffmanCodes,
  huffmanDecode,
} from "./hpack.ts";

const hex = (text: string): Uint8Array =>
  Uint8Array.from(text.replaceAll(" ", "").match(/../g)!.map((byte) => parseInt(byte, 16)));

Deno.test("HPACK: Huffman codes derived from the lengths match RFC 7541 Appendix B", () => {
  const codes = huffmanCodes();
  assert.equal(codes[32], 0x14); // ' '
  assert.equal(codes[48], 0x0); // '0'
  assert.equal(codes[97], 0x3); // 'a'
  assert.equal(codes[256], 0x3fffffff); // EOS
});

Deno.test("HPACK: Huffman strings decode, and bad padding or EOS is refused", () => {
  assert.equal(huffmanDecode(hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff")), "www.example.com");
  assert.equal(huffmanDecode(hex("1f")), "a"); // 00011 then 111 padding
  assert.throws(() => huffmanDecode(hex("18")), HpackError); // padding of zeros
  assert.throws(() => huffmanDecode(hex("1f ff")), /padding/); // 11 bits of padding
  assert.throws(() => huffmanDecode(hex("ff ff ff ff")), /invalid Huffman code/); // EOS
});

Deno.test("HPACK: RFC 7541 C.3 and C.4 request sequences, with the dynamic table", () => {
  const expected = [
    [[":method", "GET"], [":scheme", "http"], [":path", "/"], [":authority", "www.example.com"]],
    [
      [":method", "GET"],
      [":scheme", "http"],
      [":path", "/"],
      [":authority", "www.example.com"],
      ["cache-control", "no-cache"],
    ],
    [
      [":method", "GET"],
      [":scheme", "https"],
      [":path", "/index.html"],
      [":authority", "www.example.com"],
      ["custom-key", "custom-value"],
    ],
  ];
  const plain = new HpackDecoder();
  const c3 = [
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
  ];
  c3.forEach((block, i) => assert.deepEqual(plain.decode(hex(block)), expected[i]));
  const huffman = new HpackDecoder();
  const c4 = [
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
    "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
  ];
  c4.forEach((block, i) => assert.deepEqual(huffman.decode(hex(block)), expected[i]));
});

Deno.test("HPACK: malformed blocks are refused", () => {
  assert.throws(() => new HpackDecoder().decode(hex("80")), /no table entry 0/);
  assert.throws(() => new HpackDecoder().decode(hex("be")), /no table entry 62/);
  assert.throws(() => new HpackDecoder().decode(hex("3fe2 1f")), /table size 4097 above/);
  assert.throws(() => new HpackDecoder().decode(hex("0003 6162")), /truncated string/);
  assert.throws(() => new HpackDecoder().decode(hex("82 20")), /after a field/);
  assert.throws(() => new HpackDecoder().decode(hex("ff ff ff ff ff ff")), /integer/);
});

Deno.test("HPACK: a header list over the limit is refused after the table was kept in step", () => {
  const decoder = new HpackDecoder({ maxHeaderListSize: 64 });
  // custom-key: custom-value, with incremental indexing: 10 + 12 + 32 = 54 bytes, plus :method.
  const block = hex("82 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65");
  assert.throws(() => decoder.decode(block), HeaderListTooLargeError);
  // The entry was still added: index 62 now names it.
  assert.deepEqual(decoder.decode(hex("be")), [["custom-key", "custom-value"]]);
});

Deno.test("HPACK: the encoder's blocks decode to what it was given", () => {
  const encoder = new HpackEncoder();
  const decoder = new HpackDecoder();
  const long = "x".repeat(300);
  const fields: [string, string][] = [
    [":status", "200"],
    ["content-type", "application/grpc"],
    ["grpc-message", long],
  ];
  const first = encoder.encode(fields);
  assert.equal(first[0], 0x20); // the table size update to 0
  assert.deepEqual(decoder.decode(first), fields);
  const second = encoder.encode([["grpc-status", "0"]]);
  assert.notEqual(second[0], 0x20);
  assert.deepEqual(decoder.decode(second), [["grpc-status", "0"]]);
});
