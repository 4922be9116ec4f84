import assert from "node:assert/strict";
import http2 from "node:http2";
import { Buffer } from "node:buffer";
import { Http2ServerSession, type Http2ServerStream } from "./session.ts";
import { frame, PREFACE, readUint32 } from "./frames.ts";

/** Serves `handler` on a loopback port until disposed. */
function serve(
  handler: (stream: Http2ServerStream) => void,
  options: ConstructorParameters<typeof Http2ServerSession>[2] = {},
): { url: string; sessions: Http2ServerSession[] } & AsyncDisposable {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const sessions: Http2ServerSession[] = [];
  (async () => {
    for await (const conn of listener) {
      sessions.push(new Http2ServerSession(conn, handler, options));
    }
  })().catch(() => {});
  return {
    url: `http://127.0.0.1:${listener.addr.port}`,
    sessions,
    async [Symbol.asyncDispose](): Promise<void> {
      listener.close();
      for (const session of sessions) session.destroy();
      await Promise.all(sessions.map((session) => session.closed));
    },
  };
}

/** Echoes each request body back in one write, with the body's length as a trailer. */
function echo(stream: Http2ServerStream): void {
  const chunks: Uint8Array[] = [];
  stream.ondata = (chunk) => chunks.push(chunk.slice());
  stream.onend = () => {
    const body = Buffer.concat(chunks);
    stream.respond([[":status", "200"], [
      "x-path",
      stream.headers.find(([n]) => n === ":path")![1],
    ]]);
    stream.write(body);
    stream.end([["x-length", String(body.length)]]);
  };
}

interface Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  trailers: http2.IncomingHttpHeaders;
}

function request(
  client: http2.ClientHttp2Session,
  path: string,
  body: Uint8Array,
  headers: http2.OutgoingHttpHeaders = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const stream = client.request({ ":method": "POST", ":path": path, ...headers });
    const chunks: Buffer[] = [];
    let answer: Partial<Answer> = {};
    stream.on("response", (h) => answer = { status: Number(h[":status"]), headers: h });
    stream.on("trailers", (t) => answer.trailers = t);
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => resolve({ ...answer, body: Buffer.concat(chunks) } as Answer));
    stream.on("error", reject);
    stream.end(body);
  });
}

const watchdog = (ms: number): AbortSignal => AbortSignal.timeout(ms);

function connect(url: string): http2.ClientHttp2Session {
  const client = http2.connect(url);
  client.on("error", () => {});
  return client;
}

Deno.test("HTTP/2 session: bodies larger than the client's windows go both ways intact", async () => {
  await using server = serve(echo);
  const client = connect(server.url);
  try {
    const big = new Uint8Array(3 * 1024 * 1024 + 17).map((_, i) => (i * 7) % 251);
    const answers = await Promise.all([
      request(client, "/big", big),
      ...Array.from({ length: 20 }, (_, i) => request(client, `/small/${i}`, Uint8Array.of(i))),
    ]);
    assert.equal(answers[0]!.status, 200);
    assert.equal(answers[0]!.headers["x-path"], "/big");
    assert.equal(answers[0]!.trailers["x-length"], String(big.length));
    assert.ok(Buffer.from(big).equals(answers[0]!.body));
    answers.slice(1).forEach((answer, i) => {
      assert.equal(answer.headers["x-path"], `/small/${i}`);
      assert.deepEqual([...answer.body], [i]);
    });
  } finally {
    client.close();
  }
});

Deno.test("HTTP/2 session: a client's reset aborts the stream, and the connection keeps serving", async () => {
  const aborted = Promise.withResolvers<string>();
  await using server = serve((stream) => {
    const path = stream.headers.find(([n]) => n === ":path")![1];
    if (path === "/hang") {
      stream.signal.addEventListener("abort", () => aborted.resolve(String(stream.signal.reason)));
      return;
    }
    echo(stream);
  });
  const client = connect(server.url);
  try {
    const hanging = client.request({ ":method": "POST", ":path": "/hang" });
    hanging.on("error", () => {});
    hanging.write("part of a body");
    await new Promise((resolve) => setTimeout(resolve, 50));
    hanging.close(http2.constants.NGHTTP2_CANCEL);
    const reason = await Promise.race([
      aborted.promise,
      new Promise<string>((_, reject) =>
        watchdog(5000).addEventListener("abort", () => reject(new Error("no abort")))
      ),
    ]);
    assert.match(reason, /reset by the client \(code 8\)/);
    const answer = await request(client, "/after", Uint8Array.of(1, 2, 3));
    assert.deepEqual([...answer.body], [1, 2, 3]);
  } finally {
    client.close();
  }
});

