import assert from "node:assert/strict";
import {
  BinaryDataReader,
  binaryDataSize,
  BinaryDataWriter,
  parseHeaderLength,
} from "./binary_data.ts";
import { serializeBytes } from "../tensor/bytes_codec.ts";

const text = new TextEncoder();

function refuses(run: () => unknown, message: RegExp): void {
  assert.throws(run, (error: unknown) => {
    assert.equal((error as { code?: string }).code, "INVALID_ARG");
    assert.match((error as Error).message, message);
    return true;
  });
}

Deno.test("parseHeaderLength() accepts 0..body length only", () => {
  assert.equal(parseHeaderLength("0", 0), 0);
  assert.equal(parseHeaderLength(" 7 ", 7), 7);
  for (const value of ["8", "-1", "abc", "1.5", "", "99999999999999999999"]) {
    refuses(
      () => parseHeaderLength(value, 7),
      /^Invalid 'Inference-Header-Content-Length' header: expected an integer within \[0, 7\] \(the body size\)/,
    );
  }
});

Deno.test("binaryDataSize() takes non-negative safe integers, numbers or bigints", () => {
  assert.equal(binaryDataSize({ binary_data_size: 0 }, "input 'x'"), 0);
  assert.equal(binaryDataSize({ binary_data_size: 12n }, "input 'x'"), 12);
  assert.equal(binaryDataSize(undefined, "input 'x'"), undefined);
  for (const value of [-1, 1.5, "8", 2 ** 53, 2n ** 53n, -1n, null]) {
    refuses(
      () => binaryDataSize({ binary_data_size: value }, "output 'y'"),
      /^Unable to parse 'binary_data_size' of output 'y': expected a non-negative integer$/,
    );
  }
});

Deno.test("a body the writer lays out reads back, tensor by tensor, in order", () => {
  const writer = new BinaryDataWriter();
  const words = new Uint8Array(new Int16Array([1, -2, 3]).buffer);
  const strings = serializeBytes([text.encode("hi"), text.encode("")]);
  const header = {
    outputs: [
      { name: "a", datatype: "INT16", shape: [3], parameters: writer.add(words) },
      { name: "b", datatype: "BYTES", shape: [2], parameters: writer.add(strings) },
    ],
  };
  const { json, tensors, byteLength, headers } = writer.finish(header);
  assert.deepEqual(
    JSON.parse(new TextDecoder().decode(json)).outputs.map((o: {
      parameters: unknown;
    }) => o.parameters),
    [{ binary_data_size: 6 }, { binary_data_size: 10 }],
  );
  assert.deepEqual(headers, { "inference-header-content-length": String(json.byteLength) });
  assert.equal(byteLength, json.byteLength + 16);
  const body = new Uint8Array([...json, ...tensors.flatMap((t) => [...t])]);

  const reader = new BinaryDataReader(body, json.byteLength, { message: "response" });
  assert.deepEqual(reader.json, json);
  const a = reader.tensor("output 'a'", { dtype: "int16", shape: [3], size: 6 });
  assert.deepEqual([...(a.data as Int16Array)], [1, -2, 3]);
  const b = reader.tensor("output 'b'", { dtype: "bytes", shape: [2], size: 10 });
  assert.deepEqual((b.data as Uint8Array[]).map((e) => new TextDecoder().decode(e)), ["hi", ""]);
  reader.end();
});

Deno.test("a body without binary tensors is JSON alone, with no header", () => {
  const body = new BinaryDataWriter().finish({ outputs: [] });
  assert.deepEqual(body.tensors, []);
  assert.deepEqual(body.headers, {});
  assert.equal(body.byteLength, body.json.byteLength);
});

Deno.test("BinaryDataReader refuses what does not follow the rules, naming the tensor", () => {
  const json = text.encode("{}");
  const body = new Uint8Array([...json, 1, 2, 3, 4, 5]);
  refuses(
    () => new BinaryDataReader(body, 8, { message: "response" }),
    /^Invalid 'Inference-Header-Content-Length' header: expected an integer within \[0, 7\] \(the body size\), got '8'$/,
  );
  refuses(
    () =>
      new BinaryDataReader(body, undefined, { message: "request", model: "m" }).tensor(
        "input 'x'",
        { dtype: "uint8", shape: [1], size: 1 },
      ),
    /^Input 'x' has binary data but the request has no 'Inference-Header-Content-Length' header$/,
  );
  const reader = new BinaryDataReader(body, 2, { message: "request", model: "m" });
  refuses(
    () => reader.tensor("input 'x'", { dtype: "int32", shape: [2], size: 8 }),
    /^Unexpected size for input 'x': expecting 8 bytes but only 5 remain in the request body for model 'm'$/,
  );
  refuses(
    () => reader.tensor("input 'x'", { dtype: "int32", shape: [2], size: 4 }),
    /^Unexpected size for input 'x': shape \[2\] of int32 needs 8 bytes, 'binary_data_size' is 4$/,
  );
  // A BYTES element claiming more than is there (the 4 bytes above were taken).
  refuses(
    () => reader.tensor("input 's'", { dtype: "bytes", shape: [1], size: 1 }),
    /^Invalid binary data of input 's': /,
  );
  refuses(
    () => new BinaryDataReader(body, 2, { message: "request", model: "m" }).end(),
    /^Unexpected additional input data for model 'm': 5 bytes after the last input$/,
  );
  refuses(
    () => new BinaryDataReader(body, 2, { message: "response" }).end(),
    /^Unexpected additional output data: 5 bytes after the last output$/,
  );
});
