/**
 * The vocabulary of the gRPC front end's RPC tables (`service.ts`): what every handler shares
 * ({@linkcode ServiceContext}), an RPC as data ({@linkcode unary}, {@linkcode duplex}: its
 * endpoint group, response codec and handler), and the one error mapping
 * ({@linkcode grpcErrorOf}) that turns what a handler throws into a gRPC status.
 *
 * @module
 */

import type { EndpointGroup } from "../../config/security_config.ts";
import type { Engine } from "../../engine/engine.ts";
import type { ModelRepository } from "../../engine/repository.ts";
import { grpcStatusOf, InferenceError, messageOf, toInferenceError } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { MessageCodec } from "../../protocol/grpc_codec.ts";
import type { SharedMemoryRegistry } from "../../shm/registry.ts";
import {
  type DuplexCall,
  type DuplexMethod,
  GrpcError,
  type Method,
  type UnaryCall,
  type UnaryMethod,
} from "./call.ts";
import type { Tracer } from "../../telemetry/tracer.ts";

/** What the handlers of a front end's RPCs share. */
export interface ServiceContext {
  /** The engine serving the models. */
  readonly engine: Engine;
  /** Where failures are logged; `LogSettings` reads and changes its settings. */
  readonly logger: Logger;
  /** The models the repository extension loads, unloads and lists. */
  readonly repository: ModelRepository;
  /** The server's system shared-memory regions; `undefined` where it serves none. */
  readonly sharedMemory: SharedMemoryRegistry | undefined;
  /** Metadata keys matching it are forwarded as request parameters; `undefined` for none. */
  readonly headerForwardPattern: RegExp | undefined;
  /** The server's tracer, whose settings `TraceSetting` reads and changes. */
  readonly tracer: Tracer | undefined;
}

/** An RPC of a table, until it is bound to a front end's context. */
export interface Rpc {
  /**
   * The method serving the RPC for a front end.
   *
   * @param context What its handler uses.
   * @param name The RPC's name in logs, e.g. `ModelInfer`.
   * @returns The method.
   */
  bind(context: ServiceContext, name: string): Method;
}

/**
 * Maps a failure of an RPC to the gRPC error it answers: an {@linkcode InferenceError} keeps its
 * code (`grpcStatusOf`) and message; anything else is logged as an error and answers INTERNAL.
 * Expected failures are logged at verbose level 1. Unary RPCs end their call with it; the
 * stream answers its message as a response's `error_message`.
 *
 * @param error What the handler threw.
 * @param rpc The RPC's name, for the log, e.g. `ModelInfer`.
 * @param logger Where failures are logged.
 * @returns The gRPC error, whose message is the inference error's.
 *
 * @example A model that is not there answers NOT_FOUND
 * ```ts
 * import { grpcErrorOf } from "./rpc.ts";
 * import { InferenceError } from "../../errors.ts";
 * import { Logger } from "../../log.ts";
 * import assert from "node:assert/strict";
 *
 * const error = grpcErrorOf(InferenceError.notFound("no model 'm'"), "ModelReady", new Logger());
 * assert.deepEqual([error.code, error.details], [5, "no model 'm'"]);
 * ```
 */
export function grpcErrorOf(error: unknown, rpc: string, logger: Logger): GrpcError {
  const inferenceError = toInferenceError(error);
  if (!(error instanceof InferenceError)) {
    logger.error(`gRPC ${rpc} failed: ${inferenceError.message}`);
  } else {
    logger.debug(1, () => `gRPC ${rpc} answered ${inferenceError.code}: ${error.message}`);
  }
  return new GrpcError(grpcStatusOf(inferenceError.code), inferenceError.message, {
    cause: inferenceError,
  });
}

/**
 * Decodes a request message, refusing a malformed one with INVALID_ARG (the RPCs take their
 * requests undecoded so that they answer this themselves).
 *
 * @param codec The request's codec.
 * @param what Names the message in the error, e.g. `model request`.
 * @param bytes The message.
 * @returns The decoded message.
 * @throws {InferenceError} (INVALID_ARG) When the bytes are not a valid message.
 *
 * @example Decode a model reference, refuse a truncated one
 * ```ts
 * import { decodeRequest } from "./rpc.ts";
 * import { codecs } from "../../protocol/grpc_codec.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(decodeRequest(codecs.ModelRef, "model request", new Uint8Array([10, 1, 109])).name, "m");
 * assert.throws(
 *   () => decodeRequest(codecs.ModelRef, "model request", new Uint8Array([10, 9])),
 *   /Invalid model request message: /,
 * );
 * ```
 */
export function decodeRequest<T>(codec: MessageCodec<T>, what: string, bytes: Uint8Array): T {
  try {
    return codec.decode(bytes);
  } catch (error) {
    throw InferenceError.invalidArg(
      `Invalid ${what} message: ${messageOf(error)}`,
      { cause: error },
    );
  }
}

/**
 * A unary RPC: its handler answers a call with a response message, or throws; what it throws
 * ends the call with {@linkcode grpcErrorOf}'s status.
 *
 * @param group The endpoint group access restrictions name it by.
 * @param response The codec of its response.
 * @param handler Answers a call.
 * @returns The RPC.
 *
 * @example A ServerLive handler
 * ```ts
 * import { unary } from "./rpc.ts";
 * import { codecs } from "../../protocol/grpc_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const live = unary("health", codecs.ServerLiveResponse, ({ engine }) => ({ live: engine.isLive() }));
 * assert.equal(live.bind({} as never, "ServerLive").kind, "unary");
 * ```
 */
export function unary<Res>(
  group: EndpointGroup,
  response: MessageCodec<Res>,
  handler: (context: ServiceContext, call: UnaryCall) => Res | Promise<Res>,
): Rpc {
  return {
    bind: (context, name): UnaryMethod<Res> => {
      const fail = (error: unknown): never => {
        throw grpcErrorOf(error, name, context.logger);
      };
      return {
        kind: "unary",
        group,
        response,
        handle: (call) => {
          try {
            const answer = handler(context, call);
            return answer instanceof Promise ? answer.catch(fail) : answer;
          } catch (error) {
            return fail(error);
          }
        },
      };
    },
  };
}

/**
 * A bidirectional streaming RPC: its handler serves a call (and maps its failures itself with
 * {@linkcode grpcErrorOf}: a stream answers most of them as messages).
 *
 * @param group The endpoint group access restrictions name it by.
 * @param response The codec of its responses.
 * @param handler Starts serving a call.
 * @returns The RPC.
 *
 * @example A stream that ends when the client does
 * ```ts
 * import { duplex } from "./rpc.ts";
 * import { codecs } from "../../protocol/grpc_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const echo = duplex("inference", codecs.ModelStreamInferResponse, (_context, call) => {
 *   call.onend = () => call.end();
 * });
 * assert.equal(echo.bind({} as never, "Echo").kind, "duplex");
 * ```
 */
export function duplex<Res>(
  group: EndpointGroup,
  response: MessageCodec<Res>,
  handler: (context: ServiceContext, call: DuplexCall<Res>) => void,
): Rpc {
  return {
    bind: (context): DuplexMethod<Res> => ({
      kind: "duplex",
      group,
      response,
      handle: (call) => handler(context, call),
    }),
  };
}
