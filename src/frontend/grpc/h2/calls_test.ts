import assert from "node:assert/strict";
import http2 from "node:http2";
import { Buffer } from "node:buffer";
import zlib from "node:zlib";
import grpc from "@grpc/grpc-js";
import { listenGrpc } from "./server.ts";
import { MESSAGE_PREFIX_BYTES, RAW_ALIGNMENT, writePrefix } from "../message_framing.ts";
import {
  type DuplexMethod,
  GrpcError,
  type ResponseEncoder,
  type Service,
  Status,
  type UnaryCall,
  type UnaryMethod,
} from "../call.ts";
import { BufferPool } from "../buffer_pool.ts";
import { codecs, type ModelInferResponse } from "../../../protocol/grpc_codec.ts";

const identity = (bytes: Buffer): Buffer => bytes;
const text = new TextEncoder();

/** Responses as they are: the bytes after the room left for the prefix. */
const raw: ResponseEncoder<Uint8Array> = {
  encode(message, { headroom = 0, allocate = (n) => new Uint8Array(n) }): Uint8Array {
    const bytes = allocate(headroom + message.byteLength);
    bytes.set(message, headroom);
    return bytes;
  },
};

function unaryMethod(
  handle: (call: UnaryCall) => Uint8Array | Promise<Uint8Array>,
): UnaryMethod<Uint8Array> {
  return { kind: "unary", group: "inference", response: raw, handle };
}

const cancelled: string[] = [];

/**
 * A test service: Echo (unary, prefixed with the x-tag metadata), Meta (the metadata as JSON),
 * Hang (never answers), Slow (answers after 300 ms), Fail (an error), Big (a 2000-byte answer),
 * Chat (bidi echo).
 */
const service: Service = {
  name: "test.T",
  methods: {
    Echo: unaryMethod((call) =>
      Buffer.concat([text.encode(call.metadata.get("x-tag") ?? ""), call.request])
    ),
    Meta: unaryMethod((call) =>
      text.encode(JSON.stringify({ all: [...call.metadata], tags: call.metadata.getAll("x-tag") }))
    ),
    Hang: unaryMethod((call) =>
      new Promise<never>(() => {
        call.signal.addEventListener("abort", () => cancelled.push(call.path));
      })
    ),
    Slow: unaryMethod((call) =>
      new Promise((resolve) => setTimeout(() => resolve(call.request), 300))
    ),
    Fail: unaryMethod(() => {
      throw new GrpcError(Status.NOT_FOUND, "no model named 'é 100%'");
    }),
    Big: unaryMethod(() => new Uint8Array(2000).fill(1)),
    Chat: {
      kind: "duplex",
      group: "inference",
      response: raw,
      handle(call): void {
        call.onmessage = (message) => {
          if (new TextDecoder().decode(message) === "fail") {
            call.end({ code: Status.INVALID_ARGUMENT, details: "told to fail" });
          } else {
            call.write(Buffer.concat([text.encode("re:"), message]));
          }
        };
        call.onend = () => call.end();
      },
    } satisfies DuplexMethod<Uint8Array>,
  },
};

/** The test service as grpc-js's client sees it: raw bytes both ways. */
const definition: grpc.ServiceDefinition = Object.fromEntries(
  Object.entries(service.methods).map(([name, method]) => [name, {
    path: `/${service.name}/${name}`,
    requestStream: method.kind === "duplex",
    responseStream: method.kind === "duplex",
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  }]),
);

async function withServer(
  run: (port: number) => Promise<void>,
  maxMessageBytes = 1024 * 1024,
): Promise<void> {
  const server = await listenGrpc([service], {
    hostname: "127.0.0.1",
    port: 0,
    maxMessageBytes,
    keepaliveTimeMs: 7_200_000,
    keepaliveTimeoutMs: 20_000,
  });
  try {
    await run(server.port);
  } finally {
    server.forceShutdown();
  }
}

// deno-lint-ignore no-explicit-any
type Client = any;
const Client = grpc.makeGenericClientConstructor(definition, "T");

function unary(client: Client, method: string, body: Buffer, options: {
  metadata?: grpc.Metadata;
  deadline?: number;
} = {}): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    client[method](
      body,
      options.metadata ?? new grpc.Metadata(),
      options.deadline === undefined ? {} : { deadline: Date.now() + options.deadline },
      (error: grpc.ServiceError | null, value: Buffer) => error ? reject(error) : resolve(value),
    )
  );
}

