import assert from "node:assert/strict";
import { checkRequest, checkTrailers } from "./request_rules.ts";
import type { HeaderField } from "./hpack.ts";

const GRPC: HeaderField[] = [
  [":method", "POST"],
  [":scheme", "http"],
  [":path", "/inference.GRPCInferenceService/ModelInfer"],
  [":authority", "127.0.0.1:8001"],
  ["content-type", "application/grpc"],
  ["te", "trailers"],
  ["grpc-timeout", "10S"],
  ["x-request-id-bin", "AAEC"],
];

Deno.test("checkRequest: a gRPC request, a CONNECT and a content-length are well formed", () => {
  assert.deepEqual(checkRequest(GRPC), { contentLength: -1 });
  assert.deepEqual(checkRequest([...GRPC, ["content-length", "12"], ["content-length", "12"]]), {
    contentLength: 12,
  });
  assert.deepEqual(checkRequest([[":method", "CONNECT"], [":authority", "example.com:443"]]), {
    contentLength: -1,
  });
});

Deno.test("checkRequest: each rule of RFC 9113 §8 it enforces", () => {
  const [method, scheme, path, authority, ...regular] = GRPC;
  const cases: [string, HeaderField[], string][] = [
    [
      "§8.2 upper case",
      [...GRPC, ["X-Test", "ok"]],
      "the field name 'X-Test' is not lower-case token characters",
    ],
    [
      "§8.2.1 space in a name",
      [...GRPC, ["x test", "ok"]],
      "the field name 'x test' is not lower-case token characters",
    ],
    [
      "§8.2.1 colon in a name",
      [...GRPC, ["x:test", "ok"]],
      "the field name 'x:test' is not lower-case token characters",
    ],
    [
      "§8.2.1 empty name",
      [...GRPC, ["", "ok"]],
      "the field name '' is not lower-case token characters",
    ],
    [
      "§8.2.1 CR LF in a value",
      [...GRPC, ["x-test", "a\r\nb"]],
      "the value of 'x-test' has a forbidden character",
    ],
    [
      "§8.2.1 NUL in a value",
      [...GRPC, ["x-test", "a\0b"]],
      "the value of 'x-test' has a forbidden character",
    ],
    [
      "§8.2.1 leading space",
      [...GRPC, ["x-test", " a"]],
      "the value of 'x-test' has a forbidden character",
    ],
    [
      "§8.2.1 trailing tab",
      [...GRPC, ["x-test", "a\t"]],
      "the value of 'x-test' has a forbidden character",
    ],
    [
      "§8.2.2 connection",
      [...GRPC, ["connection", "keep-alive"]],
      "the connection-specific field 'connection'",
    ],
    [
      "§8.2.2 transfer-encoding",
      [...GRPC, ["transfer-encoding", "chunked"]],
      "the connection-specific field 'transfer-encoding'",
    ],
    ["§8.2.2 upgrade", [...GRPC, ["upgrade", "h2c"]], "the connection-specific field 'upgrade'"],
    [
      "§8.2.2 te",
      [...GRPC.slice(0, 5), ["te", "trailers, deflate"]],
      "te: trailers, deflate (only 'trailers' may be sent)",
    ],
    [
      "§8.3 unknown pseudo",
      [...GRPC.slice(0, 4), [":test", "ok"], ...regular],
      "the pseudo-header field :test",
    ],
    [
      "§8.3 response pseudo",
      [...GRPC.slice(0, 4), [":status", "200"], ...regular],
      "the pseudo-header field :status",
    ],
    [
      "§8.3 pseudo after regular",
      [method!, scheme!, authority!, ...regular, path!],
      "the pseudo-header field :path after a regular one",
    ],
    ["§8.3.1 two :method", [method!, ...GRPC], "two :method fields"],
    ["§8.3.1 two :scheme", [scheme!, ...GRPC], "two :scheme fields"],
    ["§8.3.1 two :path", [path!, ...GRPC], "two :path fields"],
    ["§8.3.1 two :authority", [authority!, ...GRPC], "two :authority fields"],
    ["§8.3.1 no :method", [scheme!, path!, ...regular], "no :method"],
    ["§8.3.1 no :scheme", [method!, path!, ...regular], "no :scheme"],
    ["§8.3.1 no :path", [method!, scheme!, ...regular], "no :path, or an empty one"],
    [
      "§8.3.1 empty :path",
      [method!, scheme!, [":path", ""], ...regular],
      "no :path, or an empty one",
    ],
    [
      "§8.5 CONNECT with a path",
      [[":method", "CONNECT"], [":authority", "a:1"], [":path", "/"]],
      "a CONNECT request with :scheme or :path, or without :authority",
    ],
    [
      "§8.1.1 content-length not a number",
      [...GRPC, ["content-length", "1e3"]],
      "content-length: 1e3",
    ],
    [
      "§8.1.1 two content-lengths",
      [...GRPC, ["content-length", "1"], ["content-length", "2"]],
      "content-length: 2",
    ],
  ];
  for (const [rule, fields, reason] of cases) {
    assert.deepEqual(checkRequest(fields), { malformed: reason }, rule);
  }
});

Deno.test("checkTrailers: regular fields only, under the same rules", () => {
  assert.equal(checkTrailers([["grpc-status", "0"], ["x-sum", "12"]]), undefined);
  assert.equal(checkTrailers([[":path", "/"]]), "the pseudo-header field :path in trailers");
  assert.equal(
    checkTrailers([["Grpc-Status", "0"]]),
    "the field name 'Grpc-Status' is not lower-case token characters",
  );
  assert.equal(
    checkTrailers([["connection", "close"]]),
    "the connection-specific field 'connection'",
  );
});
