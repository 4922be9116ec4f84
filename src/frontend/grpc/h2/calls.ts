/**
 * gRPC calls over {@linkcode Http2ServerStream}s: routing by path, request metadata and
 * deadline, message framing (with the front end's aligned decoder and pooled encoder),
 * compressed requests, access checks and statuses, for the methods of `../call.ts`'s contract,
 * unary ({@linkcode UnaryCall}) and bidirectional streaming ({@linkcode DuplexCall}): the
 * services have no other kind.
 *
 * What gRPC servers commonly answer is followed where a client can see it (grpc-js served these
 * calls before, and its clients and grpcio's are the peers the tests hold us to): the statuses
 * and messages of refusals, the response headers, `encodeURI` of `grpc-message`, and which
 * headers are not metadata.
 *
 * @module
 */

import type { Buffer } from "node:buffer";
import zlib from "node:zlib";
import type { Http2ServerStream } from "./session.ts";
import type { HeaderField } from "./hpack.ts";
import {
  type AccessCheck,
  type DuplexCall,
  GrpcError,
  type GrpcStatus,
  Metadata,
  type Method,
  type ResponseEncoder,
  type Service,
  Status,
  type UnaryCall,
  type UnaryMethod,
} from "../call.ts";
import { AlignedMessageDecoder, frameMessage, MESSAGE_PREFIX_BYTES } from "../message_framing.ts";
import type { BufferPool } from "../buffer_pool.ts";

/** What every call of a server shares. */
export interface CallOptions {
  /** Methods by path (`/package.Service/Method`). */
  readonly methods: ReadonlyMap<string, Method>;
  /** The largest message received or sent, bytes. */
  readonly maxMessageBytes: number;
  /** The raw-contents field to align, by method path. */
  readonly rawFields: ReadonlyMap<string, number>;
  /** Where response buffers come from and go back to. */
  readonly pool: BufferPool;
  /** Refuses calls to restricted endpoint groups; `undefined` lets every call run. */
  readonly accessCheck?: AccessCheck | undefined;
}

/**
 * The methods of services, by path.
 *
 * @param services The services.
 * @returns Each method by its path, `/<service>/<method>`.
 *
 * @example A service's method by its path
 * ```ts
 * import { methodsOf } from "./calls.ts";
 * import assert from "node:assert/strict";
 *
 * const live = {
 *   kind: "unary", group: "health", handle: () => new Uint8Array(0),
 *   response: { encode: (_: Uint8Array, { headroom = 0 }) => new Uint8Array(headroom) },
 * } as const;
 * const methods = methodsOf([{ name: "test.T", methods: { Live: live } }]);
 * assert.deepEqual([...methods.keys()], ["/test.T/Live"]);
 * ```
 */
export function methodsOf(services: readonly Service[]): Map<string, Method> {
  const methods = new Map<string, Method>();
  for (const service of services) {
    for (const [name, method] of Object.entries(service.methods)) {
      methods.set(`/${service.name}/${name}`, method);
    }
  }
  return methods;
}

const RESPONSE_HEADERS: readonly HeaderField[] = [
  [":status", "200"],
  ["content-type", "application/grpc+proto"],
];
const ENCODING_HEADERS: readonly HeaderField[] = [
  ["grpc-accept-encoding", "identity,deflate,gzip"],
  ["grpc-encoding", "identity"],
];
// Request headers that are the transport's, not metadata.
const NOT_METADATA: ReadonlySet<string> = new Set([
  "grpc-timeout",
  "grpc-encoding",
  "grpc-accept-encoding",
  "accept-encoding",
  "te",
  "content-type",
]);
// Metadata keys and text values as gRPC allows them; other entries are dropped.
const LEGAL_KEY = /^[0-9a-z_.-]+$/;
const LEGAL_TEXT_VALUE = /^[ -~]*$/;
const DEADLINE = /(\d{1,8})\s*([HMSmun])/;
const DEADLINE_UNIT_MS: Record<string, number> = {
  H: 3_600_000,
  M: 60_000,
  S: 1000,
  m: 1,
  u: 0.001,
  n: 0.000001,
};
// Writes in flight on a streaming call before `write` makes the handler wait for them (a
// Writable's object-mode high-water mark).
const HIGH_WATER_MESSAGES = 16;
const DONE: Promise<void> = Promise.resolve();