Deno.test("gRPC over the h2 session: unary calls, metadata, gzip-compressed requests", async () => {
  await withServer(async (port) => {
    const plain = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const gzip = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
      "grpc.default_compression_algorithm": grpc.compressionAlgorithms.gzip,
    });
    try {
      const metadata = new grpc.Metadata();
      metadata.set("x-tag", "t:");
      assert.equal(
        (await unary(plain, "Echo", Buffer.from("hi"), { metadata })).toString(),
        "t:hi",
      );
      const big = Buffer.alloc(300_000, 7);
      assert.ok(big.equals(await unary(gzip, "Echo", big)));
      await assert.rejects(
        unary(plain, "Fail", Buffer.from("x")),
        (error: grpc.ServiceError) =>
          error.code === grpc.status.NOT_FOUND && error.details === "no model named 'é 100%'",
      );
    } finally {
      plain.close();
      gzip.close();
    }
  });
});

Deno.test("gRPC over the h2 session: deadlines, sizes and unknown methods get grpc-js's statuses", async () => {
  await withServer(async (port) => {
    const client: Client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
      await assert.rejects(
        unary(client, "Hang", Buffer.from("x"), { deadline: 200 }),
        (error: grpc.ServiceError) => error.code === grpc.status.DEADLINE_EXCEEDED,
      );
      // The client gives up at its deadline; the server's own timer (or the client's reset)
      // tells the handler, within moments.
      for (let waited = 0; cancelled.length === 0 && waited < 2000; waited += 20) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.deepEqual(cancelled, ["/test.T/Hang"]);
      await assert.rejects(
        unary(client, "Echo", Buffer.alloc(2000)),
        (error: grpc.ServiceError) =>
          error.code === grpc.status.RESOURCE_EXHAUSTED &&
          /Received message larger than max \(2000 vs 1024\)/.test(error.details),
      );
      const unknown = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
      await assert.rejects(
        new Promise((resolve, reject) =>
          unknown.makeUnaryRequest(
            "/test.T/Nope",
            identity,
            identity,
            Buffer.from("x"),
            (error, value) => error ? reject(error) : resolve(value),
          )
        ),
        (error: grpc.ServiceError) =>
          error.code === grpc.status.UNIMPLEMENTED &&
          error.details === "The server does not implement the method /test.T/Nope",
      );
      unknown.close();
      // The server still serves after all of that.
      assert.equal((await unary(client, "Echo", Buffer.from("ok"))).toString(), "ok");
    } finally {
      client.close();
    }
  }, 1024);
});

Deno.test("gRPC over the h2 session: a bidirectional stream answers each message and ends with the handler's status", async () => {
  await withServer(async (port) => {
    const client: Client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
      const run = (messages: string[]) =>
        new Promise<{ replies: string[]; status: grpc.StatusObject }>((resolve) => {
          const call = client.Chat();
          const replies: string[] = [];
          call.on("data", (message: Buffer) => replies.push(message.toString()));
          call.on("error", () => {});
          call.on("status", (status: grpc.StatusObject) => resolve({ replies, status }));
          for (const message of messages) call.write(Buffer.from(message));
          call.end();
        });
      const ok = await run(["a", "b", "c"]);
      assert.deepEqual(ok.replies, ["re:a", "re:b", "re:c"]);
      assert.equal(ok.status.code, grpc.status.OK);
      const failed = await run(["a", "fail"]);
      assert.deepEqual(failed.replies, ["re:a"]);
      assert.equal(failed.status.code, grpc.status.INVALID_ARGUMENT);
      assert.equal(failed.status.details, "told to fail");
    } finally {
      client.close();
    }
  });
});

Deno.test("gRPC over the h2 session: a request that is not gRPC gets HTTP 415", async () => {
  await withServer(async (port) => {
    const client = http2.connect(`http://127.0.0.1:${port}`);
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const stream = client.request({
          ":method": "POST",
          ":path": "/test.T/Echo",
          "content-type": "application/json",
        });
        stream.on("response", (headers) => resolve(Number(headers[":status"])));
        stream.on("error", reject);
        stream.end("{}");
      });
      assert.equal(status, 415);
    } finally {
      client.close();
    }
  });
});

