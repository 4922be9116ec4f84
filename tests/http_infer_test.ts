import assert from "node:assert/strict";
import { ENGINES, watchdog } from "./_helpers.ts";
import { Buffer } from "node:buffer";
import { request as httpRequest } from "node:http";
import { ALL_DTYPES, IDENTITY, startHttpServer, type TestModel } from "./_http_server.ts";
import type { InferRequest } from "../src/callable/types.ts";
import { kserveName } from "../src/tensor/dtype.ts";

// As in tests/_helpers.ts (not imported: it loads the whole facade): CI needs the Python peer.
const PEERS_REQUIRED = Deno.env.get("CI") === "true" ||
  Deno.env.get("DENOTRITON_REQUIRE_PEERS") === "1";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Echoes the request parameters as JSON. */
const PARAMS: TestModel = {
  name: "Params",
  fn: (requests: InferRequest[]) =>
    requests.map((request) => ({
      out: {
        dtype: "bytes" as const,
        shape: [1, 1],
        data: [encoder.encode(JSON.stringify(request.parameters))],
      },
    })),
  inputs: [{ name: "in", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "out", dtype: "bytes", shape: [1] }],
};

/** Scores for classification: returns its input. */
const SCORES: TestModel = {
  name: "Scores",
  fn: (requests: InferRequest[]) => requests.map((request) => ({ probs: request.data.x! })),
  inputs: [{ name: "x", dtype: "float32", shape: [4] }],
  outputs: [{ name: "probs", dtype: "float32", shape: [4] }],
};

/** Non-batching model with a single INT32 input, for raw binary requests. */
const RAW: TestModel = {
  name: "Raw",
  fn: (requests: InferRequest[]) => requests.map((request) => ({ y: request.data.x! })),
  inputs: [{ name: "x", dtype: "int32", shape: [2, -1] }],
  outputs: [{ name: "y", dtype: "int32", shape: [2, -1] }],
  config: { batching: false },
};

function binaryBody(
  json: unknown,
  ...parts: Uint8Array[]
): { body: Uint8Array<ArrayBuffer>; headers: Record<string, string> } {
  const header = encoder.encode(JSON.stringify(json));
  const size = parts.reduce((n, part) => n + part.byteLength, header.byteLength);
  const body = new Uint8Array(size);
  body.set(header);
  let offset = header.byteLength;
  for (const part of parts) {
    body.set(part, offset);
    offset += part.byteLength;
  }
  return { body, headers: { "inference-header-content-length": String(header.byteLength) } };
}

interface Reply {
  status: number;
  headers: Headers;
  json: Record<string, unknown> & { outputs?: Record<string, unknown>[] };
  binary: Uint8Array;
}

async function post(
  url: string,
  body: BodyInit,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const response = await fetch(url, { method: "POST", body, headers });
  const bytes = await response.bytes();
  const length = response.headers.get("inference-header-content-length");
  const jsonEnd = length === null ? bytes.byteLength : Number(length);
  return {
    status: response.status,
    headers: response.headers,
    json: JSON.parse(decoder.decode(bytes.subarray(0, jsonEnd))),
    binary: bytes.subarray(jsonEnd),
  };
}

