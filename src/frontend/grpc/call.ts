/**
 * The call contract of the gRPC front end: what a handler sees of one call
 * ({@linkcode UnaryCall}, {@linkcode DuplexCall}), how it ends one with a status
 * ({@linkcode GrpcError}), and a method as data ({@linkcode Method}: its kind, its response
 * encoder, its endpoint group and its handler). The services (`service.ts`) are written against
 * it, and the HTTP/2 server (`h2/calls.ts`) serves it; nothing here knows either.
 *
 * @module
 */

import type { EndpointGroup } from "../../config/security_config.ts";
import type { EncodeOptions } from "../../protocol/grpc_codec.ts";

/**
 * The gRPC status codes the front end answers with (the gRPC protocol's numbers).
 *
 * @example UNIMPLEMENTED is 12
 * ```ts
 * import { Status } from "./call.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(Status.UNIMPLEMENTED, 12);
 * ```
 */
export const Status = Object.freeze({
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
});

/** How a call ended: a status code and its message (`grpc-status`, `grpc-message`). */
export interface GrpcStatus {
  /** The status code ({@linkcode Status}). */
  readonly code: number;
  /** The message; empty for none. */
  readonly details: string;
}

/**
 * A failure with a gRPC status: what a unary handler throws, or a streaming handler ends its
 * call with, to answer that status. Anything else a handler throws ends its call with UNKNOWN.
 *
 * @example The details are the message
 * ```ts
 * import { GrpcError, Status } from "./call.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new GrpcError(Status.NOT_FOUND, "Request for unknown model: 'm' is not found");
 * assert.equal(error.details, error.message);
 * ```
 */
export class GrpcError extends Error implements GrpcStatus {
  /** The status code ({@linkcode Status}). */
  readonly code: number;

  /**
   * @param code The status code.
   * @param details The message.
   * @param options The cause.
   */
  constructor(code: number, details: string, options?: ErrorOptions) {
    super(details, options);
    this.name = "GrpcError";
    this.code = code;
  }

  /** The message, as the status carries it. */
  get details(): string {
    return this.message;
  }
}

/**
 * A call's request metadata: each text key (lower-case) with its values, in the order the
 * client sent them. Binary (`-bin`) keys are not kept: no method reads them.
 *
 * Iterating yields each key with its first value, as header forwarding takes them.
 *
 * @example A repeated key keeps its values in order
 * ```ts
 * import { Metadata } from "./call.ts";
 * import assert from "node:assert/strict";
 *
 * const metadata = new Metadata([["x-tag", "a"], ["x-tag", "b"], ["trace", "1"]]);
 * assert.equal(metadata.get("x-tag"), "a");
 * assert.deepEqual(metadata.getAll("x-tag"), ["a", "b"]);
 * assert.deepEqual([...metadata], [["x-tag", "a"], ["trace", "1"]]);
 * ```
 */
export class Metadata implements Iterable<[string, string]> {
  readonly #values = new Map<string, string[]>();

  /**
   * @param entries Keys (lower-case) and values, in order; a key may come more than once.
   */
  constructor(entries: Iterable<readonly [string, string]> = []) {
    for (const [key, value] of entries) {
      const values = this.#values.get(key);
      if (values === undefined) this.#values.set(key, [value]);
      else values.push(value);
    }
  }

  /**
   * The first value of a key.
   *
   * @param key The key, lower-case.
   * @returns The value, or `undefined` when the client did not send the key.
   */
  get(key: string): string | undefined {
    return this.#values.get(key)?.[0];
  }

  /**
   * Every value of a key.
   *
   * @param key The key, lower-case.
   * @returns The values, in order; empty when the client did not send the key.
   */
  getAll(key: string): readonly string[] {
    return this.#values.get(key) ?? [];
  }