Deno.test("HTTP/2 session: a handler that throws resets its stream only", async () => {
  await using server = serve((stream) => {
    if (stream.headers.some(([n, v]) => n === ":path" && v === "/throw")) throw new Error("boom");
    echo(stream);
  });
  const client = connect(server.url);
  try {
    await assert.rejects(request(client, "/throw", Uint8Array.of(1)), /NGHTTP2_INTERNAL_ERROR/);
    const answer = await request(client, "/ok", Uint8Array.of(9));
    assert.deepEqual([...answer.body], [9]);
  } finally {
    client.close();
  }
});

Deno.test("HTTP/2 session: pings are answered and a header list over the limit gets 431", async () => {
  await using server = serve(echo, { maxHeaderListSize: 1024 });
  const client = connect(server.url);
  try {
    await new Promise((resolve) => client.once("connect", resolve));
    const rtt = await new Promise<number>((resolve, reject) =>
      client.ping((error, duration) => error ? reject(error) : resolve(duration))
    );
    assert.ok(rtt >= 0);
    const answer = await request(client, "/large", Uint8Array.of(1), { "x-big": "y".repeat(2000) });
    assert.equal(answer.status, 431);
    const after = await request(client, "/after", Uint8Array.of(5));
    assert.deepEqual([...after.body], [5]);
  } finally {
    client.close();
  }
});

Deno.test("HTTP/2 session: a header block larger than the read buffer is read whole", async () => {
  await using server = serve(echo, { maxHeaderListSize: 1024 * 1024 });
  const client = http2.connect(server.url, { maxSendHeaderBlockLength: 1024 * 1024 });
  client.on("error", () => {});
  try {
    // Well over the session's 256 KiB read buffer, even Huffman-coded.
    const value = "y".repeat(400_000);
    for (let i = 0; i < 2; i++) {
      const answer = await request(client, `/big-headers/${i}`, Uint8Array.of(i), {
        "x-big": value,
      });
      assert.equal(answer.status, 200);
      assert.deepEqual([...answer.body], [i]);
    }
  } finally {
    client.close();
  }
});

/** A frame as bytes. */
function rawFrame(type: number, flags: number, stream: number, payload: number[] = []): number[] {
  return [...frame({ type, flags, stream }, Uint8Array.from(payload))];
}

/** A TCP connection to the server, for raw frames. */
function rawConnect(url: string): Promise<Deno.TcpConn> {
  return Deno.connect({ hostname: "127.0.0.1", port: Number(new URL(url).port) });
}

/** A frame read back from the server. */
interface ReadFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Uint8Array;
}

/** The whole frames at the start of `bytes`, and the bytes after them. */
function parseFrames(
  bytes: Uint8Array,
): { frames: ReadFrame[]; rest: Uint8Array<ArrayBuffer> } {
  const frames: ReadFrame[] = [];
  let at = 0;
  while (at + 9 <= bytes.length) {
    const length = (bytes[at]! << 16) | (bytes[at + 1]! << 8) | bytes[at + 2]!;
    if (at + 9 + length > bytes.length) break;
    frames.push({
      type: bytes[at + 3]!,
      flags: bytes[at + 4]!,
      stream: readUint32(bytes, at + 5) & 0x7fffffff,
      payload: bytes.slice(at + 9, at + 9 + length),
    });
    at += 9 + length;
  }
  return { frames, rest: bytes.slice(at) };
}

const PREFACE_AND_SETTINGS = [...PREFACE, ...rawFrame(4, 0, 0)];

