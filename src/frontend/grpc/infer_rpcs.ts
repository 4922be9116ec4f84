/**
 * The inference RPCs of the gRPC front end: `ModelInfer` (unary, coupled models) and
 * `ModelStreamInfer` (a bidirectional stream of requests, each answered by one response, or by
 * a decoupled model's steps). Both decode a request with `infer_messages.ts`, look its model up
 * once, and encode what the engine answers.
 *
 * @module
 */

import type { InferenceRequest, ModelHandle } from "../../engine/engine.ts";
import type { ParameterValue } from "../../callable/types.ts";
import { InferenceError } from "../../errors.ts";
import {
  codecs,
  type ModelInferRequest,
  type ModelInferResponse,
  type ModelStreamInferResponse,
} from "../../protocol/grpc_codec.ts";
import { FINAL_RESPONSE_PARAMETER } from "../../protocol/constants.ts";
import type { DuplexCall, Metadata, UnaryCall } from "./call.ts";
import {
  type GrpcInferRequest,
  toInferenceRequest,
  toInferResponseMessage,
} from "./infer_messages.ts";
import { decodeRequest, grpcErrorOf, type ServiceContext } from "./rpc.ts";
import { SlotSet } from "../../slot_set.ts";

const CLIENT_CANCELLED = "Request cancelled: the client cancelled the gRPC call";

const DECOUPLED_MESSAGE = "ModelInfer RPC doesn't support models with decoupled transaction policy";

/** The metadata key that asks a stream to end at its first failure, with that status. */
const END_ON_ERROR_KEY = "triton_grpc_error";

function decodeInfer(
  context: ServiceContext,
  bytes: Uint8Array,
  metadata: Metadata,
  signal: AbortSignal,
): GrpcInferRequest {
  const message: ModelInferRequest = decodeRequest(
    codecs.ModelInferRequest,
    "ModelInferRequest",
    bytes,
  );
  const { headerForwardPattern, sharedMemory } = context;
  return toInferenceRequest(message, {
    headers: metadata,
    ...(headerForwardPattern !== undefined ? { headerForwardPattern } : {}),
    signal,
    ...(sharedMemory !== undefined ? { sharedMemory } : {}),
  });
}

// Runs a decoded request to its response message: outputs directed to shared memory are
// written there. The caller releases the regions once the message is encoded: its tensors may
// still view an input's region until then.
async function inferMessage(
  context: ServiceContext,
  decoded: GrpcInferRequest,
  model: ModelHandle,
  extra?: Readonly<Record<string, ParameterValue>>,
): Promise<ModelInferResponse> {
  const response = await context.engine.infer(decoded.request, model);
  decoded.sharedMemory.writeOutputs(response.outputs);
  return toInferResponseMessage(response, extra, decoded.sharedMemory.outputs);
}

/**
 * `ModelInfer`: one request of a coupled model, answered once. A client that cancels the call
 * cancels the request.
 *
 * @param context The front end's engine and settings.
 * @param call The call.
 * @returns The response message.
 * @throws {InferenceError} For a malformed request, an unknown or decoupled model, or what the
 *   engine answers.
 */
export async function modelInfer(
  context: ServiceContext,
  call: UnaryCall,
): Promise<ModelInferResponse> {
  const controller = new AbortController();
  // The call's signal aborts only while the call runs; building the error captures a stack.
  const cancel = (): void => controller.abort(InferenceError.cancelled(CLIENT_CANCELLED));
  call.signal.addEventListener("abort", cancel, { once: true });
  try {
    const decoded = decodeInfer(context, call.request, call.metadata, controller.signal);
    call.defer(() => decoded.sharedMemory.release());
    const { request } = decoded;
    // The request's one lookup: the engine takes the handle as it is.
    const model = context.engine.model(request.modelName, request.modelVersion);
    if (model.decoupled) throw InferenceError.unsupported(DECOUPLED_MESSAGE);
    return await inferMessage(context, decoded, model);
  } finally {
    call.signal.removeEventListener("abort", cancel);
  }
}

