/**
 * gRPC calls over {@linkcode Http2ServerStream}s: routing by path, request metadata and
 * deadline, message framing (with the front end's aligned decoder and pooled encoder),
 * compressed requests, and statuses, for the same grpc-js service definitions and handlers the
 * grpc-js server runs. Unary and bidirectional streaming methods are served: the services have
 * no other kind.
 *
 * What grpc-js does is followed where a client can see it: the statuses and messages of its
 * refusals, its response headers, `encodeURI` of `grpc-message`, and the metadata it strips.
 *
 * @module
 */

import grpc from "@grpc/grpc-js";
import { EventEmitter } from "node:events";
import { Buffer } from "node:buffer";
import zlib from "node:zlib";
import type { Http2ServerStream } from "./session.ts";
import type { HeaderField } from "./hpack.ts";
import type { GrpcService } from "../service.ts";
import { AlignedMessageDecoder, frameMessage, MESSAGE_PREFIX_BYTES } from "../message_framing.ts";
import type { BufferPool } from "../buffer_pool.ts";

/** A method of a service: how its messages are (de)serialized, and its handler. */
export interface Method {
  readonly definition: grpc.MethodDefinition<unknown, unknown>;
  readonly handler: grpc.UntypedHandleCall;
}

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
}

/**
 * The methods of services, by path.
 *
 * @param services The services.
 * @returns Each method's definition and handler.
 * @throws {TypeError} For a method that is neither unary nor bidirectional streaming.
 */