/** Malformed input, and the GOAWAY error code the session must end the connection with. */
const MALFORMED: [string, number[], number][] = [
  ["HTTP/1.1 instead of the preface", [...new TextEncoder().encode("GET / HTTP/1.1\r\n\r\n")], 1],
  ["a PING before SETTINGS", [
    ...PREFACE,
    ...rawFrame(6, 0, 0, [0, 0, 0, 0, 0, 0, 0, 0]),
  ], 1],
  ["DATA on stream 0", [...PREFACE_AND_SETTINGS, ...rawFrame(0, 0, 0, [1])], 1],
  ["HEADERS on an even stream", [...PREFACE_AND_SETTINGS, ...rawFrame(1, 4, 2, [0x82])], 1],
  ["a header block naming table entry 0", [
    ...PREFACE_AND_SETTINGS,
    ...rawFrame(1, 4, 1, [0x80]),
  ], 9],
  [
    "a connection WINDOW_UPDATE of 0",
    [...PREFACE_AND_SETTINGS, ...rawFrame(8, 0, 0, [0, 0, 0, 0])],
    1,
  ],
  ["a PING of 3 bytes", [...PREFACE_AND_SETTINGS, ...rawFrame(6, 0, 0, [1, 2, 3])], 6],
  ["SETTINGS with a frame size below 16 KiB", [
    ...PREFACE_AND_SETTINGS,
    ...rawFrame(4, 0, 0, [0, 5, 0, 0, 0x10, 0]),
  ], 1],
  ["HEADERS not continued", [
    ...PREFACE_AND_SETTINGS,
    ...rawFrame(1, 0, 1, [0x82]),
    ...rawFrame(6, 0, 0, [0, 0, 0, 0, 0, 0, 0, 0]),
  ], 1],
  ["a client's PUSH_PROMISE", [...PREFACE_AND_SETTINGS, ...rawFrame(5, 4, 1, [0, 0, 0, 2])], 1],
];

for (const [what, bytes, code] of MALFORMED) {
  Deno.test(`HTTP/2 session: ${what} ends the connection with GOAWAY ${code}, and the server serves on`, async () => {
    await using server = serve(echo);
    const conn = await rawConnect(server.url);
    try {
      await conn.write(Uint8Array.from(bytes));
      const received: number[] = [];
      const buffer = new Uint8Array(4096);
      const signal = watchdog(5000);
      for (;;) {
        const n = await Promise.race([
          conn.read(buffer).catch(() => null),
          new Promise<null>((resolve) => signal.addEventListener("abort", () => resolve(null))),
        ]);
        if (n === null) break;
        received.push(...buffer.subarray(0, n));
      }
      assert.ok(!signal.aborted, "the server did not close the connection");
      // GOAWAY's payload: the last stream id, then the error code.
      const goaway = parseFrames(Uint8Array.from(received)).frames.findLast((f) => f.type === 7);
      assert.equal(goaway === undefined ? -1 : readUint32(goaway.payload, 4), code);
    } finally {
      conn.close();
    }
    const client = connect(server.url);
    try {
      const answer = await request(client, "/after", Uint8Array.of(7));
      assert.deepEqual([...answer.body], [7]);
    } finally {
      client.close();
    }
  });
}