Deno.test("gRPC over the h2 session: shutdown lets a call in flight answer, then cancels what never ends", async () => {
  const server = await listenGrpc([service], {
    hostname: "127.0.0.1",
    port: 0,
    maxMessageBytes: 1024,
    keepaliveTimeMs: 7_200_000,
    keepaliveTimeoutMs: 20_000,
  });
  const port = server.port;
  const slow: Client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const hang: Client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  try {
    // Both calls reach the server before it stops taking new ones.
    assert.equal((await unary(slow, "Echo", Buffer.from("warm"))).toString(), "warm");
    assert.equal((await unary(hang, "Echo", Buffer.from("warm"))).toString(), "warm");
    const answered = unary(slow, "Slow", Buffer.from("late"));
    const hung = unary(hang, "Hang", Buffer.from("x"));
    hung.catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 50));
    let stopped = false;
    server.tryShutdown(() => stopped = true);
    assert.equal((await answered).toString(), "late");
    assert.equal(stopped, false, "a call still hangs");
    server.forceShutdown();
    await assert.rejects(
      hung,
      (error: grpc.ServiceError) => error.code === grpc.status.UNAVAILABLE,
    );
    for (let waited = 0; !stopped && waited < 2000; waited += 20) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(stopped, true);
    // Nothing listens any more.
    await assert.rejects(
      Deno.connect({ hostname: "127.0.0.1", port }),
      Deno.errors.ConnectionRefused,
    );
  } finally {
    server.forceShutdown();
    slow.close();
    hang.close();
  }
});

/** What a raw HTTP/2 request got back: status, headers and trailers merged, and the body. */
async function rawCall(
  port: number,
  headers: http2.OutgoingHttpHeaders,
  body: Uint8Array,
): Promise<{ status: number; fields: Record<string, string>; body: Buffer }> {
  const client = http2.connect(`http://127.0.0.1:${port}`);
  try {
    return await new Promise((resolve, reject) => {
      // Node ends a GET's stream at once unless told otherwise.
      const stream = client.request(headers, { endStream: false });
      const fields: Record<string, string> = {};
      const chunks: Buffer[] = [];
      let status = 0;
      const keep = (received: http2.IncomingHttpHeaders) => {
        for (const [name, value] of Object.entries(received)) fields[name] = String(value);
      };
      stream.on("response", (received) => {
        status = Number(received[":status"]);
        keep(received);
      });
      stream.on("trailers", keep);
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => resolve({ status, fields, body: Buffer.concat(chunks) }));
      stream.on("error", reject);
      stream.end(body);
    });
  } finally {
    client.close();
  }
}

/** One gRPC message, its compressed flag set when asked. */
function grpcMessage(payload: Uint8Array, compressed = false): Buffer {
  const message = Buffer.alloc(MESSAGE_PREFIX_BYTES + payload.byteLength);
  message.set(payload, MESSAGE_PREFIX_BYTES);
  writePrefix(message);
  if (compressed) message[0] = 1;
  return message;
}

const ECHO = {
  ":method": "POST",
  ":path": "/test.T/Echo",
  "content-type": "application/grpc",
  te: "trailers",
};

Deno.test("gRPC over the h2 session: headers and encodings a client may get wrong", async () => {
  await withServer(async (port) => {
    const hello = new TextEncoder().encode("hello");
    // A deflate-compressed request is inflated before the handler sees it.
    const deflated = await rawCall(
      port,
      { ...ECHO, "grpc-encoding": "deflate" },
      grpcMessage(zlib.deflateSync(hello), true),
    );
    assert.equal(deflated.fields["grpc-status"], "0");
    assert.deepEqual(deflated.body, grpcMessage(hello));
    // A compressed flag under grpc-encoding identity, an encoding the server lacks, a malformed
    // grpc-timeout: grpc-js's statuses and words.
    const cases: [http2.OutgoingHttpHeaders, Buffer, string, string][] = [
      [ECHO, grpcMessage(hello, true), "13", "Compressed message with grpc-encoding identity"],
      [
        { ...ECHO, "grpc-encoding": "br" },
        grpcMessage(hello, true),
        "12",
        'Received message compressed with unsupported encoding "br"',
      ],
      [
        { ...ECHO, "grpc-timeout": "soon" },
        grpcMessage(hello),
        "13",
        'Invalid grpc-timeout value "soon"',
      ],
    ];
    for (const [headers, body, status, message] of cases) {
      const answer = await rawCall(port, headers, body);
      assert.equal(answer.status, 200);
      assert.equal(answer.fields["grpc-status"], status, message);
      assert.equal(decodeURIComponent(answer.fields["grpc-message"]!), message);
      assert.equal(answer.body.byteLength, 0);
    }
    // Not a POST: HTTP 405 once the request ended (its body dropped), saying why, and no gRPC
    // status; not gRPC content: 415.
    const refusal = "This is a gRPC server: calls are POST requests with content-type " +
      "application/grpc.\n";
    const get = await rawCall(port, { ...ECHO, ":method": "GET" }, Uint8Array.of(1, 2));
    assert.deepEqual(
      [get.status, get.fields["allow"], get.fields["grpc-status"], get.body.toString()],
      [405, "POST", undefined, refusal],
    );
    const json = await rawCall(port, { ...ECHO, "content-type": "application/json" }, hello);
    assert.deepEqual([json.status, json.body.toString()], [415, refusal]);
  });
});