/** Sample values per dtype: JSON data and the same values' little-endian bytes. */
const SAMPLES: Record<string, { json?: unknown[]; bytes: number[] }> = {
  bool: { json: [true, false, true], bytes: [1, 0, 1] },
  int8: { json: [-128, 0, 127], bytes: [0x80, 0x00, 0x7f] },
  int16: { json: [-2, 256, 1], bytes: [0xfe, 0xff, 0x00, 0x01, 0x01, 0x00] },
  int32: { json: [-1, 2, 65536], bytes: [255, 255, 255, 255, 2, 0, 0, 0, 0, 0, 1, 0] },
  int64: {
    json: ["9007199254740993", "-9223372036854775808", "1"],
    bytes: [1, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 1, 0, 0, 0, 0, 0, 0, 0],
  },
  uint8: { json: [0, 1, 255], bytes: [0, 1, 255] },
  uint16: { json: [0, 65535, 2], bytes: [0, 0, 255, 255, 2, 0] },
  uint32: { json: [4294967295, 0, 3], bytes: [255, 255, 255, 255, 0, 0, 0, 0, 3, 0, 0, 0] },
  uint64: {
    json: ["18446744073709551615", "0", "9007199254740993"],
    bytes: [
      255,
      255,
      255,
      255,
      255,
      255,
      255,
      255,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      1,
      0,
      0,
      0,
      0,
      0,
      0x20,
      0,
    ],
  },
  float16: { bytes: [0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38] },
  bfloat16: { bytes: [0x80, 0x3f, 0x00, 0xc0, 0x00, 0x3f] },
  float32: { json: [0.5, -2, 1024.25], bytes: [0, 0, 0, 0x3f, 0, 0, 0, 0xc0, 0, 0x08, 0x80, 0x44] },
  float64: {
    json: [0.1, -1, 1e300],
    bytes: [...new Uint8Array(new Float64Array([0.1, -1, 1e300]).buffer)],
  },
  bytes: {
    json: ["a\u0000b", "", "héllo"],
    bytes: [3, 0, 0, 0, 97, 0, 98, 0, 0, 0, 0, 6, 0, 0, 0, 104, 195, 169, 108, 108, 111],
  },
};

