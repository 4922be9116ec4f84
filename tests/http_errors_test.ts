import assert from "node:assert/strict";
import { ENGINES } from "./_helpers.ts";
import { IDENTITY, startHttpServer, type TestModel } from "./_http_server.ts";
import type { InferRequest, InferResult } from "../src/callable/types.ts";

const encoder = new TextEncoder();

const DECOUPLED: TestModel = {
  name: "Stream",
  fn: async function* (requests: InferRequest[]): AsyncGenerator<InferResult[]> {
    yield requests.map((request) => ({ y: request.data.x! }));
  },
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  config: { maxBatchSize: 8, decoupled: true },
};

const FAILING: TestModel = {
  name: "Failing",
  fn: () => {
    throw new RangeError("model exploded");
  },
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
};

interface Case {
  /** What is wrong. */
  name: string;
  /** The body (string = JSON text). */
  body: string | Uint8Array<ArrayBuffer>;
  /** Extra headers. */
  headers?: Record<string, string>;
  /** Path after the server URL (default Identity's /infer). */
  path?: string;
  /** Expected status. */
  status: number;
  /** Expected error message. */
  message: RegExp;
}

const INT32 = { name: "in_int32", datatype: "INT32", shape: [1, 2], data: [1, 2] };

function withBinary(
  json: unknown,
  bytes: ArrayLike<number>,
): Pick<Case, "body" | "headers"> {
  const header = encoder.encode(JSON.stringify(json));
  const body = new Uint8Array(header.byteLength + bytes.length);
  body.set(header);
  body.set(bytes, header.byteLength);
  return {
    body,
    headers: { "inference-header-content-length": String(header.byteLength) },
  };
}

const binaryInput = {
  name: "in_int32",
  datatype: "INT32",
  shape: [1, 2],
  parameters: { binary_data_size: 8 },
};