/** The status a failure a handler threw ends its call with. */
function statusOf(error: unknown): GrpcStatus {
  if (error instanceof GrpcError) return error;
  return {
    code: Status.UNKNOWN,
    details: error instanceof Error ? error.message : "Unknown Error",
  };
}

/** Answers a call with a status alone (trailers-only: one header block), before it started. */
function refuse(stream: Http2ServerStream, status: GrpcStatus): void {
  stream.respond([
    ...RESPONSE_HEADERS,
    ["grpc-status", String(status.code)],
    ["grpc-message", encodeURI(status.details)],
  ], true);
}

/**
 * One call: its metadata, deadline and signal, and sending its messages and status. The
 * handler-facing classes ({@linkcode H2UnaryCall}, {@linkcode H2DuplexCall}) extend it.
 */
class H2Call {
  readonly path: string;
  readonly metadata: Metadata;
  readonly signal: AbortSignal;
  readonly #controller = new AbortController();
  readonly #stream: Http2ServerStream;
  readonly #maxMessageBytes: number;
  readonly #pool: BufferPool;
  readonly #allocate: (bytes: number) => Uint8Array;
  readonly #response: ResponseEncoder<unknown>;
  #headersSent = false;
  #finished = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #inFlight = 0;
  // Settles the promise a writer waits on, once the writes in flight are out.
  #drain: (() => void) | undefined;
  #drained: Promise<void> | undefined;

  constructor(
    stream: Http2ServerStream,
    path: string,
    metadata: Metadata,
    response: ResponseEncoder<unknown>,
    options: CallOptions,
  ) {
    this.#stream = stream;
    this.path = path;
    this.metadata = metadata;
    this.signal = this.#controller.signal;
    this.#response = response;
    this.#maxMessageBytes = options.maxMessageBytes;
    const pool = options.pool;
    this.#pool = pool;
    this.#allocate = (bytes) => pool.take(bytes);
    stream.signal.addEventListener("abort", () => this.#cancel(), { once: true });
  }

  /** Whether the call has ended (answered, refused, cancelled or past its deadline). */
  get finished(): boolean {
    return this.#finished;
  }

  /** Ends the call with DEADLINE_EXCEEDED after `ms`, then tells the handler. */
  startDeadline(ms: number): void {
    this.#timer = setTimeout(() => {
      if (this.#finished) return;
      this.finish({ code: Status.DEADLINE_EXCEEDED, details: "Deadline exceeded" });
      this.#controller.abort();
    }, ms);
  }

