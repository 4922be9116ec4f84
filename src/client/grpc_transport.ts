/**
 * The gRPC transport: `inference.GRPCInferenceService` over `@grpc/grpc-js` with DenoTriton's
 * protobuf codec, raw tensor contents, and `ModelStreamInfer` for decoupled models.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import { QUEUE_FULL_MESSAGE } from "../errors.ts";
import {
  codecs,
  type MessageCodec,
  type ModelInferRequest,
  type ModelStreamInferResponse,
} from "../protocol/grpc_codec.ts";
import { modelConfigToJson } from "../protocol/model_config_proto.ts";
import { EMPTY_FINAL_PARAMETER, FINAL_RESPONSE_PARAMETER } from "../protocol/constants.ts";
import { BoundedQueue } from "../streams/bounded_queue.ts";
import {
  ClientInferenceServerError,
  ClientModelUnavailableError,
  ClientQueueFullError,
  ClientTimeoutError,
} from "./errors.ts";
import { fromModelInferResponse, toModelInferRequest } from "./grpc_messages.ts";
import type {
  Transport,
  TransportCallOptions,
  TransportInferRequest,
  TransportInferResponse,
  TransportLoadOptions,
} from "./transport.ts";
import type { TritonUrl } from "./url.ts";

/** How long a finished stream call may wait for the server's status before it is cancelled. */
const FINISHED_CALL_GRACE_MS = 10_000;

const SERVICE = "/inference.GRPCInferenceService";

// Cancellations and unreachable servers carry these codes; the client maps them by its signals.
const CONNECTION_TROUBLE = /No connection established|ECONNREFUSED|ECONNRESET|Connection dropped/;

/**
 * Turns a gRPC error status into a client error.
 *
 * @param what What was being done, e.g. `"Inference failed"`.
 * @param code The gRPC status code.
 * @param details The status details (the server's message).
 * @returns The error to throw.
 *
 * @example Map gRPC status codes to client errors
 * ```ts
 * import { grpcErrorOf } from "./grpc_transport.ts";
 * import { ClientQueueFullError, ClientTimeoutError } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(grpcErrorOf("Inference failed", 14, "Exceeds maximum queue size") instanceof ClientQueueFullError);
 * assert.ok(grpcErrorOf("Inference failed", 4, "Deadline exceeded") instanceof ClientTimeoutError);
 * assert.equal(grpcErrorOf("Inference failed", 3, "bad").message, "Inference failed: bad (gRPC status 3)");
 * ```
 */
export function grpcErrorOf(
  what: string,
  code: number,
  details: string,
): ClientInferenceServerError | ClientTimeoutError {
  const message = details === "" ? "no error message" : details;
  const full = `${what}: ${message} (gRPC status ${code})`;
  if (code === grpc.status.DEADLINE_EXCEEDED) return new ClientTimeoutError(full);
  if (code === grpc.status.UNAVAILABLE && CONNECTION_TROUBLE.test(message)) {
    return new ClientTimeoutError(`Cannot reach server: ${message}`);
  }
  const options = { status: code, serverMessage: message };
  if (code === grpc.status.UNAVAILABLE && message.includes(QUEUE_FULL_MESSAGE)) {
    return new ClientQueueFullError(full, options);
  }
  return new ClientInferenceServerError(full, options);
}

function metadataOf(headers: Readonly<Record<string, string>>): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(headers)) metadata.set(key.toLowerCase(), value);
  return metadata;
}