const CASES: Case[] = [
  { name: "bad JSON", body: "{not json", status: 400, message: /Unable to parse the request JSON/ },
  { name: "empty body", body: "", status: 400, message: /Unable to parse the request JSON/ },
  { name: "JSON array", body: "[1]", status: 400, message: /expected an object/ },
  { name: "missing inputs", body: "{}", status: 400, message: /missing 'inputs'/ },
  {
    name: "inputs not an array",
    body: '{"inputs":3}',
    status: 400,
    message: /'inputs': expected an array/,
  },
  {
    name: "input without a name",
    body: JSON.stringify({ inputs: [{ datatype: "INT32", shape: [1], data: [1] }] }),
    status: 400,
    message: /missing 'name'/,
  },
  {
    name: "input without a datatype",
    body: JSON.stringify({ inputs: [{ name: "in_int32", shape: [1], data: [1] }] }),
    status: 400,
    message: /missing 'datatype'/,
  },
  {
    name: "input without a shape",
    body: JSON.stringify({ inputs: [{ name: "in_int32", datatype: "INT32", data: [1] }] }),
    status: 400,
    message: /'shape' of input 'in_int32'/,
  },
  {
    name: "unknown datatype",
    body: JSON.stringify({ inputs: [{ ...INT32, datatype: "INT128" }] }),
    status: 400,
    message: /Invalid datatype 'INT128' of input 'in_int32'/,
  },
  {
    name: "negative dimension",
    body: JSON.stringify({ inputs: [{ ...INT32, shape: [1, -2] }] }),
    status: 400,
    message: /dimension -2 is not a non-negative integer/,
  },
  {
    name: "fractional dimension",
    body: JSON.stringify({ inputs: [{ ...INT32, shape: [1, 2.5] }] }),
    status: 400,
    message: /dimension 2.5 is not a non-negative integer/,
  },
  {
    name: "wrong element count",
    body: JSON.stringify({ inputs: [{ ...INT32, data: [1, 2, 3] }] }),
    status: 400,
    message: /shape \[1,2\] needs 2 elements but 'data' has 3/,
  },
  {
    name: "data of the wrong JSON type",
    body: JSON.stringify({ inputs: [{ ...INT32, data: [1, "2"] }] }),
    status: 400,
    message: /element 1 is "2", expected an integer/,
  },
  {
    name: "BOOL as a number",
    body: JSON.stringify({
      inputs: [{ name: "in_bool", datatype: "BOOL", shape: [1, 1], data: [1] }],
    }),
    status: 400,
    message: /expected true or false for BOOL/,
  },
  {
    name: "FP16 as JSON",
    body: JSON.stringify({
      inputs: [{ name: "in_float16", datatype: "FP16", shape: [1, 1], data: [1] }],
    }),
    status: 400,
    message:
      /Receiving FP16 data via JSON is not supported: use the binary data format for input 'in_float16'/,
  },
  {
    name: "FP16 output requested as JSON",
    ...withBinary({
      inputs: [{
        name: "in_float16",
        datatype: "FP16",
        shape: [1, 1],
        parameters: { binary_data_size: 2 },
      }],
    }, [0, 0x3c]),
    status: 400,
    message: /Sending FP16 data via JSON is not supported: request output 'out_float16'/,
  },
  {
    name: "both data and binary_data_size",
    ...withBinary({ inputs: [{ ...binaryInput, data: [1, 2] }] }, [1, 0, 0, 0, 2, 0, 0, 0]),
    status: 400,
    message: /exactly one of 'data' and 'binary_data_size'.*both are set/,
  },
  {
    name: "neither data nor binary_data_size",
    body: JSON.stringify({ inputs: [{ name: "in_int32", datatype: "INT32", shape: [1, 2] }] }),
    status: 400,
    message: /neither is set/,
  },
  {
    name: "binary data without Inference-Header-Content-Length",
    body: JSON.stringify({ inputs: [binaryInput] }),
    status: 400,
    message: /no 'Inference-Header-Content-Length' header/,
  },
  {
    name: "header length beyond the body",
    body: JSON.stringify({ inputs: [INT32] }),
    headers: { "inference-header-content-length": "100000" },
    status: 400,
    message:
      /Invalid 'Inference-Header-Content-Length' header: expected an integer within \[0, \d+\]/,
  },
  {
    name: "negative header length",
    body: JSON.stringify({ inputs: [INT32] }),
    headers: { "inference-header-content-length": "-4" },
    status: 400,
    message: /Invalid 'Inference-Header-Content-Length' header.*got '-4'/,
  },
  {
    name: "non-numeric header length",
    body: JSON.stringify({ inputs: [INT32] }),
    headers: { "inference-header-content-length": "ten" },
    status: 400,
    message: /Invalid 'Inference-Header-Content-Length' header.*got 'ten'/,
  },
  {
    name: "header length cutting the JSON",
    body: JSON.stringify({ inputs: [INT32] }),
    headers: { "inference-header-content-length": "5" },
    status: 400,
    message: /Unable to parse the request JSON/,
  },
  {
    name: "truncated binary body",
    ...withBinary({ inputs: [binaryInput] }, [1, 0, 0, 0, 2]),
    status: 400,
    message: /Unexpected size for input 'in_int32': expecting 8 bytes but only 5 remain/,
  },
  {
    name: "leftover bytes",
    ...withBinary({ inputs: [binaryInput] }, [1, 0, 0, 0, 2, 0, 0, 0, 3]),
    status: 400,
    message: /Unexpected additional input data for model 'Identity'/,
  },
  {
    name: "bad BYTES length prefix",
    ...withBinary({
      inputs: [{
        name: "in_bytes",
        datatype: "BYTES",
        shape: [1, 1],
        parameters: { binary_data_size: 6 },
      }],
    }, [200, 0, 0, 0, 97, 98]),
    status: 400,
    message: /Invalid binary data of input 'in_bytes'.*claims 200 bytes/,
  },
  {
    name: "reserved triton_ parameter",
    body: JSON.stringify({
      inputs: [INT32],
      parameters: { triton_enable_empty_final_response: true },
    }),
    status: 400,
    message: /names starting with 'triton_' are reserved/,
  },
  {
    name: "sequence parameters",
    body: JSON.stringify({ inputs: [INT32], parameters: { sequence_id: 5, sequence_start: true } }),
    status: 400,
    message: /Sequence batching is not supported/,
  },
  {
    name: "unknown input name (engine validation)",
    body: JSON.stringify({ inputs: [{ ...INT32, name: "nope" }] }),
    status: 400,
    message: /nope/,
  },
  {
    name: "unknown model",
    body: JSON.stringify({ inputs: [INT32] }),
    path: "/v2/models/Missing/infer",
    status: 404,
    message: /Missing/,
  },
  {
    name: "unknown version",
    body: JSON.stringify({ inputs: [INT32] }),
    path: "/v2/models/Identity/versions/9/infer",
    status: 404,
    message: /Identity/,
  },
  {
    name: "decoupled model",
    body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }] }),
    path: "/v2/models/Stream/infer",
    status: 501,
    message: /HTTP end point doesn't support models with decoupled transaction policy/,
  },
  {
    name: "model that throws",
    body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }] }),
    path: "/v2/models/Failing/infer",
    status: 500,
    message: /model exploded/,
  },
  {
    name: "oversize body",
    body: JSON.stringify({
      inputs: [{ ...INT32, shape: [1, 1000], data: new Array(1000).fill(1) }],
    }),
    status: 413,
    message: /Request body too large: the body exceeds the limit of 1024 bytes/,
  },
  {
    name: "corrupt gzip body",
    body: "not gzip at all",
    headers: { "content-encoding": "gzip" },
    status: 400,
    message: /Unable to decompress the gzip request body/,
  },
];