  /**
   * Sends one response message.
   *
   * @returns Whether it went out (false once the call is over, or when it failed the call).
   */
  protected send(message: unknown): boolean {
    if (this.#finished) return false;
    let bytes: Uint8Array;
    try {
      bytes = frameMessage(this.#response, message, this.#allocate);
    } catch {
      this.finish({ code: Status.INTERNAL, details: "Error serializing response" });
      return false;
    }
    const length = bytes.byteLength - MESSAGE_PREFIX_BYTES;
    if (length > this.#maxMessageBytes) {
      this.finish({
        code: Status.RESOURCE_EXHAUSTED,
        details: `Sent message larger than max (${length} vs. ${this.#maxMessageBytes})`,
      });
      return false;
    }
    if (!this.#headersSent) {
      this.#headersSent = true;
      this.#stream.respond([...RESPONSE_HEADERS, ...ENCODING_HEADERS]);
    }
    this.#inFlight++;
    this.#stream.write(bytes).then(() => {
      this.#pool.give(bytes);
      if (--this.#inFlight === 0) this.#release();
    });
    return true;
  }

  /** Settles once the messages in flight are out, when they are many; at once otherwise. */
  protected room(): Promise<void> {
    if (this.#finished || this.#inFlight < HIGH_WATER_MESSAGES) return DONE;
    return this.#drained ??= new Promise<void>((resolve) => this.#drain = resolve);
  }

  /** Ends the call with a status, after the messages already sent. */
  finish(status: GrpcStatus): void {
    if (this.#finished) return;
    this.#finished = true;
    clearTimeout(this.#timer);
    const fields: HeaderField[] = [
      ["grpc-status", String(status.code)],
      ["grpc-message", encodeURI(status.details)],
    ];
    if (this.#headersSent) {
      this.#stream.end(fields);
    } else {
      // Trailers-only: one header block with the status.
      this.#headersSent = true;
      this.#stream.respond([...RESPONSE_HEADERS, ...fields], true);
    }
    this.#release();
  }

  // Lets a writer waiting for room go on.
  #release(): void {
    const drain = this.#drain;
    this.#drain = undefined;
    this.#drained = undefined;
    drain?.();
  }

  #cancel(): void {
    clearTimeout(this.#timer);
    if (!this.#finished) {
      this.#finished = true;
      this.#controller.abort();
    }
    this.#release();
  }
}

/** A unary call over a stream. */
class H2UnaryCall extends H2Call implements UnaryCall {
  request: Uint8Array = new Uint8Array(0);
  #cleanups: (() => void)[] | undefined;

  defer(cleanup: () => void): void {
    (this.#cleanups ??= []).push(cleanup);
  }

  /** Runs the method's handler and answers with what it returns, or the status it throws. */
  run(method: UnaryMethod<unknown>): void {
    let answer: unknown;
    try {
      answer = method.handle(this);
    } catch (error) {
      return this.#fail(error);
    }
    if (answer instanceof Promise) {
      answer.then((message) => this.#answer(message), (error) => this.#fail(error));
    } else this.#answer(answer);
  }

  #answer(message: unknown): void {
    if (this.send(message)) this.finish({ code: Status.OK, details: "OK" });
    this.#cleanup();
  }

  #fail(error: unknown): void {
    this.finish(statusOf(error));
    this.#cleanup();
  }

  #cleanup(): void {
    const cleanups = this.#cleanups;
    this.#cleanups = undefined;
    for (const cleanup of cleanups ?? []) cleanup();
  }
}

/** A bidirectional streaming call over a stream. */
class H2DuplexCall extends H2Call implements DuplexCall<unknown> {
  onmessage: ((message: Uint8Array) => void) | undefined = undefined;
  onend: (() => void) | undefined = undefined;

  write(message: unknown): Promise<void> {
    return this.send(message) ? this.room() : DONE;
  }

  end(status: GrpcStatus = { code: Status.OK, details: "OK" }): void {
    this.finish(status);
  }
}

/** The request's metadata: its headers less the transport's, and less what gRPC refuses. */
function metadataOf(headers: readonly HeaderField[]): Metadata {
  const entries: HeaderField[] = [];
  for (const entry of headers) {
    const [name, value] = entry;
    if (name.startsWith(":") || NOT_METADATA.has(name) || name.endsWith("-bin")) continue;
    if (LEGAL_KEY.test(name) && LEGAL_TEXT_VALUE.test(value)) entries.push(entry);
  }
  return new Metadata(entries);
}

/** A `grpc-timeout` value in milliseconds, or `undefined` when it is malformed. */
function timeoutMs(header: string): number | undefined {
  const match = header.match(DEADLINE);
  if (match === null) return undefined;
  return (Number(match[1]) * DEADLINE_UNIT_MS[match[2]!]!) | 0;
}

/** A message's body, decompressed when its flag says so. */
function bodyOf(message: Buffer, encoding: string, maxBytes: number): Buffer {
  const body = message.subarray(MESSAGE_PREFIX_BYTES);
  if (message[0] === 0) return body;
  if (encoding === "identity") {
    throw new GrpcError(Status.INTERNAL, "Compressed message with grpc-encoding identity");
  }
  try {
    const options = { maxOutputLength: Math.max(maxBytes, 1) };
    return encoding === "gzip" ? zlib.gunzipSync(body, options) : zlib.inflateSync(body, options);
  } catch (error) {
    if ((error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") {
      throw new GrpcError(
        Status.RESOURCE_EXHAUSTED,
        `Received message that decompresses to a size larger than ${maxBytes}`,
      );
    }
    throw new GrpcError(Status.INTERNAL, "Failed to decompress message");
  }
}

/** The status a request that cannot be read ends its call with. */
function readFailure(error: unknown): GrpcStatus {
  if (error instanceof GrpcError) return error;
  // The decoder refuses an oversized message with a plain Error.
  return { code: Status.RESOURCE_EXHAUSTED, details: (error as Error).message };
}

const NOT_GRPC = new TextEncoder().encode(
  "This is a gRPC server: calls are POST requests with content-type application/grpc.\n",
);

/**
 * Answers a request that is not gRPC as an HTTP server does: once the request has ended (its
 * body dropped), with the status (405 with `allow`, or 415, as the gRPC protocol asks), and a
 * line saying why (RFC 9110 §15.5: a 4xx response explains itself). Until then the stream stays
 * open, so the client's frames on it are held to the rules of an open stream (h2spec's requests
 * are of this kind).
 */
function refuseNotGrpc(stream: Http2ServerStream, status: 405 | 415): void {
  stream.ondata = () => {};
  stream.onend = () => {
    stream.respond([
      [":status", String(status)],
      ["content-type", "text/plain; charset=utf-8"],
      ...(status === 405 ? [["allow", "POST"] as const] : []),
    ]);
    stream.write(NOT_GRPC);
    stream.end([]);
  };
}

/**
 * Serves one gRPC call on a new stream. Call it from the session's `onStream`: it sets the
 * stream's `ondata` and `onend` at once.
 *
 * @param stream The stream.
 * @param options The server's methods and limits.
 */
export function serveCall(stream: Http2ServerStream, options: CallOptions): void {
  let path = "";
  let httpMethod: string | undefined;
  let contentType: string | undefined;
  let encoding = "identity";
  let timeout: string | undefined;
  for (const [name, value] of stream.headers) {
    if (name === ":path") path = value;
    else if (name === ":method") httpMethod = value;
    else if (name === "content-type") contentType = value;
    else if (name === "grpc-encoding") encoding = value;
    else if (name === "grpc-timeout") timeout = value;
  }
  if (httpMethod !== "POST" || !contentType?.startsWith("application/grpc")) {
    refuseNotGrpc(stream, httpMethod !== "POST" ? 405 : 415);
    return;
  }
  const method = options.methods.get(path);
  if (method === undefined) {
    return refuse(stream, {
      code: Status.UNIMPLEMENTED,
      details: `The server does not implement the method ${path}`,
    });
  }
  if (encoding !== "identity" && encoding !== "gzip" && encoding !== "deflate") {
    return refuse(stream, {
      code: Status.UNIMPLEMENTED,
      details: `Received message compressed with unsupported encoding "${encoding}"`,
    });
  }
  const deadline = timeout === undefined ? undefined : timeoutMs(timeout);
  if (timeout !== undefined && deadline === undefined) {
    return refuse(stream, {
      code: Status.INTERNAL,
      details: `Invalid grpc-timeout value "${timeout}"`,
    });
  }
  const metadata = metadataOf(stream.headers);
  const decoder = new AlignedMessageDecoder(
    options.maxMessageBytes,
    options.rawFields.get(path),
    true,
  );
  const { maxMessageBytes, accessCheck } = options;
  if (method.kind === "duplex") {
    const call = new H2DuplexCall(stream, path, metadata, method.response, options);
    if (deadline !== undefined) call.startDeadline(deadline);
    stream.ondata = (chunk) => {
      if (call.finished) return;
      let messages: Buffer[];
      try {
        messages = decoder.write(chunk);
      } catch (error) {
        return call.finish(readFailure(error));
      }
      for (const message of messages) {
        let body: Buffer;
        try {
          body = bodyOf(message, encoding, maxMessageBytes);
        } catch (error) {
          return call.finish(readFailure(error));
        }
        call.onmessage?.(body);
        if (call.finished) return;
      }
    };
    stream.onend = () => {
      if (!call.finished) call.onend?.();
    };
    const refusal = accessCheck?.(metadata, method.group);
    if (refusal !== undefined) return call.finish(refusal);
    try {
      method.handle(call);
    } catch (error) {
      call.finish(statusOf(error));
    }
    return;
  }
  const call = new H2UnaryCall(stream, path, metadata, method.response, options);
  if (deadline !== undefined) call.startDeadline(deadline);
  const received: Buffer[] = [];
  stream.ondata = (chunk) => {
    if (call.finished) return;
    try {
      for (const message of decoder.write(chunk)) {
        received.push(bodyOf(message, encoding, maxMessageBytes));
      }
    } catch (error) {
      call.finish(readFailure(error));
    }
  };
  stream.onend = () => {
    if (call.finished) return;
    if (received.length !== 1) {
      return call.finish({
        code: Status.UNIMPLEMENTED,
        details: `Received ${
          received.length === 0 ? "no" : "a second"
        } request message for server streaming method ${path}`,
      });
    }
    const refusal = accessCheck?.(metadata, method.group);
    if (refusal !== undefined) return call.finish(refusal);
    call.request = received[0]!;
    call.run(method);
  };
}