Deno.test("HTTP/2 session: a peer that floods PINGs without reading the answers is cut off", async () => {
  await using server = serve(echo);
  const conn = await rawConnect(server.url);
  try {
    const ping = rawFrame(6, 0, 0, [1, 2, 3, 4, 5, 6, 7, 8]);
    const chunk = new Uint8Array(ping.length * 60_000);
    for (let at = 0; at < chunk.length; at += ping.length) chunk.set(ping, at);
    await conn.write(Uint8Array.from(PREFACE_AND_SETTINGS));
    // About 20 MB of PINGs, so the acknowledgements overflow the sockets' buffers (nothing
    // reads them); the server stops taking them once 1,000 are queued.
    const writes = (async () => {
      for (let i = 0; i < 20; i++) {
        for (let at = 0; at < chunk.length;) at += await conn.write(chunk.subarray(at));
      }
    })().catch(() => "the server closed the connection");
    while (server.sessions.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const closed = await Promise.race([
      server.sessions[0]!.closed.then(() => true),
      new Promise<false>((resolve) =>
        watchdog(20_000).addEventListener("abort", () => resolve(false))
      ),
    ]);
    assert.ok(closed, "the session did not close");
    assert.equal(await writes, "the server closed the connection");
  } finally {
    conn.close();
  }
});

Deno.test("HTTP/2 session: close() lets open streams finish, then ends the connection", async () => {
  const started = Promise.withResolvers<Http2ServerStream>();
  await using server = serve((stream) => {
    stream.onend = () => started.resolve(stream);
  });
  const client = connect(server.url);
  try {
    const pending = request(client, "/slow", Uint8Array.of(1));
    const stream = await started.promise;
    server.sessions[0]!.close();
    stream.respond([[":status", "200"]]);
    await stream.write(Uint8Array.of(42));
    stream.end([]);
    const answer = await pending;
    assert.deepEqual([...answer.body], [42]);
    await server.sessions[0]!.closed;
    assert.equal(server.sessions[0]!.openStreams, 0);
  } finally {
    client.close();
  }
});

/** Reads frames from a raw connection until `done` says so; fails after 5 s. */
async function readFrames(
  conn: Deno.Conn,
  done: (frames: ReadFrame[]) => boolean,
): Promise<ReadFrame[]> {
  const frames: ReadFrame[] = [];
  let pending = new Uint8Array(0);
  const buffer = new Uint8Array(65536);
  const signal = watchdog(5000);
  while (!done(frames)) {
    const n = await Promise.race([
      conn.read(buffer),
      new Promise<null>((resolve) => signal.addEventListener("abort", () => resolve(null))),
    ]);
    assert.ok(n !== null && !signal.aborted, `no more frames; got ${JSON.stringify(frames)}`);
    const joined = new Uint8Array(pending.length + n);
    joined.set(pending);
    joined.set(buffer.subarray(0, n), pending.length);
    const parsed = parseFrames(joined);
    frames.push(...parsed.frames);
    pending = parsed.rest;
  }
  return frames;
}

/** Whether the answer on `stream` has ended (HEADERS with END_STREAM: the trailers). */
function ended(frames: readonly ReadFrame[], stream: number): boolean {
  return frames.some((f) => f.type === 1 && f.stream === stream && (f.flags & 0x1) !== 0);
}

/** The DATA bytes answered on `stream`. */
function bodyOf(frames: readonly ReadFrame[], stream: number): number[] {
  return frames.filter((f) => f.type === 0 && f.stream === stream).flatMap((f) => [...f.payload]);
}

// Header blocks from HPACK's static table: :method POST, :path /, :scheme http.
const POST_ROOT = [0x83, 0x84, 0x86];
// A literal field, not indexed: x-t: 1.
const TRAILER_X_T = [0x00, 3, ...new TextEncoder().encode("x-t"), 1, 0x31];

Deno.test("HTTP/2 session: padded HEADERS with a priority, padded DATA and request trailers", async () => {
  await using server = serve(echo);
  const conn = await rawConnect(server.url);
  try {
    await conn.write(Uint8Array.from([
      ...PREFACE_AND_SETTINGS,
      // HEADERS, END_HEADERS | PADDED | PRIORITY: pad length 3, dependency and weight, block, pad.
      ...rawFrame(1, 0x4 | 0x8 | 0x20, 1, [3, 0, 0, 0, 0, 15, ...POST_ROOT, 0, 0, 0]),
      // DATA, PADDED: pad length 2, "ab", pad; then "c" unpadded.
      ...rawFrame(0, 0x8, 1, [2, 0x61, 0x62, 0, 0]),
      ...rawFrame(0, 0, 1, [0x63]),
      // Trailers end the request: HEADERS, END_HEADERS | END_STREAM.
      ...rawFrame(1, 0x4 | 0x1, 1, TRAILER_X_T),
    ]));
    const frames = await readFrames(conn, (frames) => ended(frames, 1));
    assert.equal(new TextDecoder().decode(Uint8Array.from(bodyOf(frames, 1))), "abc");
    assert.ok(!frames.some((f) => f.type === 3), "no stream was reset");
  } finally {
    conn.close();
  }
});

Deno.test("HTTP/2 session: streams beyond maxConcurrentStreams are refused, the others served", async () => {
  await using server = serve(echo, { maxConcurrentStreams: 2 });
  const conn = await rawConnect(server.url);
  try {
    await conn.write(Uint8Array.from([
      ...PREFACE_AND_SETTINGS,
      // Streams 1 and 3 stay open (no END_STREAM); 5 is one too many.
      ...rawFrame(1, 0x4, 1, POST_ROOT),
      ...rawFrame(1, 0x4, 3, POST_ROOT),
      ...rawFrame(1, 0x4, 5, POST_ROOT),
    ]));
    const refused = await readFrames(conn, (frames) => frames.some((f) => f.type === 3));
    const reset = refused.find((f) => f.type === 3)!;
    assert.deepEqual([reset.stream, [...reset.payload]], [5, [0, 0, 0, 7]]);
    // Stream 1 ends and is answered, which frees a place for stream 7.
    await conn.write(Uint8Array.from(rawFrame(0, 0x1, 1, [0x31])));
    const first = await readFrames(conn, (frames) => ended(frames, 1));
    await conn.write(Uint8Array.from([
      ...rawFrame(1, 0x4, 7, POST_ROOT),
      ...rawFrame(0, 0x1, 7, [0x37]),
    ]));
    const second = await readFrames(conn, (frames) => ended(frames, 7));
    assert.deepEqual([bodyOf(first, 1), bodyOf(second, 7)], [[0x31], [0x37]]);
    assert.ok(![...first, ...second].some((f) => f.type === 3), "no other stream was reset");
  } finally {
    conn.close();
  }
});

/** An HPACK literal field without indexing (names and values under 127 bytes). */
function literal(name: string, value: string): number[] {
  const [n, v] = [new TextEncoder().encode(name), new TextEncoder().encode(value)];
  return [0x00, n.length, ...n, v.length, ...v];
}

/** The error code of each RST_STREAM the server sent, by stream. */
function resets(frames: readonly ReadFrame[]): Map<number, number> {
  return new Map(
    frames.filter((f) => f.type === 3).map((f) => [f.stream, readUint32(f.payload, 0)]),
  );
}

/** The error code of the server's GOAWAY, or -1. */
function goawayCode(frames: readonly ReadFrame[]): number {
  const goaway = frames.find((f) => f.type === 7);
  return goaway === undefined ? -1 : readUint32(goaway.payload, 4);
}

Deno.test("HTTP/2 session: requests against RFC 9113 §8 are reset with PROTOCOL_ERROR, the others served", async () => {
  await using server = serve(echo);
  const conn = await rawConnect(server.url);
  try {
    // One malformed request per stream (1, 3, ...), each ending its stream; then a good one.
    const blocks = [
      [...POST_ROOT, ...literal("X-Upper", "1")],
      [...POST_ROOT, ...literal(":test", "1")],
      [...POST_ROOT, ...literal(":status", "200")],
      [0x83, 0x84, ...literal("x-a", "1"), 0x86],
      [...POST_ROOT, ...literal("connection", "keep-alive")],
      [...POST_ROOT, ...literal("te", "gzip")],
      [0x83, 0x86, ...literal(":path", "")],
      [0x84, 0x86],
      [...POST_ROOT, 0x84],
    ];
    const bytes = [...PREFACE_AND_SETTINGS];
    blocks.forEach((block, i) => bytes.push(...rawFrame(1, 0x4 | 0x1, 2 * i + 1, block)));
    // content-length 1, and 2 bytes of body already (the request has not ended); content-length
    // 3 and a body of 2 bytes; then trailers with a pseudo-header field.
    const [longerId, shorterId, trailersId, goodId] = [19, 21, 23, 25];
    bytes.push(...rawFrame(1, 0x4, longerId, [...POST_ROOT, ...literal("content-length", "1")]));
    bytes.push(...rawFrame(0, 0, longerId, [0x61, 0x62]));
    bytes.push(...rawFrame(1, 0x4, shorterId, [...POST_ROOT, ...literal("content-length", "3")]));
    bytes.push(...rawFrame(0, 0x1, shorterId, [0x61, 0x62]));
    bytes.push(...rawFrame(1, 0x4, trailersId, POST_ROOT));
    bytes.push(...rawFrame(1, 0x4 | 0x1, trailersId, [0x84]));
    bytes.push(...rawFrame(1, 0x4, goodId, [...POST_ROOT, ...literal("content-length", "2")]));
    bytes.push(...rawFrame(0, 0x1, goodId, [0x6f, 0x6b]));
    await conn.write(Uint8Array.from(bytes));
    const frames = await readFrames(conn, (frames) => ended(frames, goodId));
    const expected = new Map([...blocks.keys(), 9, 10, 11].map((i) => [2 * i + 1, 1]));
    assert.deepEqual(resets(frames), expected);
    assert.deepEqual(bodyOf(frames, goodId), [0x6f, 0x6b]);
    assert.equal(goawayCode(frames), -1);
  } finally {
    conn.close();
  }
});

/** A step of a raw exchange: bytes to send, or frames to wait for. */
type Step = number[] | ((frames: readonly ReadFrame[]) => boolean);

/** Runs the steps on a new connection; returns every frame the server sent. */
async function exchange(url: string, steps: readonly Step[]): Promise<ReadFrame[]> {
  const conn = await rawConnect(url);
  const frames: ReadFrame[] = [];
  try {
    await conn.write(Uint8Array.from(PREFACE_AND_SETTINGS));
    for (const step of steps) {
      if (typeof step === "function") frames.push(...await readFrames(conn, step));
      else await conn.write(Uint8Array.from(step));
    }
  } finally {
    conn.close();
  }
  return frames;
}

const resetOn = (stream: number) => (frames: readonly ReadFrame[]) =>
  frames.some((f) => f.type === 3 && f.stream === stream);
const goaway = (frames: readonly ReadFrame[]) => frames.some((f) => f.type === 7);
const answered = (stream: number) => (frames: readonly ReadFrame[]) => ended(frames, stream);

Deno.test("HTTP/2 session: frames on closed and half-closed streams get the errors of RFC 9113 §5.1", async () => {
  await using server = serve((stream) => {
    const path = stream.headers.find(([n]) => n === ":path")![1];
    if (path === "/reset") return stream.reset();
    if (path !== "/hang") echo(stream);
  });
  const HANG = [0x83, 0x86, ...literal(":path", "/hang")];
  const RESET = [0x83, 0x86, ...literal(":path", "/reset")];
  const data = (stream: number, end = true) => rawFrame(0, end ? 1 : 0, stream, [0x61]);
  const cases: [string, Step[], (frames: ReadFrame[]) => void][] = [
    ["DATA on a half-closed (remote) stream: STREAM_CLOSED", [
      [...rawFrame(1, 0x5, 1, HANG), ...data(1)],
      resetOn(1),
    ], (frames) => assert.deepEqual(resets(frames), new Map([[1, 5]]))],
    ["HEADERS on a half-closed (remote) stream: STREAM_CLOSED", [
      [...rawFrame(1, 0x5, 1, HANG), ...rawFrame(1, 0x5, 1, [])],
      resetOn(1),
    ], (frames) => assert.deepEqual(resets(frames), new Map([[1, 5]]))],
    ["DATA after the client's RST_STREAM: STREAM_CLOSED", [
      [...rawFrame(1, 0x4, 1, HANG), ...rawFrame(3, 0, 1, [0, 0, 0, 8]), ...data(1)],
      resetOn(1),
    ], (frames) => assert.deepEqual(resets(frames), new Map([[1, 5]]))],
    ["DATA on a stream both sides ended: STREAM_CLOSED", [
      rawFrame(1, 0x5, 1, POST_ROOT),
      answered(1),
      data(1),
      resetOn(1),
    ], (frames) => assert.deepEqual(resets(frames), new Map([[1, 5]]))],
    ["HEADERS on a stream both sides ended: GOAWAY STREAM_CLOSED", [
      rawFrame(1, 0x5, 1, POST_ROOT),
      answered(1),
      rawFrame(1, 0x5, 1, POST_ROOT),
      goaway,
    ], (frames) => assert.equal(goawayCode(frames), 5)],
    ["frames the client sent after the server's reset are ignored", [
      [...rawFrame(1, 0x4, 1, RESET), ...data(1, false), ...rawFrame(1, 0x5, 1, [])],
      [...rawFrame(1, 0x5, 3, POST_ROOT)],
      answered(3),
    ], (frames) => assert.deepEqual(resets(frames), new Map([[1, 8]]))],
    ["a stream identifier below one used before: GOAWAY PROTOCOL_ERROR", [
      [...rawFrame(1, 0x5, 5, POST_ROOT), ...rawFrame(1, 0x5, 3, POST_ROOT)],
      goaway,
    ], (frames) => assert.equal(goawayCode(frames), 1)],
    ["HEADERS and PRIORITY naming their own stream: PROTOCOL_ERROR", [
      // HEADERS with PRIORITY (dependency 1, weight 16); PRIORITY on idle stream 3.
      [
        ...rawFrame(1, 0x25, 1, [0, 0, 0, 1, 15, ...POST_ROOT]),
        ...rawFrame(2, 0, 3, [0, 0, 0, 3, 15]),
      ],
      resetOn(3),
    ], (frames) => assert.deepEqual(resets(frames), new Map([[1, 1], [3, 1]]))],
    ["a second HEADERS without END_STREAM, and WINDOW_UPDATE 0: PROTOCOL_ERROR", [
      [...rawFrame(1, 0x4, 1, HANG), ...rawFrame(1, 0x4, 1, []), ...rawFrame(1, 0x4, 3, HANG)],
      [...rawFrame(8, 0, 3, [0, 0, 0, 0])],
      resetOn(3),
    ], (frames) => assert.deepEqual(resets(frames), new Map([[1, 1], [3, 1]]))],
    ["a stream window over 2^31-1: FLOW_CONTROL_ERROR", [
      [...rawFrame(1, 0x4, 1, HANG), ...rawFrame(8, 0, 1, [0x7f, 0xff, 0xff, 0xff])],
      resetOn(1),
    ], (frames) => assert.deepEqual(resets(frames), new Map([[1, 3]]))],
    ["a frame over SETTINGS_MAX_FRAME_SIZE: GOAWAY FRAME_SIZE_ERROR", [
      [...rawFrame(1, 0x4, 1, HANG), ...rawFrame(0, 0, 1, new Array(16385).fill(0x61))],
      goaway,
    ], (frames) => assert.equal(goawayCode(frames), 6)],
  ];
  for (const [what, steps, check] of cases) {
    check(await exchange(server.url, steps).catch((error) => assert.fail(`${what}: ${error}`)));
  }
  // Whatever those connections did, a new one is served.
  const client = connect(server.url);
  try {
    assert.deepEqual([...(await request(client, "/after", Uint8Array.of(4))).body], [4]);
  } finally {
    client.close();
  }
});

Deno.test("HTTP/2 session: a rapid reset (HEADERS, RST_STREAM, ...) past the limit ends with GOAWAY ENHANCE_YOUR_CALM", async () => {
  const opened: number[] = [];
  await using server = serve((stream) => {
    opened.push(stream.id);
    echo(stream);
  });
  // The default limit: a burst of 1,000 resets; this client sends 3,000 pairs at once.
  const bytes = [...PREFACE_AND_SETTINGS];
  for (let id = 1; id < 6000; id += 2) {
    bytes.push(...rawFrame(1, 0x4, id, POST_ROOT), ...rawFrame(3, 0, id, [0, 0, 0, 8]));
  }
  const conn = await rawConnect(server.url);
  let frames: ReadFrame[];
  try {
    await conn.write(Uint8Array.from(bytes));
    frames = await readFrames(conn, goaway);
  } finally {
    conn.close();
  }
  assert.equal(goawayCode(frames), 0xb);
  // The streams the server set up stop at the limit (the GOAWAY names the last one it saw).
  const last = readUint32(frames.find((f) => f.type === 7)!.payload, 0);
  assert.ok(opened.length >= 1000 && opened.length <= 1010, `${opened.length} streams opened`);
  assert.equal(last, opened.at(-1));
  // A client that cancels now and then is not cut off, and the server serves on.
  const client = connect(server.url);
  try {
    for (let i = 0; i < 20; i++) {
      const cancelled = client.request({ ":method": "POST", ":path": "/hang" });
      cancelled.on("error", () => {});
      cancelled.close(http2.constants.NGHTTP2_CANCEL);
    }
    assert.deepEqual([...(await request(client, "/after", Uint8Array.of(3))).body], [3]);
  } finally {
    client.close();
  }
});

Deno.test("HTTP/2 session: resets of streams being answered do not count against the reset limit", async () => {
  // A handler that answers headers at once and then waits, as a gRPC stream call does between
  // its responses; the client cancels each call once its answer has begun.
  await using server = serve((stream) => stream.respond([[":status", "200"]]), {
    resetBurst: 3,
    resetsPerSecond: 0.001,
  });
  const client = connect(server.url);
  try {
    for (let i = 0; i < 10; i++) {
      const call = client.request({ ":method": "POST", ":path": `/call${i}` });
      call.on("error", () => {});
      const status = await new Promise<number>((resolve, reject) => {
        call.on("response", (headers) => resolve(Number(headers[":status"])));
        call.on("close", () => reject(new Error(`call ${i} closed before its response`)));
      });
      assert.equal(status, 200);
      call.close(http2.constants.NGHTTP2_CANCEL);
    }
    // Past a burst of 3, the connection still serves: no GOAWAY was sent.
    const last = client.request({ ":method": "POST", ":path": "/last" });
    last.on("error", () => {});
    const status = await new Promise<number>((resolve, reject) => {
      last.on("response", (headers) => resolve(Number(headers[":status"])));
      last.on("close", () => reject(new Error("the last call closed before its response")));
    });
    assert.equal(status, 200);
    last.close(http2.constants.NGHTTP2_CANCEL);
  } finally {
    client.close();
  }
});