export function methodsOf(services: readonly GrpcService[]): Map<string, Method> {
  const methods = new Map<string, Method>();
  for (const { definition, implementation } of services) {
    for (const [name, method] of Object.entries(definition)) {
      const handler = implementation[name];
      if (handler === undefined) continue;
      if (method.requestStream !== method.responseStream) {
        throw new TypeError(`Cannot serve ${method.path}: only unary and bidirectional methods`);
      }
      methods.set(method.path, {
        definition: method as grpc.MethodDefinition<unknown, unknown>,
        handler,
      });
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
// Request headers grpc-js does not pass on as metadata.
const NOT_METADATA = [
  "grpc-timeout",
  "grpc-encoding",
  "grpc-accept-encoding",
  "accept-encoding",
  "te",
  "content-type",
];
const DEADLINE = /(\d{1,8})\s*([HMSmun])/;
const DEADLINE_UNIT_MS: Record<string, number> = {
  H: 3_600_000,
  M: 60_000,
  S: 1000,
  m: 1,
  u: 0.001,
  n: 0.000001,
};
// Writes in flight on a streaming call before `write` asks the handler to wait for 'drain'
// (a Writable's object-mode high-water mark, as grpc-js's call has).
const HIGH_WATER_MESSAGES = 16;

function metadataToFields(metadata: grpc.Metadata | null | undefined): HeaderField[] {
  if (!metadata) return [];
  const fields: HeaderField[] = [];
  for (const [name, value] of Object.entries(metadata.toHttp2Headers())) {
    for (const one of Array.isArray(value) ? value : [value]) {
      if (one !== undefined) fields.push([name, String(one)]);
    }
  }
  return fields;
}

/** A status as grpc-js derives it from what a handler reports. */
function statusOf(
  error: Partial<grpc.StatusObject> | Error,
  trailer?: grpc.Metadata | null,
): grpc.StatusObject {
  const code = "code" in error && Number.isInteger(error.code) ? error.code as number : undefined;
  const details = code !== undefined && "details" in error && typeof error.details === "string"
    ? error.details
    : "message" in error
    ? String(error.message)
    : "Unknown Error";
  const metadata = trailer ?? ("metadata" in error ? error.metadata : undefined) ?? null;
  return { code: code ?? grpc.status.UNKNOWN, details, metadata: metadata as grpc.Metadata };
}

/**
 * One call: its metadata and deadline, and sending its messages and status. The handler-facing
 * objects ({@linkcode UnaryCall}, {@linkcode DuplexCall}) extend it.
 */
class Call extends EventEmitter {
  readonly metadata: grpc.Metadata;
  cancelled = false;
  #stream: Http2ServerStream;
  #path: string;
  #options: CallOptions;
  #serialize: (value: unknown) => Buffer;
  #headersSent = false;
  #finished = false;
  #deadline = Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #inFlight = 0;
  #drainWanted = false;

  constructor(
    stream: Http2ServerStream,
    path: string,
    metadata: grpc.Metadata,
    serialize: (value: unknown) => Buffer,
    options: CallOptions,
  ) {
    super();
    this.#stream = stream;
    this.#path = path;
    this.metadata = metadata;
    this.#serialize = serialize;
    this.#options = options;
    stream.signal.addEventListener("abort", () => this.#cancel(), { once: true });
  }

  /** Starts the deadline of a `grpc-timeout` header; false when the header is malformed. */
  setTimeout(header: string): boolean {
    const match = header.match(DEADLINE);
    if (match === null) return false;
    const ms = (Number(match[1]) * DEADLINE_UNIT_MS[match[2]!]!) | 0;
    this.#deadline = Date.now() + ms;
    this.#timer = setTimeout(() => {
      if (this.#finished) return;
      // As grpc-js: the status goes out, then the handler hears that the call is cancelled.
      this.sendStatus({ code: grpc.status.DEADLINE_EXCEEDED, details: "Deadline exceeded" });
      this.cancelled = true;
      this.emit("cancelled", "deadline");
    }, ms);
    return true;
  }

  get finished(): boolean {
    return this.#finished;
  }

  getPath(): string {
    return this.#path;
  }

  getDeadline(): grpc.Deadline {
    return this.#deadline;
  }

  getPeer(): string {
    return "unknown";
  }

  getHost(): string {
    return "";
  }

  sendMetadata(metadata?: grpc.Metadata): void {
    if (this.#headersSent || this.#finished) return;
    this.#headersSent = true;
    this.#stream.respond([...RESPONSE_HEADERS, ...ENCODING_HEADERS, ...metadataToFields(metadata)]);
  }

  /**
   * Sends one response message.
   *
   * @returns Whether the handler may write more before 'drain'.
   */
  sendMessage(value: unknown): boolean {
    if (this.#finished) return false;
    let bytes: Uint8Array;
    try {
      bytes = frameMessage(this.#serialize, value, (n) => this.#options.pool.take(n));
    } catch {
      this.sendStatus({ code: grpc.status.INTERNAL, details: "Error serializing response" });
      return false;
    }
    const length = bytes.byteLength - MESSAGE_PREFIX_BYTES;
    if (length > this.#options.maxMessageBytes) {
      this.sendStatus({
        code: grpc.status.RESOURCE_EXHAUSTED,
        details: `Sent message larger than max (${length} vs. ${this.#options.maxMessageBytes})`,
      });
      return false;
    }
    this.sendMetadata();
    this.#inFlight++;
    this.#stream.write(bytes).then(() => {
      this.#options.pool.give(bytes);
      this.#inFlight--;
      if (this.#drainWanted && this.#inFlight === 0) {
        this.#drainWanted = false;
        this.emit("drain");
      }
    });
    if (this.#inFlight < HIGH_WATER_MESSAGES) return true;
    this.#drainWanted = true;
    return false;
  }

  /** Ends the call with a status, after the messages already sent. */
  sendStatus(status: Partial<grpc.StatusObject>): void {
    if (this.#finished) return;
    this.#finished = true;
    clearTimeout(this.#timer);
    const fields: HeaderField[] = [
      ["grpc-status", String(status.code ?? grpc.status.UNKNOWN)],
      ["grpc-message", encodeURI(status.details ?? "")],
      ...metadataToFields(status.metadata),
    ];
    if (this.#headersSent) {
      this.#stream.end(fields);
    } else {
      // Trailers-only: one header block with the status.
      this.#headersSent = true;
      this.#stream.respond([...RESPONSE_HEADERS, ...fields], true);
    }
    this.emit("close");
  }

  #cancel(): void {
    clearTimeout(this.#timer);
    if (this.cancelled) return;
    this.cancelled = true;
    const running = !this.#finished;
    this.#finished = true;
    if (running) {
      this.emit("cancelled", "cancelled");
      this.emit("close");
    }
    if (this.#drainWanted) {
      this.#drainWanted = false;
      this.emit("drain");
    }
  }
}

/** A unary call, as grpc-js's `ServerUnaryCall` looks to a handler. */
class UnaryCall extends Call {
  request: unknown = undefined;
}

/** A bidirectional call, as grpc-js's `ServerDuplexStream` looks to a handler. */
class DuplexCall extends Call {
  constructor(...args: ConstructorParameters<typeof Call>) {
    super(...args);
    // grpc-js ends a stream with the status of an error its handler emits.
    this.on(
      "error",
      (error: Partial<grpc.StatusObject> | Error) => this.sendStatus(statusOf(error)),
    );
  }

  write(message: unknown): boolean {
    return this.sendMessage(message);
  }

  end(metadata?: grpc.Metadata): void {
    this.sendStatus({ code: grpc.status.OK, details: "OK", ...(metadata ? { metadata } : {}) });
  }
}

/** The request's metadata, without the headers grpc-js keeps to itself. */
function metadataOf(headers: readonly HeaderField[]): grpc.Metadata {
  const record: Record<string, string | string[]> = {};
  for (const [name, value] of headers) {
    if (name.startsWith(":")) continue;
    const previous = record[name];
    record[name] = previous === undefined
      ? value
      : [...(Array.isArray(previous) ? previous : [previous]), value];
  }
  const metadata = grpc.Metadata.fromHttp2Headers(record);
  for (const name of NOT_METADATA) metadata.remove(name);
  return metadata;
}

/** A refusal with a gRPC status, thrown while reading a request. */
class StatusError extends Error {
  constructor(readonly code: grpc.status, details: string) {
    super(details);
  }
}

/** A message's body, decompressed when its flag says so. */
function bodyOf(message: Buffer, encoding: string, maxBytes: number): Buffer {
  const body = message.subarray(MESSAGE_PREFIX_BYTES);
  if (message[0] === 0) return body;
  if (encoding === "identity") {
    throw new StatusError(grpc.status.INTERNAL, "Compressed message with grpc-encoding identity");
  }
  try {
    const options = { maxOutputLength: Math.max(maxBytes, 1) };
    return encoding === "gzip" ? zlib.gunzipSync(body, options) : zlib.inflateSync(body, options);
  } catch (error) {
    if ((error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") {
      throw new StatusError(
        grpc.status.RESOURCE_EXHAUSTED,
        `Received message that decompresses to a size larger than ${maxBytes}`,
      );
    }
    throw new StatusError(grpc.status.INTERNAL, "Failed to decompress message");
  }
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
  let method: string | undefined;
  let contentType: string | undefined;
  let encoding = "identity";
  let timeout: string | undefined;
  for (const [name, value] of stream.headers) {
    if (name === ":path") path = value;
    else if (name === ":method") method = value;
    else if (name === "content-type") contentType = value;
    else if (name === "grpc-encoding") encoding = value;
    else if (name === "grpc-timeout") timeout = value;
  }
  if (method !== "POST" || !contentType?.startsWith("application/grpc")) {
    refuseNotGrpc(stream, method !== "POST" ? 405 : 415);
    return;
  }
  const entry = options.methods.get(path);
  const serialize = entry?.definition.responseSerialize as ((value: unknown) => Buffer) | undefined;
  const streaming = entry?.definition.requestStream ?? false;
  const call = streaming
    ? new DuplexCall(stream, path, metadataOf(stream.headers), serialize!, options)
    : new UnaryCall(stream, path, metadataOf(stream.headers), serialize ?? Buffer.from, options);
  if (entry === undefined) {
    call.sendStatus({
      code: grpc.status.UNIMPLEMENTED,
      details: `The server does not implement the method ${path}`,
    });
    return;
  }
  if (encoding !== "identity" && encoding !== "gzip" && encoding !== "deflate") {
    call.sendStatus({
      code: grpc.status.UNIMPLEMENTED,
      details: `Received message compressed with unsupported encoding "${encoding}"`,
    });
    return;
  }
  if (timeout !== undefined && !call.setTimeout(timeout)) {
    call.sendStatus({
      code: grpc.status.INTERNAL,
      details: `Invalid grpc-timeout value "${timeout}"`,
    });
    return;
  }
  const decoder = new AlignedMessageDecoder(
    options.maxMessageBytes,
    options.rawFields.get(path),
    true,
  );
  const deserialize = entry.definition.requestDeserialize;
  const received: unknown[] = [];
  stream.ondata = (chunk) => {
    if (call.finished) return;
    try {
      for (const message of decoder.write(chunk)) {
        const body = deserialize(bodyOf(message, encoding, options.maxMessageBytes));
        if (streaming) call.emit("data", body);
        else received.push(body);
        if (call.finished) return;
      }
    } catch (error) {
      // The decoder refuses an oversized message with a plain Error.
      call.sendStatus({
        code: error instanceof StatusError ? error.code : grpc.status.RESOURCE_EXHAUSTED,
        details: (error as Error).message,
      });
    }
  };
  if (streaming) {
    stream.onend = () => {
      if (!call.finished) call.emit("end");
    };
    (entry.handler as grpc.handleBidiStreamingCall<unknown, unknown>)(
      call as unknown as grpc.ServerDuplexStream<unknown, unknown>,
    );
    return;
  }
  stream.onend = () => {
    if (call.finished) return;
    if (received.length !== 1) {
      call.sendStatus({
        code: grpc.status.UNIMPLEMENTED,
        details: `Received ${
          received.length === 0 ? "no" : "a second"
        } request message for server streaming method ${path}`,
      });
      return;
    }
    (call as UnaryCall).request = received[0];
    (entry.handler as grpc.handleUnaryCall<unknown, unknown>)(
      call as unknown as grpc.ServerUnaryCall<unknown, unknown>,
      (error, value, trailer) => {
        if (error) return call.sendStatus(statusOf(error, trailer));
        call.sendMessage(value);
        call.sendStatus({
          code: grpc.status.OK,
          details: "OK",
          ...(trailer ? { metadata: trailer } : {}),
        });
      },
    );
  };
}