function serializer<T>(codec: MessageCodec<T>): (value: T) => Buffer {
  return (value) => {
    const bytes = codec.encode(value);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializer<T>(codec: MessageCodec<T>): (bytes: Buffer) => T {
  return (bytes) => codec.decode(bytes);
}

/**
 * The gRPC transport of `ModelClient`.
 *
 * @example Unreachable servers read as timeouts
 * ```ts
 * import { GrpcTransport } from "./grpc_transport.ts";
 * import { ClientTimeoutError } from "./errors.ts";
 * import { parseTritonUrl } from "./url.ts";
 * import assert from "node:assert/strict";
 *
 * const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
 * const port = listener.addr.port;
 * listener.close();
 * const transport = new GrpcTransport(parseTritonUrl(`grpc://127.0.0.1:${port}`));
 * await assert.rejects(
 *   transport.serverReady({ signal: AbortSignal.timeout(5000), headers: {} }),
 *   ClientTimeoutError,
 * );
 * await transport.close();
 * ```
 */
export class GrpcTransport implements Transport {
  /** Always `"grpc"`. */
  readonly protocol = "grpc" as const;
  #client: grpc.Client;

  /**
   * Creates a transport; the channel connects lazily.
   *
   * @param url The server URL.
   */
  constructor(url: TritonUrl) {
    this.#client = new grpc.Client(url.withoutScheme, grpc.credentials.createInsecure(), {
      // Triton sets no message-size limit; tensors can be large.
      "grpc.max_receive_message_length": -1,
      "grpc.max_send_message_length": -1,
    });
  }

  #unary<Req, Res>(
    method: string,
    requestCodec: MessageCodec<Req>,
    responseCodec: MessageCodec<Res>,
    request: Req,
    what: string,
    options: TransportCallOptions,
  ): Promise<Res> {
    options.signal.throwIfAborted();
    return new Promise<Res>((resolve, reject) => {
      const call = this.#client.makeUnaryRequest(
        `${SERVICE}/${method}`,
        serializer(requestCodec),
        deserializer(responseCodec),
        request,
        metadataOf(options.headers),
        {},
        (error, response) => {
          options.signal.removeEventListener("abort", abort);
          if (options.signal.aborted) reject(options.signal.reason);
          else if (error) reject(grpcErrorOf(what, error.code, error.details));
          else resolve(response as Res);
        },
      );
      const abort = (): void => call.cancel();
      options.signal.addEventListener("abort", abort, { once: true });
    });
  }

  /** `ServerReady`. */
  async serverReady(options: TransportCallOptions): Promise<boolean> {
    const response = await this.#unary(
      "ServerReady",
      codecs.Empty,
      codecs.ReadyResponse,
      {},
      "Cannot check server readiness",
      options,
    );
    return response.ready;
  }

  /** `ModelReady`; an unknown model is not ready. */
  async modelReady(
    name: string,
    version: string | undefined,
    options: TransportCallOptions,
  ): Promise<boolean> {
    try {
      const response = await this.#unary(
        "ModelReady",
        codecs.ModelRef,
        codecs.ReadyResponse,
        { name, version: version ?? "" },
        `Cannot check readiness of model '${name}'`,
        options,
      );
      return response.ready;
    } catch (error) {
      if (error instanceof ClientInferenceServerError && error.status === grpc.status.NOT_FOUND) {
        return false;
      }
      throw error;
    }
  }

  /** `ModelConfig`, turned into Triton's JSON form. */
  async modelConfig(
    name: string,
    version: string | undefined,
    options: TransportCallOptions,
  ): Promise<Record<string, unknown>> {
    const what = `Cannot get config of model '${name}'`;
    let response;
    try {
      response = await this.#unary(
        "ModelConfig",
        codecs.ModelRef,
        codecs.ModelConfigResponse,
        { name, version: version ?? "" },
        what,
        options,
      );
    } catch (error) {
      if (error instanceof ClientInferenceServerError && error.status === grpc.status.NOT_FOUND) {
        throw new ClientModelUnavailableError(error.message, { cause: error });
      }
      throw error;
    }
    if (response.config === null) {
      throw new ClientInferenceServerError(`${what}: the answer has no config`);
    }
    return modelConfigToJson(response.config);
  }

  /** `ModelInfer` with raw contents. */
  async infer(
    request: TransportInferRequest,
    options: TransportCallOptions,
  ): Promise<TransportInferResponse> {
    const response = await this.#unary(
      "ModelInfer",
      codecs.ModelInferRequest,
      codecs.ModelInferResponse,
      toModelInferRequest(request),
      "Inference failed",
      options,
    );
    return fromModelInferResponse(response);
  }

  /** `ModelStreamInfer` with one request; ends at the response flagged final. */
  async *inferStream(
    request: TransportInferRequest,
    options: TransportCallOptions,
  ): AsyncGenerator<TransportInferResponse, void, undefined> {
    const { signal } = options;
    signal.throwIfAborted();
    const call = this.#client.makeBidiStreamRequest<ModelInferRequest, ModelStreamInferResponse>(
      `${SERVICE}/ModelStreamInfer`,
      serializer(codecs.ModelInferRequest),
      deserializer(codecs.ModelStreamInferResponse),
      metadataOf(options.headers),
      {},
    );
    // grpc-js hands messages over as events: the source pauses while the queue is full.
    let finished = false;
    const queue = new BoundedQueue<ModelStreamInferResponse>({
      pull: () => call.resume(),
      // A finished call is not cancelled: it is half-closed, and the server ends it with OK.
      cancel: () => finished || call.cancel(),
    });
    call.on("data", (message: ModelStreamInferResponse) => {
      void queue.push(message);
      if (queue.desiredSize <= 0) call.pause();
    });
    call.on("error", (error: grpc.ServiceError) => {
      queue.fail(
        signal.aborted ? signal.reason : grpcErrorOf("Inference failed", error.code, error.details),
      );
    });
    call.on("end", () => queue.end());
    const abort = (): void => call.cancel();
    signal.addEventListener("abort", abort, { once: true });
    const reader = queue.readable.getReader();
    try {
      call.write(toModelInferRequest(request, { [EMPTY_FINAL_PARAMETER]: true }));
      while (true) {
        const { done, value: message } = await reader.read();
        if (done) {
          throw new ClientInferenceServerError(
            "Inference failed: the server closed the stream before the final response",
          );
        }
        if (message.error_message) {
          throw new ClientInferenceServerError(`Inference failed: ${message.error_message}`, {
            serverMessage: message.error_message,
          });
        }
        if (!message.infer_response) continue;
        const response = fromModelInferResponse(message.infer_response);
        const final = response.parameters[FINAL_RESPONSE_PARAMETER] === true;
        const { [FINAL_RESPONSE_PARAMETER]: _, ...parameters } = response.parameters;
        if (Object.keys(response.outputs).length > 0 || !final) {
          yield { ...response, parameters };
        }
        if (final) {
          finished = true;
          return;
        }
      }
    } finally {
      signal.removeEventListener("abort", abort);
      if (finished) {
        // The answer is complete: half-close, and the server ends the call with OK (no
        // RST_STREAM, which servers bound as rapid resets). Should it not, the call is
        // cancelled after a while, without holding the process open.
        call.end();
        const timer = setTimeout(() => call.cancel(), FINISHED_CALL_GRACE_MS);
        Deno.unrefTimer(timer);
        call.on("status", () => clearTimeout(timer));
      }
      // Nothing more is read; a caller that stopped early cancels the call through the
      // queue's cancel.
      await reader.cancel().catch(() => {});
    }
  }

  async #repository(
    method: string,
    request: Parameters<typeof codecs.RepositoryModelRequest.encode>[0],
    what: string,
    options: TransportCallOptions,
  ): Promise<void> {
    await this.#unary(method, codecs.RepositoryModelRequest, codecs.Empty, request, what, options);
  }

  /** `RepositoryModelLoad`. */
  loadModel(
    name: string,
    load: TransportLoadOptions,
    options: TransportCallOptions,
  ): Promise<void> {
    const parameters: Record<string, { string_param?: string; bytes_param?: Uint8Array }> = {};
    if (load.config !== undefined) parameters["config"] = { string_param: load.config };
    for (const [key, bytes] of Object.entries(load.files ?? {})) {
      parameters[key] = { bytes_param: bytes };
    }
    return this.#repository(
      "RepositoryModelLoad",
      { model_name: name, parameters },
      `Cannot load model '${name}'`,
      options,
    );
  }

  /** `RepositoryModelUnload`. */
  unloadModel(name: string, options: TransportCallOptions): Promise<void> {
    return this.#repository(
      "RepositoryModelUnload",
      { model_name: name },
      `Cannot unload model '${name}'`,
      options,
    );
  }

  /** Closes the channel. */
  close(): Promise<void> {
    this.#client.close();
    return Promise.resolve();
  }
}