/**
 * `ModelStreamInfer`: serves each request of the stream as it arrives (they run concurrently),
 * writing a decoupled model's steps as they come and waiting for the client when it reads
 * slower than the model answers. A failed request answers an `error_message` and the stream goes
 * on, unless the client's `triton_grpc_error: true` metadata asks to end it with the failure's
 * status. The stream ends with OK once the client has sent everything and every request is
 * answered; a client that cancels it cancels the requests in flight.
 *
 * @param context The front end's engine and settings.
 * @param call The call.
 */
export function modelStreamInfer(
  context: ServiceContext,
  call: DuplexCall<ModelStreamInferResponse>,
): void {
  const { engine, logger } = context;
  // Slots, not a Set: one entry per request of a long stream comes and goes (see slot_set.ts).
  const controllers = new SlotSet<AbortController>();
  const endOnError = call.metadata.get(END_ON_ERROR_KEY) === "true";
  let pending = 0;
  let clientDone = false;
  // Set once the call is over (ended here, or cancelled): nothing more is written.
  let closed = false;

  const finish = (): void => {
    if (!closed && clientDone && pending === 0) {
      closed = true;
      call.end();
    }
  };
  // The call waits for the client when it holds too many messages, so a slow client slows the
  // model's generator instead of growing memory.
  const write = async (message: ModelStreamInferResponse): Promise<void> => {
    if (!closed) await call.write(message);
  };
  const abortAll = (): void => {
    closed = true;
    for (const controller of controllers.values()) {
      controller.abort(InferenceError.cancelled(CLIENT_CANCELLED));
    }
  };

  const run = async (bytes: Uint8Array): Promise<void> => {
    const controller = new AbortController();
    const slot = controllers.add(controller);
    let request: InferenceRequest | undefined;
    let modelVersion = "";
    let modelName = "";
    let id = "";
    let decoded: GrpcInferRequest | undefined;
    try {
      decoded = decodeInfer(context, bytes, call.metadata, controller.signal);
      request = decoded.request;
      modelName = request.modelName;
      modelVersion = request.modelVersion === undefined ? "" : String(request.modelVersion);
      id = request.id ?? "";
      const model = engine.model(request.modelName, request.modelVersion);
      if (model.decoupled) {
        if (decoded.sharedMemory.outputs.size > 0) {
          throw InferenceError.unsupported(
            `Cannot write the outputs of decoupled model '${model.name}' into shared memory: request them in the responses`,
          );
        }
        let sentFinal = false;
        for await (const step of engine.inferStream(request, model)) {
          // A final step without outputs is Triton's flags-only final response.
          if (step.final && step.outputs.size === 0) break;
          await write({
            infer_response: toInferResponseMessage(step, {
              [FINAL_RESPONSE_PARAMETER]: step.final,
            }),
          });
          // The client went away: stop pulling (which cancels the request in the engine).
          if (closed) break;
          if (step.final) {
            sentFinal = true;
            break;
          }
        }
        if (!sentFinal && decoded.enableEmptyFinalResponse) {
          await write({
            infer_response: {
              model_name: modelName,
              model_version: modelVersion,
              ...(id ? { id } : {}),
              parameters: { [FINAL_RESPONSE_PARAMETER]: { bool_param: true } },
            },
          });
        }
      } else {
        await write({
          infer_response: await inferMessage(context, decoded, model, {
            [FINAL_RESPONSE_PARAMETER]: true,
          }),
        });
      }
    } catch (error) {
      const failure = grpcErrorOf(error, "ModelStreamInfer", logger);
      if (endOnError && !closed) {
        abortAll();
        call.end(failure);
      } else {
        await write({
          error_message: failure.message,
          infer_response: {
            model_name: modelName,
            model_version: modelVersion,
            ...(id ? { id } : {}),
          },
        });
      }
    } finally {
      decoded?.sharedMemory.release();
      controllers.delete(slot, controller);
    }
  };

  call.onmessage = (bytes) => {
    pending++;
    run(bytes).finally(() => {
      pending--;
      finish();
    });
  };
  // The client is done sending: answer what is in flight, then close with OK.
  call.onend = () => {
    clientDone = true;
    finish();
  };
  call.signal.addEventListener("abort", abortAll, { once: true });
}
