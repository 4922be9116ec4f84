// A minimal grpc-js client for the gRPC front end tests: unary calls with our codecs (or raw
// bytes) and ModelStreamInfer streams.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import {
  codecs,
  type MessageCodec,
  type ModelInferRequest,
  type ModelStreamInferResponse,
} from "../src/protocol/grpc_codec.ts";

const SERVICE = "/inference.GRPCInferenceService/";

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A ModelStreamInfer call. */
export interface TestStream {
  /** Sends one request. */
  write(request: ModelInferRequest): void;
  /** Half-closes: the client sends no more requests. */
  end(): void;
  /** Cancels the call. */
  cancel(): void;
  /** The next response, or `undefined` once the stream ended. */
  next(): Promise<ModelStreamInferResponse | undefined>;
  /** The final status of the call. */
  readonly status: Promise<grpc.StatusObject>;
}

/** Asserts that a call fails with a gRPC status and details (exact text, or a pattern). */
export async function rejectsWith(
  promise: Promise<unknown>,
  code: grpc.status,
  details: string | RegExp,
): Promise<void> {
  await assert.rejects(promise, (error: grpc.ServiceError) => {
    assert.equal(error.code, code, `status ${error.code}: ${error.details}`);
    if (typeof details === "string") assert.equal(error.details, details);
    else assert.match(error.details, details);
    return true;
  });
}

/** Options of {@linkcode TestGrpcClient}. */
export interface TestGrpcClientOptions {
  /** Channel credentials (default: cleartext). */
  credentials?: grpc.ChannelCredentials;
  /** Deadline of each unary call in ms, a watchdog (default: none). */
  deadlineMs?: number;
  /** Channel options, e.g. `grpc.ssl_target_name_override` (default: none). */
  channelOptions?: grpc.ChannelOptions;
}

/** A test client of one server. */
export class TestGrpcClient implements Disposable {
  #client: grpc.Client;
  #deadlineMs: number | undefined;

  /**
   * @param server The server's port on 127.0.0.1, or its `grpc://host:port` (or `grpcs://`) URL.
   * @param options Credentials and a call deadline.
   */
  constructor(server: number | string, options: TestGrpcClientOptions = {}) {
    const address = typeof server === "number"
      ? `127.0.0.1:${server}`
      : server.replace(/^grpcs?:\/\//, "");
    this.#client = new grpc.Client(
      address,
      options.credentials ?? grpc.credentials.createInsecure(),
      options.channelOptions ?? {},
    );
    this.#deadlineMs = options.deadlineMs;
  }

  /** Calls a unary RPC with raw request bytes and returns the raw response bytes. */
  raw(
    method: string,
    request: Uint8Array,
    metadata: grpc.Metadata = new grpc.Metadata(),
    service = SERVICE,
  ): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        `${service}${method}`,
        (value: Uint8Array) => toBuffer(value),
        (bytes: Buffer) => new Uint8Array(bytes),
        request,
        metadata,
        this.#deadlineMs === undefined ? {} : { deadline: Date.now() + this.#deadlineMs },
        (error, response) => error ? reject(error) : resolve(response!),
      );
    });
  }

  /** Calls a unary RPC with our codecs. */
  async call<Req, Res>(
    method: string,
    requestCodec: MessageCodec<Req>,
    responseCodec: MessageCodec<Res>,
    request: Req,
    metadata?: grpc.Metadata,
  ): Promise<Res> {
    return responseCodec.decode(await this.raw(method, requestCodec.encode(request), metadata));
  }

  /** Opens a ModelStreamInfer call. */
  stream(metadata: grpc.Metadata = new grpc.Metadata()): TestStream {
    const call = this.#client.makeBidiStreamRequest(
      `${SERVICE}ModelStreamInfer`,
      (value: ModelInferRequest) => toBuffer(codecs.ModelInferRequest.encode(value)),
      (bytes: Buffer) => codecs.ModelStreamInferResponse.decode(bytes),
      metadata,
    );
    const queue: (ModelStreamInferResponse | undefined)[] = [];
    const waiters: ((value: ModelStreamInferResponse | undefined) => void)[] = [];
    const push = (value: ModelStreamInferResponse | undefined): void => {
      const waiter = waiters.shift();
      if (waiter) waiter(value);
      else queue.push(value);
    };
    call.on("data", (response: ModelStreamInferResponse) => push(response));
    call.on("end", () => push(undefined));
    // Errors end the stream; the status promise reports them.
    call.on("error", () => push(undefined));
    const status = new Promise<grpc.StatusObject>((resolve) => call.on("status", resolve));
    return {
      write: (request) => call.write(request),
      end: () => call.end(),
      cancel: () => call.cancel(),
      next: () =>
        queue.length > 0
          ? Promise.resolve(queue.shift())
          : new Promise((resolve) => waiters.push(resolve)),
      status,
    };
  }

  /** Closes the channel. */
  [Symbol.dispose](): void {
    this.#client.close();
  }
}