  /** Each key with its first value. */
  *[Symbol.iterator](): Iterator<[string, string]> {
    for (const [key, values] of this.#values) yield [key, values[0]!];
  }
}

/** What every call shows its handler. */
export interface Call {
  /** The method's path, e.g. `/inference.GRPCInferenceService/ModelInfer`. */
  readonly path: string;
  /** The request metadata. */
  readonly metadata: Metadata;
  /**
   * Aborted when the call ends before its handler answered it: the client cancelled it, its
   * deadline passed (the DEADLINE_EXCEEDED status is already out then), or its connection
   * closed.
   */
  readonly signal: AbortSignal;
}

/** A unary call: one request message in, one response message (or a status) out. */
export interface UnaryCall extends Call {
  /** The request message, undecoded: handlers decode it, to answer a malformed one themselves. */
  readonly request: Uint8Array;
  /**
   * Runs `cleanup` once the call's answer was encoded (the response may view memory the
   * cleanup frees, a shared-memory region), or once it failed.
   *
   * @param cleanup Called once, after the answer.
   */
  defer(cleanup: () => void): void;
}

/** A bidirectional streaming call: request messages in, response messages out, in any order. */
export interface DuplexCall<Res> extends Call {
  /** Called with each request message, undecoded. The handler sets it when it starts. */
  onmessage: ((message: Uint8Array) => void) | undefined;
  /** Called once the client has sent its last message. The handler sets it when it starts. */
  onend: (() => void) | undefined;
  /**
   * Sends a response message.
   *
   * @param message The message.
   * @returns Settles once the call takes more: at once while few messages wait for the
   *   client, else once they were sent; at once after the call ended.
   */
  write(message: Res): Promise<void>;
  /**
   * Ends the call, after the messages already written.
   *
   * @param status The status; OK when omitted.
   */
  end(status?: GrpcStatus): void;
}

/** Encodes a method's response messages. */
export interface ResponseEncoder<Res> {
  /**
   * Encodes a message.
   *
   * @param message The message.
   * @param options The room to leave before it (for the gRPC message prefix), and where a large
   *   message's buffer comes from.
   * @returns `options.headroom` unwritten bytes, then the message.
   */
  encode(message: Res, options: EncodeOptions): Uint8Array;
}

/** A unary method: its response encoder, endpoint group and handler. */
export interface UnaryMethod<Res> {
  /** The method's kind. */
  readonly kind: "unary";
  /** Encodes the responses. */
  readonly response: ResponseEncoder<Res>;
  /** The endpoint group access restrictions name the method by. */
  readonly group: EndpointGroup;
  /**
   * Answers a call with its response message, or throws (or rejects with) a
   * {@linkcode GrpcError}.
   *
   * @param call The call.
   * @returns The response message.
   */
  handle(call: UnaryCall): Res | Promise<Res>;
}

/** A bidirectional streaming method: its response encoder, endpoint group and handler. */
export interface DuplexMethod<Res> {
  /** The method's kind. */
  readonly kind: "duplex";
  /** Encodes the responses. */
  readonly response: ResponseEncoder<Res>;
  /** The endpoint group access restrictions name the method by. */
  readonly group: EndpointGroup;
  /**
   * Starts serving a call: sets its `onmessage` and `onend`, and ends it once done.
   *
   * @param call The call.
   */
  handle(call: DuplexCall<Res>): void;
}

/** A method of a service, of either kind, whatever its response type. */
export type Method = UnaryMethod<unknown> | DuplexMethod<unknown>;

/** A gRPC service: its name, as in method paths, and its methods by name. */
export interface Service {
  /** The fully qualified service name, e.g. `inference.GRPCInferenceService`. */
  readonly name: string;
  /** The methods, by name. */
  readonly methods: Readonly<Record<string, Method>>;
}

/**
 * Decides whether a call to a method of an endpoint group may run.
 *
 * @param metadata The call's metadata.
 * @param group The method's endpoint group.
 * @returns The refusal to end the call with, or `undefined` to let it run.
 */
export type AccessCheck = (metadata: Metadata, group: EndpointGroup) => GrpcStatus | undefined;