async function expectServing(url: string): Promise<void> {
  const response = await fetch(`${url}/v2/models/Identity/infer`, {
    method: "POST",
    body: JSON.stringify({ inputs: [INT32] }),
  });
  assert.equal(response.status, 200);
  const body = await response.json();
  assert.deepEqual(body.outputs[0].data, [1, 2]);
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer answers every malformed request with a status and a clear error, then keeps serving [${engine}]`, async (t) => {
    await using server = await startHttpServer(engine, [IDENTITY, DECOUPLED, FAILING], {
      maxRequestBytes: 1024,
    });
    for (const entry of CASES) {
      await t.step(entry.name, async () => {
        const response = await fetch(`${server.url}${entry.path ?? "/v2/models/Identity/infer"}`, {
          method: "POST",
          body: entry.body,
          headers: entry.headers ?? {},
        });
        assert.equal(response.status, entry.status);
        assert.equal(response.headers.get("content-type"), "application/json");
        const body = await response.json();
        assert.deepEqual(Object.keys(body), ["error"]);
        assert.match(body.error, entry.message);
        await expectServing(server.url);
      });
    }
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer enforces the body limit after decompression [${engine}]`, async () => {
    await using server = await startHttpServer(engine, [IDENTITY], { maxRequestBytes: 1024 });
    const json = JSON.stringify({
      inputs: [{ ...INT32, shape: [1, 2000], data: new Array(2000).fill(0) }],
    });
    const packed = await new Response(
      new Blob([json]).stream().pipeThrough(new CompressionStream("gzip")),
    ).bytes();
    assert.ok(packed.byteLength < 1024);
    const response = await fetch(`${server.url}/v2/models/Identity/infer`, {
      method: "POST",
      body: packed,
      headers: { "content-encoding": "gzip" },
    });
    assert.equal(response.status, 413);
    assert.match(
      (await response.json()).error,
      /the decompressed body exceeds the limit of 1024 bytes/,
    );
    await expectServing(server.url);
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP front end answers unknown paths with 404 and wrong methods with 405 [${engine}]`, async () => {
    await using server = await startHttpServer(engine, [IDENTITY]);
    const cases: [string, string, number, string][] = [
      ["GET", "/", 404, "Not Found"],
      ["GET", "/v2/", 404, "Not Found"],
      ["GET", "/v2/models/Identity/versions/one", 404, "Not Found"],
      ["POST", "/v2/models/Identity/versions/-1/infer", 404, "Not Found"],
      ["GET", "/v2/models/Identity/infer", 405, "Method Not Allowed"],
      ["POST", "/v2/health/live", 405, "Method Not Allowed"],
      ["PUT", "/v2/models/Identity/infer", 405, "Method Not Allowed"],
      ["GET", "/v2/repository/index", 405, "Method Not Allowed"],
    ];
    for (const [method, path, status, error] of cases) {
      const response = await fetch(`${server.url}${path}`, { method });
      assert.equal(response.status, status, `${method} ${path}`);
      assert.deepEqual(await response.json(), { error });
    }
    await expectServing(server.url);
  });
}

/** JSON text of an Identity request whose `data` is `data` (raw text, spliced in as is). */
function rawDataRequest(name: string, datatype: string, shape: number[], data: string): string {
  return `{"inputs":[{"name":"${name}","datatype":"${datatype}","shape":${
    JSON.stringify(shape)
  },"data":${data}}]}`;
}

const HOSTILE_CASES: Case[] = [
  {
    name: "data nested 100000 levels deep",
    body: rawDataRequest(
      "in_int32",
      "INT32",
      [1, 1],
      "[".repeat(100_000) + "1" + "]".repeat(100_000),
    ),
    status: 400,
    message:
      /^Unable to parse 'data' of input 'in_int32': arrays are nested more than 64 levels deep$/,
  },
  {
    name: "FP32 1e400 (beyond FP64, parsed as Infinity)",
    body: rawDataRequest("in_float32", "FP32", [1, 2], "[1, 1e400]"),
    status: 400,
    message:
      /^Unable to parse 'data' of input 'in_float32': element 1 is Infinity, expected a finite number within FP32 range \(about ±3.4028235e38\) for FP32$/,
  },
  {
    name: "FP32 -1e39 (finite, beyond FP32)",
    body: rawDataRequest("in_float32", "FP32", [1, 1], "[-1e39]"),
    status: 400,
    message:
      /^Unable to parse 'data' of input 'in_float32': element 0 is -1e\+39, expected a finite number within FP32 range/,
  },
  {
    name: "FP64 1e400",
    body: rawDataRequest("in_float64", "FP64", [1, 1], "[1e400]"),
    status: 400,
    message:
      /^Unable to parse 'data' of input 'in_float64': element 0 is Infinity, expected a finite number for FP64$/,
  },
  {
    name: "a BYTES string that is not UTF-8",
    body: new Uint8Array([
      ...encoder.encode(rawDataRequest("in_bytes", "BYTES", [1, 1], '["ab')),
      0xff,
      0xfe,
      ...encoder.encode('"]}]}'),
    ]),
    status: 400,
    message:
      /^Unable to parse the request JSON: the JSON text is not valid UTF-8 \(byte \d+ is 0xff\)$/,
  },
  {
    name: "binary BYTES with far more elements than the shape",
    // 4 MiB of empty elements (each a zero length prefix) for a one-element shape.
    ...withBinary({
      inputs: [{
        name: "in_bytes",
        datatype: "BYTES",
        shape: [1, 1],
        parameters: { binary_data_size: 4 << 20 },
      }],
    }, new Uint8Array(4 << 20)),
    status: 400,
    message:
      /^Invalid binary data of input 'in_bytes': Invalid BYTES data: expected 1 element for the shape, found more \(4194300 bytes follow element 0\)$/,
  },
];

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer refuses deep, out-of-range, non-UTF-8 and overfull data with 400 [${engine}]`, async (t) => {
    await using server = await startHttpServer(engine, [IDENTITY]);
    for (const entry of HOSTILE_CASES) {
      await t.step(entry.name, async () => {
        const response = await fetch(`${server.url}/v2/models/Identity/infer`, {
          method: "POST",
          body: entry.body,
          headers: entry.headers ?? {},
        });
        const json = await response.json();
        assert.equal(response.status, entry.status, JSON.stringify(json));
        assert.match(json.error, entry.message);
        await expectServing(server.url);
      });
    }
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer answers a gzip bomb 413 and health probes meanwhile [${engine}]`, async () => {
    const limit = 16 << 20;
    await using server = await startHttpServer(engine, [IDENTITY], { maxRequestBytes: limit });
    // 512 MiB of zeros, about 512 KiB of gzip, compressed as a stream.
    let left = 512 << 20;
    const block = new Uint8Array(1 << 20);
    const zeros = new ReadableStream<Uint8Array<ArrayBuffer>>({
      pull(controller): void {
        if (left <= 0) return controller.close();
        controller.enqueue(block);
        left -= block.byteLength;
      },
    });
    const bomb = await new Response(zeros.pipeThrough(new CompressionStream("gzip"))).bytes();
    assert.ok(bomb.byteLength < limit);
    const answered = fetch(`${server.url}/v2/models/Identity/infer`, {
      method: "POST",
      body: bomb,
      headers: { "content-encoding": "gzip" },
    });
    const probes = await Promise.all(
      [0, 1, 2].map(() => fetch(`${server.url}/v2/health/live`).then((r) => r.status)),
    );
    assert.deepEqual(probes, [200, 200, 200]);
    const response = await answered;
    assert.equal(response.status, 413);
    assert.equal(
      (await response.json()).error,
      `Request body too large: the decompressed body exceeds the limit of ${limit} bytes`,
    );
    await expectServing(server.url);
  });
}