// Raw JSON text so 64-bit values keep every digit on the way in and are compared as text out.
function jsonData(values: unknown[], dtype: string): string {
  return `[[${values.map((v) => dtype.includes("int64") ? v : JSON.stringify(v)).join(",")}]]`;
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer round-trips every dtype in JSON and binary form [${engine}]`, async (t) => {
    await using server = await startHttpServer(engine, [IDENTITY]);
    const url = `${server.url}/v2/models/Identity/infer`;
    for (const dtype of ALL_DTYPES) {
      const sample = SAMPLES[dtype]!;
      const datatype = kserveName(dtype);
      await t.step(`${datatype} binary in, binary out`, async () => {
        const { body, headers } = binaryBody({
          inputs: [{
            name: `in_${dtype}`,
            datatype,
            shape: [1, 3],
            parameters: { binary_data_size: sample.bytes.length },
          }],
          outputs: [{ name: `out_${dtype}`, parameters: { binary_data: true } }],
        }, new Uint8Array(sample.bytes));
        const reply = await post(url, body, headers);
        assert.equal(reply.status, 200, JSON.stringify(reply.json));
        assert.equal(reply.headers.get("content-type"), "application/octet-stream");
        assert.deepEqual(reply.json, {
          model_name: "Identity",
          model_version: "1",
          outputs: [{
            name: `out_${dtype}`,
            datatype,
            shape: [1, 3],
            parameters: { binary_data_size: sample.bytes.length },
          }],
        });
        assert.deepEqual(Array.from(reply.binary), sample.bytes);
      });
      if (sample.json === undefined) continue;
      await t.step(`${datatype} JSON in, JSON out`, async () => {
        const text =
          `{"inputs":[{"name":"in_${dtype}","datatype":"${datatype}","shape":[1,3],"data":${
            jsonData(sample.json!, dtype)
          }}],"outputs":[{"name":"out_${dtype}"}]}`;
        const response = await fetch(url, { method: "POST", body: text });
        assert.equal(response.status, 200);
        assert.equal(response.headers.get("content-type"), "application/json");
        const replyText = await response.text();
        assert.ok(
          replyText.endsWith(
            `{"name":"out_${dtype}","datatype":"${datatype}","shape":[1,3],"data":${
              jsonData(sample.json!, dtype).slice(1, -1)
            }}]}`,
          ),
          replyText,
        );
      });
      await t.step(`${datatype} JSON in, binary out (binary_data_output)`, async () => {
        const text =
          `{"parameters":{"binary_data_output":true},"inputs":[{"name":"in_${dtype}","datatype":"${datatype}","shape":[1,3],"data":${
            jsonData(sample.json!, dtype)
          }}]}`;
        const reply = await post(url, text);
        assert.equal(reply.status, 200);
        assert.deepEqual(Array.from(reply.binary), sample.bytes);
      });
    }
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer mixes JSON and binary outputs, echoes the id and keeps output order [${engine}]`, async () => {
    await using server = await startHttpServer(engine, [IDENTITY]);
    const { body, headers } = binaryBody({
      id: "req-7",
      inputs: [
        {
          name: "in_float16",
          datatype: "FP16",
          shape: [1, 1],
          parameters: { binary_data_size: 2 },
        },
        { name: "in_int32", datatype: "INT32", shape: [1, 2], data: [[7, 8]] },
      ],
      outputs: [{ name: "out_int32" }, { name: "out_float16", parameters: { binary_data: true } }],
    }, new Uint8Array([0x00, 0x3c]));
    const reply = await post(`${server.url}/v2/models/Identity/versions/1/infer`, body, headers);
    assert.equal(reply.status, 200);
    assert.equal(reply.json.id, "req-7");
    const outputs = reply.json.outputs!;
    const byName = Object.fromEntries(outputs.map((output) => [output.name, output]));
    assert.deepEqual(byName.out_int32, {
      name: "out_int32",
      datatype: "INT32",
      shape: [1, 2],
      data: [7, 8],
    });
    assert.deepEqual(byName.out_float16, {
      name: "out_float16",
      datatype: "FP16",
      shape: [1, 1],
      parameters: { binary_data_size: 2 },
    });
    assert.deepEqual(Array.from(reply.binary), [0x00, 0x3c]);
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer forwards matching headers and body parameters to the model [${engine}]`, async () => {
    await using server = await startHttpServer(engine, [PARAMS], { headerForwardPattern: "^my-" });
    const reply = await post(
      `${server.url}/v2/models/Params/infer`,
      JSON.stringify({
        parameters: { scale: 2, mode: "fast", on: true, ratio: 0.5, priority: 0, timeout: 0 },
        inputs: [{ name: "in", datatype: "FP32", shape: [1, 1], data: [1] }],
      }),
      { "My-Header": "value 1", "x-my-other": "not forwarded", "My-Second": "two" },
    );
    assert.equal(reply.status, 200, JSON.stringify(reply.json));
    const seen = JSON.parse((reply.json.outputs![0]!.data as string[])[0]!);
    assert.deepEqual(seen, {
      "my-header": "value 1",
      "my-second": "two",
      scale: 2,
      mode: "fast",
      on: true,
      ratio: 0.5,
    });
  });
}

/** POSTs with node:http, which hands back the body exactly as sent (no transparent decoding). */
function rawPost(
  url: string,
  body: Uint8Array,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, unknown>; body: Uint8Array }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method: "POST", headers }, (response) => {
      const chunks: Uint8Array[] = [];
      response.on("data", (chunk: Uint8Array) => chunks.push(chunk));
      response.on("end", () =>
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: new Uint8Array(Buffer.concat(chunks)),
        }));
      response.on("error", reject);
    });
    request.on("error", reject);
    request.end(body);
  });
}

async function transform(
  bytes: Uint8Array,
  stream: CompressionStream | DecompressionStream,
): Promise<Uint8Array> {
  return await new Response(
    new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(stream),
  ).bytes();
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer decompresses gzip/deflate requests and compresses large responses [${engine}]`, async (t) => {
    await using server = await startHttpServer(engine, [IDENTITY]);
    // Two 1,000-byte elements of one repeated letter: 2,008 bytes that compress well.
    const element = new Uint8Array(1000).fill(97);
    const data = new Uint8Array(2 * (4 + 1000));
    const view = new DataView(data.buffer);
    view.setUint32(0, 1000, true);
    data.set(element, 4);
    view.setUint32(1004, 1000, true);
    data.set(element, 1008);
    const { body, headers } = binaryBody({
      inputs: [{
        name: "in_bytes",
        datatype: "BYTES",
        shape: [1, 2],
        parameters: { binary_data_size: data.byteLength },
      }],
      outputs: [{ name: "out_bytes", parameters: { binary_data: true } }],
    }, data);
    for (const encoding of ["gzip", "deflate"] as const) {
      await t.step(encoding, async () => {
        const packed = await transform(body, new CompressionStream(encoding));
        const response = await rawPost(`${server.url}/v2/models/Identity/infer`, packed, {
          ...headers,
          "content-encoding": encoding,
          "accept-encoding": encoding,
        });
        assert.equal(response.status, 200);
        assert.equal(response.headers["content-encoding"], encoding);
        assert.ok(response.body.byteLength < 200, `${response.body.byteLength} bytes`);
        const bytes = await transform(response.body, new DecompressionStream(encoding));
        // The header length counts the uncompressed JSON.
        const jsonEnd = Number(response.headers["inference-header-content-length"]);
        const json = JSON.parse(decoder.decode(bytes.subarray(0, jsonEnd)));
        assert.equal(json.outputs[0].parameters.binary_data_size, 2008);
        assert.deepEqual(bytes.subarray(jsonEnd), data);
      });
    }
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer sends small and incompressible responses uncompressed, even to gzip clients [${engine}]`, async () => {
    await using server = await startHttpServer(engine, [IDENTITY]);
    const url = `${server.url}/v2/models/Identity/infer`;
    const small = JSON.stringify({
      inputs: [{ name: "in_int32", datatype: "INT32", shape: [1, 3], data: [1, 2, 3] }],
    });
    // What fetch(), browsers and Python requests advertise.
    for (const accept of ["gzip", "deflate", "gzip, deflate, br"]) {
      const response = await rawPost(url, encoder.encode(small), { "accept-encoding": accept });
      assert.equal(response.status, 200);
      assert.equal(response.headers["content-encoding"], undefined, accept);
      assert.deepEqual(JSON.parse(decoder.decode(response.body)).outputs, [
        { name: "out_int32", datatype: "INT32", shape: [1, 3], data: [1, 2, 3] },
      ]);
    }
    // 256 KiB of random bytes do not shrink: sent as they are.
    const noise = new Uint8Array(256 * 1024);
    for (let i = 0; i < noise.byteLength; i += 65536) {
      crypto.getRandomValues(noise.subarray(i, i + 65536));
    }
    const { body, headers } = binaryBody({
      inputs: [{
        name: "in_uint8",
        datatype: "UINT8",
        shape: [1, noise.byteLength],
        parameters: { binary_data_size: noise.byteLength },
      }],
      outputs: [{ name: "out_uint8", parameters: { binary_data: true } }],
    }, noise);
    const response = await rawPost(url, body, { ...headers, "accept-encoding": "gzip" });
    assert.equal(response.status, 200);
    assert.equal(response.headers["content-encoding"], undefined);
    const jsonEnd = Number(response.headers["inference-header-content-length"]);
    assert.deepEqual(response.body.subarray(jsonEnd), noise);
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer sends large binary outputs with small ones between, requests in flight side by side [${engine}]`, async () => {
    await using server = await startHttpServer(engine, [IDENTITY]);
    const url = `${server.url}/v2/models/Identity/infer`;
    // Large outputs go on the wire as their own bytes, the small one between them is copied.
    const send = async (k: number): Promise<void> => {
      const big = new Uint8Array(200_000).map((_, i) => (i * k) & 0xff);
      const small = new Int32Array([k, -k]);
      const wide = new Float64Array(20_000).map((_, i) => i / k);
      const { body, headers } = binaryBody(
        {
          inputs: [
            {
              name: "in_uint8",
              datatype: "UINT8",
              shape: [1, 200_000],
              parameters: { binary_data_size: 200_000 },
            },
            {
              name: "in_int32",
              datatype: "INT32",
              shape: [1, 2],
              parameters: { binary_data_size: 8 },
            },
            {
              name: "in_float64",
              datatype: "FP64",
              shape: [1, 20_000],
              parameters: { binary_data_size: 160_000 },
            },
          ],
          outputs: ["out_uint8", "out_int32", "out_float64"].map((name) => ({
            name,
            parameters: { binary_data: true },
          })),
        },
        big,
        new Uint8Array(small.buffer),
        new Uint8Array(wide.buffer),
      );
      const response = await rawPost(url, body, headers);
      assert.equal(response.status, 200);
      const jsonEnd = Number(response.headers["inference-header-content-length"]);
      const json = JSON.parse(decoder.decode(response.body.subarray(0, jsonEnd)));
      assert.deepEqual(
        json.outputs.map((o: { name: string }) => o.name).sort(),
        ["out_float64", "out_int32", "out_uint8"],
      );
      let offset = jsonEnd;
      const expected: Record<string, Uint8Array> = {
        out_uint8: big,
        out_int32: new Uint8Array(small.buffer),
        out_float64: new Uint8Array(wide.buffer),
      };
      for (
        const output of json.outputs as { name: string; parameters: { binary_data_size: number } }[]
      ) {
        const size = output.parameters.binary_data_size;
        assert.deepEqual(
          response.body.subarray(offset, offset + size),
          expected[output.name],
          output.name,
        );
        offset += size;
      }
      assert.equal(offset, response.body.byteLength);
    };
    await Promise.all([1, 3, 5, 7].map(send));
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer takes a raw binary body with Inference-Header-Content-Length: 0 [${engine}]`, async () => {
    await using server = await startHttpServer(engine, [RAW]);
    const reply = await post(
      `${server.url}/v2/models/Raw/infer`,
      new Uint8Array(new Int32Array([1, 2, 3, 4, 5, 6]).buffer),
      { "inference-header-content-length": "0" },
    );
    assert.equal(reply.status, 200, JSON.stringify(reply.json));
    assert.deepEqual(reply.json.outputs, [
      { name: "y", datatype: "INT32", shape: [2, 3], parameters: { binary_data_size: 24 } },
    ]);
    assert.deepEqual(Array.from(new Int32Array(reply.binary.slice().buffer)), [1, 2, 3, 4, 5, 6]);
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer answers classification as top-N BYTES strings [${engine}]`, async () => {
    await using server = await startHttpServer(engine, [SCORES]);
    const reply = await post(
      `${server.url}/v2/models/Scores/infer`,
      JSON.stringify({
        inputs: [{
          name: "x",
          datatype: "FP32",
          shape: [2, 4],
          data: [[0.1, 0.4, 0.3, 0.2], [4, 3, 2, 1]],
        }],
        outputs: [{ name: "probs", parameters: { classification: 2 } }],
      }),
    );
    assert.equal(reply.status, 200, JSON.stringify(reply.json));
    assert.deepEqual(reply.json.outputs, [{
      name: "probs",
      datatype: "BYTES",
      shape: [2, 2],
      data: ["0.400000:1", "0.300000:2", "4.000000:0", "3.000000:1"],
    }]);
  });
}

for (const engine of ENGINES) {
  Deno.test(`HTTP /infer passes a client disconnect to the model as an aborted signal [${engine}]`, async () => {
    const { promise: aborted, resolve } = Promise.withResolvers<boolean>();
    const { promise: started, resolve: start } = Promise.withResolvers<void>();
    const slow: TestModel = {
      name: "Slow",
      fn: async (requests: InferRequest[]) => {
        start();
        const signal = requests[0]!.signal;
        await new Promise<void>((done) => {
          if (signal.aborted) return done();
          signal.addEventListener("abort", () => done(), { once: true });
        });
        resolve(signal.aborted);
        return requests.map((request) => ({ y: request.data.x! }));
      },
      inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
      outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    };
    await using server = await startHttpServer(engine, [slow]);
    // A raw socket closed mid-request is a deterministic disconnect; fetch's abort may leave a
    // pooled connection open.
    const port = Number(new URL(server.url).port);
    const connection = await Deno.connect({ hostname: "127.0.0.1", port });
    const body = JSON.stringify({
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }],
    });
    await connection.write(new TextEncoder().encode(
      `POST /v2/models/Slow/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body}`,
    ));
    await watchdog(started, "the request to start");
    connection.close();
    // Guard against a hang: a disconnect that never reaches the model fails instead.
    const guard = setTimeout(() => resolve(false), 30_000);
    try {
      assert.equal(await aborted, true, "the model never saw the disconnect");
    } finally {
      clearTimeout(guard);
    }
    const health = await fetch(`${server.url}/v2/health/ready`);
    assert.equal(health.status, 200);
    await health.body?.cancel();
  });
}