Deno.test("gRPC over the h2 session: an answer over maxMessageBytes ends the call with RESOURCE_EXHAUSTED", async () => {
  await withServer(async (port) => {
    const client: Client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
      await assert.rejects(
        unary(client, "Big", Buffer.from("x")),
        (error: grpc.ServiceError) =>
          error.code === grpc.status.RESOURCE_EXHAUSTED &&
          error.details === "Sent message larger than max (2000 vs. 1024)",
      );
      assert.equal((await unary(client, "Echo", Buffer.from("ok"))).toString(), "ok");
    } finally {
      client.close();
    }
  }, 1024);
});

Deno.test("gRPC over the h2 session: metadata is the request's text headers, less the transport's", async () => {
  await withServer(async (port) => {
    const answer = await rawCall(port, {
      ...ECHO,
      ":path": "/test.T/Meta",
      "x-tag": ["a", "b"],
      "grpc-timeout": "10S",
      "grpc-accept-encoding": "gzip",
      "x-trace-bin": Buffer.from([1, 2]).toString("base64"),
      "x-latin": "caf\u00e9",
      "user-agent": "test/1",
    }, grpcMessage(new Uint8Array(0)));
    assert.equal(answer.fields["grpc-status"], "0");
    const { all, tags } = JSON.parse(answer.body.subarray(MESSAGE_PREFIX_BYTES).toString());
    // Each key with its first value, in order; binary keys and values that are not printable
    // ASCII are dropped, as are te, content-type and the grpc-* transport headers.
    assert.deepEqual(all, [["x-tag", "a"], ["user-agent", "test/1"]]);
    assert.deepEqual(tags, ["a", "b"]);
  });
});

Deno.test("gRPC over the h2 session: raw inputs arrive aligned, response buffers come from the pool and go back", async () => {
  class RecordingPool extends BufferPool {
    readonly taken: ArrayBufferLike[] = [];
    override take(count: number): Uint8Array {
      const buffer = super.take(count);
      this.taken.push(buffer.buffer);
      return buffer;
    }
  }
  const pool = new RecordingPool();
  const offsets: number[] = [];
  const infer: UnaryMethod<ModelInferResponse> = {
    kind: "unary",
    group: "inference",
    response: codecs.ModelInferResponse,
    handle(call): ModelInferResponse {
      const input = codecs.ModelInferRequest.decode(call.request).raw_input_contents![0]!;
      offsets.push(input.byteOffset % RAW_ALIGNMENT);
      return {
        model_name: "m",
        model_version: "1",
        outputs: [{ name: "y", datatype: "UINT8", shape: [input.byteLength] }],
        raw_output_contents: [input],
      };
    },
  };
  const path = "/test.I/Infer";
  const server = await listenGrpc([{ name: "test.I", methods: { Infer: infer } }], {
    hostname: "127.0.0.1",
    port: 0,
    maxMessageBytes: 1024 * 1024,
    keepaliveTimeMs: 7_200_000,
    keepaliveTimeoutMs: 20_000,
    rawFields: new Map([[path, 7]]),
    pool,
  });
  const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  try {
    for (const seed of [1, 2]) {
      const sent = new Uint8Array(100_000).map((_, i) => (i * 7 + seed) % 251);
      const request = codecs.ModelInferRequest.encode({
        model_name: "m",
        inputs: [{ name: "x", datatype: "UINT8", shape: [sent.byteLength] }],
        raw_input_contents: [sent],
      });
      const answer = await new Promise<Buffer>((resolve, reject) =>
        client.makeUnaryRequest(
          path,
          (value: Uint8Array) => Buffer.from(value),
          identity,
          request,
          (error, value) => error ? reject(error) : resolve(value!),
        )
      );
      const back = codecs.ModelInferResponse.decode(answer).raw_output_contents![0]!;
      assert.deepEqual([...back], [...sent]);
    }
    // The handler saw each tensor on a 64-byte boundary (no second copy to read it typed).
    assert.deepEqual(offsets, [0, 0]);
    // One buffer of the 128 KiB class served both responses: given back after the first.
    assert.equal(pool.taken.length, 2);
    assert.equal(pool.taken[0], pool.taken[1]);
    assert.equal(pool.freeBytes, 128 * 1024);
  } finally {
    client.close();
    server.forceShutdown();
  }
});