const PYTHON_CLIENT = String.raw`
import sys, json, numpy as np
import tritonclient.http as httpclient
url = sys.argv[1]
client = httpclient.InferenceServerClient(url)
assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("Identity")
assert client.get_model_metadata("Identity")["name"] == "Identity"
assert client.get_model_config("Identity")["max_batch_size"] == 8
samples = {
    "BOOL": ("bool", np.array([[True, False]])),
    "INT8": ("int8", np.array([[-128, 127]], np.int8)),
    "INT64": ("int64", np.array([[2**62 + 1, -(2**63)]], np.int64)),
    "UINT64": ("uint64", np.array([[2**64 - 1, 0]], np.uint64)),
    "FP16": ("float16", np.array([[1.5, -2]], np.float16)),
    "FP32": ("float32", np.array([[0.25, 1e30]], np.float32)),
    "FP64": ("float64", np.array([[0.1, 1e300]], np.float64)),
    "BYTES": ("bytes", np.array([[b"a\x00b", b""]], np.object_)),
}
for compression in (None, "gzip", "deflate"):
    for binary in (True, False):
        for datatype, (name, array) in samples.items():
            if datatype == "FP16" and not binary:
                continue
            tensor = httpclient.InferInput("in_" + name, list(array.shape), datatype)
            tensor.set_data_from_numpy(array, binary_data=binary)
            output = httpclient.InferRequestedOutput("out_" + name, binary_data=binary)
            result = client.infer("Identity", [tensor], outputs=[output],
                                  request_compression_algorithm=compression,
                                  response_compression_algorithm=compression)
            got = result.as_numpy("out_" + name)
            if datatype == "BYTES" and not binary:
                got = np.array([[x.encode() if isinstance(x, str) else x for x in got.flatten()]], np.object_)
            assert got.shape == array.shape and (got == array).all(), (datatype, binary, compression, got)
try:
    client.infer("Missing", [httpclient.InferInput("x", [1], "FP32").set_data_from_numpy(np.ones(1, np.float32))])
    raise SystemExit("expected an error")
except httpclient.InferenceServerException as error:
    assert error.status() == "404", error.status()
print(json.dumps(client.get_inference_statistics("Identity")["model_stats"][0]["inference_count"]))
`;

for (const engine of ENGINES) {
  Deno.test(`the official Python tritonclient talks to the HTTP front end [${engine}]`, async (t) => {
    const check = await new Deno.Command("python3", {
      args: ["-c", "import tritonclient.http, numpy"],
      stderr: "null",
      signal: AbortSignal.timeout(60_000),
    })
      .output().catch(() => undefined);
    if (check === undefined || !check.success) {
      if (PEERS_REQUIRED) throw new Error("python3 with tritonclient[http] is required");
      await t.step("skipped: python3 with tritonclient[http] is not installed", () => {});
      return;
    }
    await using server = await startHttpServer(engine, [IDENTITY]);
    const output = await new Deno.Command("python3", {
      args: ["-c", PYTHON_CLIENT, server.url.replace("http://", "")],
      signal: AbortSignal.timeout(180_000),
    }).output();
    assert.ok(output.success, decoder.decode(output.stderr));
    assert.equal(decoder.decode(output.stdout).trim(), String(3 * 2 * 8 - 3));
  });
}
