/**
 * The handlers of `inference.GRPCInferenceService` and `grpc.health.v1.Health` over an
 * {@linkcode Engine}, as `@grpc/grpc-js` service definitions and implementations.
 *
 * Requests arrive as raw bytes and are decoded inside the handlers, so a malformed message
 * gets a clear INVALID_ARGUMENT (and, on the stream, an `error_message`) instead of grpc-js's
 * bare INTERNAL.
 *
 * Over 500 lines for a reason: one handler per RPC of the service (inference, metadata,
 * repository, statistics, logging, shared memory), each short, share the decoding and error
 * mapping at the top of this file.
 *
 * @module
 */

import type * as grpc from "@grpc/grpc-js";
import type { Buffer } from "node:buffer";
import {
  engineRepository,
  type ModelRepository,
  refuseNewConfiguration,
} from "../../engine/repository.ts";
import type { Engine, InferenceRequest, ModelHandle } from "../../engine/engine.ts";
import type { ParameterValue } from "../../callable/types.ts";
import type { RegionStatus, SharedMemoryRegistry } from "../../shm/registry.ts";
import { grpcStatusOf, InferenceError, toInferenceError } from "../../errors.ts";
import { Logger } from "../../log.ts";
import { changeLogSettings, LOG_SETTING_KINDS, type TritonLogSettings } from "../log_settings.ts";
import {
  codecs,
  type LogSettingValue,
  type MessageCodec,
  type ModelInferRequest,
  type ModelInferResponse,
  type ModelRef,
  type ModelStreamInferResponse,
  type RepositoryModelRequest,
} from "../../protocol/grpc_codec.ts";
import { FINAL_RESPONSE_PARAMETER } from "../../protocol/constants.ts";
import { byteCount, REGISTER_REQUEST } from "../../protocol/shared_memory.ts";
import { withSharedMemoryExtension } from "../shared_memory.ts";
import { parseModelVersion, toInferenceRequest, toInferResponseMessage } from "./infer_messages.ts";
import { modelConfigToMessage } from "../../protocol/model_config_proto.ts";
import { messageSerializer } from "./message_framing.ts";

/** Options of {@linkcode createServices}. */
export interface GrpcServiceOptions {
  /**
   * Metadata keys matching this pattern are forwarded as string request parameters.
   *
   * @default {undefined}
   */
  headerForwardPattern?: RegExp;
  /**
   * Where failures are logged; `LogSettings` reads and changes its settings.
   *
   * @default {new Logger()}
   */
  logger?: Logger;
  /**
   * The models the repository extension loads, unloads and lists.
   *
   * @default {engineRepository(engine): the models the engine loaded}
   */
  repository?: ModelRepository;
  /**
   * The server's system shared-memory regions; without it the shared-memory RPCs answer
   * "not supported".
   *
   * @default {undefined}
   */
  sharedMemory?: SharedMemoryRegistry;
}

/** A grpc-js service: its definition and its handlers. */
export interface GrpcService {
  /** Method paths, streaming kinds and (de)serializers. */
  readonly definition: grpc.ServiceDefinition;
  /** The handlers, by method name. */
  readonly implementation: grpc.UntypedServiceImplementation;
}

/** The inference service name, as in method paths. */
export const INFERENCE_SERVICE = "inference.GRPCInferenceService";

/** The health service name, as in method paths. */
export const HEALTH_SERVICE = "grpc.health.v1.Health";

const CLIENT_CANCELLED = "Request cancelled: the client cancelled the gRPC call";

const DECOUPLED_MESSAGE = "ModelInfer RPC doesn't support models with decoupled transaction policy";

type Raw = Buffer;

function method(
  service: string,
  name: string,
  response: MessageCodec<never>,
  streaming = false,
): grpc.MethodDefinition<Raw, unknown> {
  return {
    path: `/${service}/${name}`,
    requestStream: streaming,
    responseStream: streaming,
    // Requests stay raw; handlers decode them to answer decoding errors themselves.
    requestSerialize: (value: Raw): Buffer => value,
    requestDeserialize: (bytes: Buffer): Raw => bytes,
    responseSerialize: messageSerializer(response),
    responseDeserialize: (bytes: Buffer): unknown => response.decode(bytes),
  };
}

function decode<T>(codec: MessageCodec<T>, what: string, bytes: Uint8Array): T {
  try {
    return codec.decode(bytes);
  } catch (error) {
    throw InferenceError.invalidArg(
      `Invalid ${what} message: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}

/** A gRPC status error as grpc-js expects it from handlers. */
function statusError(error: InferenceError): Partial<grpc.StatusObject> {
  return { code: grpcStatusOf(error.code), details: error.message };
}

// Each setting travels in the SettingValue field of its type.
function toSettingValues(settings: TritonLogSettings): Record<string, LogSettingValue> {
  const values: Record<string, LogSettingValue> = {};
  for (const [name, kind] of Object.entries(LOG_SETTING_KINDS)) {
    values[name] = { [`${kind}_param`]: settings[name as keyof TritonLogSettings] };
  }
  return values;
}

// Binary (`-bin`) metadata has no string form, so it is never forwarded.
function stringMetadata(metadata: grpc.Metadata): [string, string][] {
  return Object.entries(metadata.getMap()).filter((entry): entry is [string, string] =>
    typeof entry[1] === "string"
  );
}

/**
 * Builds the inference and health services over an engine.
 *
 * @param engine The engine serving the models.
 * @param options Header forwarding and logging.
 * @returns The inference service and the health service.
 *
 * @example Method paths
 * ```ts
 * import { createServices } from "./service.ts";
 * import type { Engine } from "../../engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const { inference } = createServices({} as Engine);
 * assert.equal(inference.definition.ModelInfer?.path, "/inference.GRPCInferenceService/ModelInfer");
 * assert.equal(inference.definition.ModelStreamInfer?.requestStream, true);
 * ```
 */
export function createServices(
  engine: Engine,
  options: GrpcServiceOptions = {},
): { inference: GrpcService; health: GrpcService } {
  const { logger = new Logger(), headerForwardPattern, sharedMemory } = options;
  const repository = options.repository ?? engineRepository(engine);

  const fail = (error: unknown, rpc: string): InferenceError => {
    const inferenceError = toInferenceError(error);
    if (!(error instanceof InferenceError)) {
      logger.error(`gRPC ${rpc} failed: ${inferenceError.message}`);
    } else {
      logger.debug(1, () => `gRPC ${rpc} answered ${inferenceError.code}: ${error.message}`);
    }
    return inferenceError;
  };

  // A handler may answer at once or later; what it throws either way becomes the call's status.
  // What it hands to `after` runs once the answer is sent: grpc-js serializes the response inside
  // `callback`, so memory the response views (a shared-memory region) must outlive that call.
  const unary = <Res>(
    rpc: string,
    handler: (
      bytes: Uint8Array,
      call: grpc.ServerUnaryCall<Raw, Res>,
      after: (cleanup: () => void) => void,
    ) => Res | Promise<Res>,
  ): grpc.handleUnaryCall<Raw, Res> =>
  (call, callback): void => {
    const cleanups: (() => void)[] = [];
    Promise.try(() => handler(call.request, call, (cleanup) => cleanups.push(cleanup))).then(
      (response) => callback(null, response),
      (error) => callback(statusError(fail(error, rpc))),
    ).finally(() => {
      for (const cleanup of cleanups) cleanup();
    });
  };

  const modelRef = (bytes: Uint8Array): { name: string; version: number | undefined } => {
    const ref: ModelRef = decode(codecs.ModelRef, "model request", bytes);
    return { name: ref.name ?? "", version: parseModelVersion(ref.version) };
  };

  const repositoryRequest = async (
    bytes: Uint8Array,
    action: "load" | "unload",
  ): Promise<Record<string, never>> => {
    const request: RepositoryModelRequest = decode(
      codecs.RepositoryModelRequest,
      `repository ${action} request`,
      bytes,
    );
    if (request.repository_name) {
      throw InferenceError.unsupported("'repository_name' specification is not supported");
    }
    const name = request.model_name ?? "";
    if (action === "unload") {
      await repository.unload(name);
    } else {
      refuseNewConfiguration(name, Object.keys(request.parameters ?? {}));
      await repository.load(name);
    }
    return {};
  };

  const notSupported = (message: string) => (): never => {
    throw InferenceError.unsupported(message);
  };

  const decodeInfer = (
    bytes: Uint8Array,
    metadata: grpc.Metadata,
    signal: AbortSignal,
  ): ReturnType<typeof toInferenceRequest> => {
    const message: ModelInferRequest = decode(codecs.ModelInferRequest, "ModelInferRequest", bytes);
    return toInferenceRequest(message, {
      headers: stringMetadata(metadata),
      ...(headerForwardPattern !== undefined ? { headerForwardPattern } : {}),
      signal,
      ...(sharedMemory !== undefined ? { sharedMemory } : {}),
    });
  };

  // Runs a decoded request to its response message: outputs directed to shared memory are
  // written there. The caller releases the regions once the message is sent: its tensors may
  // still view an input's region until grpc-js serializes it.
  const inferMessage = async (
    decoded: ReturnType<typeof toInferenceRequest>,
    model: ModelHandle,
    extra?: Readonly<Record<string, ParameterValue>>,
  ): Promise<ModelInferResponse> => {
    const response = await engine.infer(decoded.request, model);
    decoded.sharedMemory.writeOutputs(response.outputs);
    return toInferResponseMessage(response, extra, decoded.sharedMemory.outputs);
  };

  const modelInfer: grpc.handleUnaryCall<Raw, unknown> = unary(
    "ModelInfer",
    async (bytes, call, after) => {
      const controller = new AbortController();
      // grpc-js also reports calls 'cancelled' once they are over: only a call still running
      // is worth an error (building one captures a stack).
      let answered = false;
      call.on("cancelled", () => {
        if (!answered) controller.abort(InferenceError.cancelled(CLIENT_CANCELLED));
      });
      const decoded = decodeInfer(bytes, call.metadata, controller.signal);
      after(() => decoded.sharedMemory.release());
      const { request } = decoded;
      // The request's one lookup: the engine takes the handle as it is.
      const model = engine.model(request.modelName, request.modelVersion);
      if (model.decoupled) throw InferenceError.unsupported(DECOUPLED_MESSAGE);
      try {
        return await inferMessage(decoded, model);
      } finally {
        answered = true;
      }
    },
  );

  const modelStreamInfer = (call: grpc.ServerDuplexStream<Raw, unknown>): void => {
    const controllers = new Set<AbortController>();
    const endOnError = call.metadata.get("triton_grpc_error")[0] === "true";
    // Aborted when the call is cancelled, fails or closes: nothing waits for 'drain' then.
    const gone = new AbortController();
    let pending = 0;
    let clientDone = false;
    let closed = false;
    let drain: Promise<void> | undefined;

    const finish = (): void => {
      if (!closed && clientDone && pending === 0) {
        closed = true;
        call.end();
      }
    };
    // One wait shared by every request of the stream (one 'drain' listener, however many wait).
    const drained = (): Promise<void> =>
      drain ??= new Promise<void>((resolve) => {
        const done = (): void => {
          drain = undefined;
          call.off("drain", done);
          gone.signal.removeEventListener("abort", done);
          resolve();
        };
        call.on("drain", done);
        gone.signal.addEventListener("abort", done);
      });
    // grpc-js buffers what the client has not taken yet: once that passes the high-water mark,
    // wait for 'drain', so a slow client slows the model's generator instead of growing memory.
    const write = async (message: ModelStreamInferResponse): Promise<void> => {
      if (closed) return;
      if (!call.write(message)) await drained();
    };
    const abortAll = (): void => {
      closed = true;
      gone.abort();
      for (const controller of controllers) {
        controller.abort(InferenceError.cancelled(CLIENT_CANCELLED));
      }
    };

    const run = async (bytes: Uint8Array): Promise<void> => {
      const controller = new AbortController();
      controllers.add(controller);
      let request: InferenceRequest | undefined;
      let modelVersion = "";
      let modelName = "";
      let id = "";
      let decoded: ReturnType<typeof toInferenceRequest> | undefined;
      try {
        decoded = decodeInfer(bytes, call.metadata, controller.signal);
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
            infer_response: await inferMessage(decoded, model, {
              [FINAL_RESPONSE_PARAMETER]: true,
            }),
          });
        }
      } catch (error) {
        const inferenceError = fail(error, "ModelStreamInfer");
        if (endOnError && !closed) {
          closed = true;
          abortAll();
          call.emit("error", statusError(inferenceError));
        } else {
          await write({
            error_message: inferenceError.message,
            infer_response: {
              model_name: modelName,
              model_version: modelVersion,
              ...(id ? { id } : {}),
            },
          });
        }
      } finally {
        decoded?.sharedMemory.release();
        controllers.delete(controller);
      }
    };

    call.on("data", (bytes: Raw) => {
      pending++;
      run(bytes).finally(() => {
        pending--;
        finish();
      });
    });
    call.on("end", () => {
      // The client is done sending: answer what is in flight, then close with OK.
      clientDone = true;
      finish();
    });
    call.on("cancelled", abortAll);
    call.on("error", abortAll);
    call.on("close", () => gone.abort());
  };

  const implementation: grpc.UntypedServiceImplementation = {
    ServerLive: unary("ServerLive", () => ({ live: engine.isLive() })),
    ServerReady: unary("ServerReady", () => ({ ready: engine.isReady() })),
    ModelReady: unary("ModelReady", (bytes) => {
      const { name, version } = modelRef(bytes);
      return { ready: engine.modelReady(name, version) };
    }),
    ServerMetadata: unary("ServerMetadata", () => {
      const metadata = withSharedMemoryExtension(engine.serverMetadata(), sharedMemory);
      return { ...metadata, extensions: [...metadata.extensions] };
    }),
    ModelMetadata: unary("ModelMetadata", (bytes) => {
      const { name, version } = modelRef(bytes);
      return engine.modelMetadata(name, version);
    }),
    ModelInfer: modelInfer,
    ModelStreamInfer: modelStreamInfer,
    ModelConfig: unary("ModelConfig", (bytes) => {
      const { name, version } = modelRef(bytes);
      return { config: modelConfigToMessage(engine.modelConfig(name, version)) };
    }),
    ModelStatistics: unary("ModelStatistics", (bytes) => {
      const { name, version } = modelRef(bytes);
      return engine.modelStatistics(name || undefined, version);
    }),
    RepositoryIndex: unary("RepositoryIndex", (bytes) => {
      const request = decode(codecs.RepositoryIndexRequest, "repository index request", bytes);
      if (request.repository_name) {
        throw InferenceError.unsupported("'repository_name' specification is not supported");
      }
      const models = repository.index(request.ready ?? false);
      return { models };
    }),
    RepositoryModelLoad: unary("RepositoryModelLoad", (bytes) => repositoryRequest(bytes, "load")),
    RepositoryModelUnload: unary(
      "RepositoryModelUnload",
      (bytes) => repositoryRequest(bytes, "unload"),
    ),
    SystemSharedMemoryStatus: unary(
      "SystemSharedMemoryStatus",
      sharedMemory === undefined ? notSupported(SHM_MESSAGE) : (bytes) => {
        const request = decode(codecs.SystemSharedMemoryRequest, "shared memory request", bytes);
        const regions: Record<string, RegionStatus> = {};
        for (const region of sharedMemory.status(request.name)) regions[region.name] = region;
        return { regions };
      },
    ),
    SystemSharedMemoryRegister: unary(
      "SystemSharedMemoryRegister",
      sharedMemory === undefined ? notSupported(SHM_MESSAGE) : (bytes) => {
        const request = decode(codecs.SystemSharedMemoryRequest, "shared memory request", bytes);
        // uint64 fields decode as digit strings or numbers; the HTTP route's rule checks them.
        sharedMemory.register({
          name: request.name ?? "",
          key: request.key ?? "",
          offset: byteCount(BigInt(request.offset ?? 0), "offset", REGISTER_REQUEST),
          byteSize: byteCount(BigInt(request.byte_size ?? 0), "byte_size", REGISTER_REQUEST),
        });
        return {};
      },
    ),
    SystemSharedMemoryUnregister: unary(
      "SystemSharedMemoryUnregister",
      sharedMemory === undefined ? notSupported(SHM_MESSAGE) : (bytes) => {
        const request = decode(codecs.SystemSharedMemoryRequest, "shared memory request", bytes);
        sharedMemory.unregister(request.name);
        return {};
      },
    ),
    // Without GPUs nothing can be registered: Triton then lists no region and unregisters
    // quietly (perf_analyzer unregisters CUDA regions too when it ends).
    CudaSharedMemoryStatus: unary("CudaSharedMemoryStatus", (bytes) => {
      const request = decode(codecs.SystemSharedMemoryRequest, "shared memory request", bytes);
      if (request.name) {
        throw InferenceError.notFound(
          `Unable to find cuda shared memory region: '${request.name}'`,
        );
      }
      return {};
    }),
    CudaSharedMemoryRegister: unary("CudaSharedMemoryRegister", notSupported(CUDA_SHM_MESSAGE)),
    CudaSharedMemoryUnregister: unary("CudaSharedMemoryUnregister", (bytes) => {
      decode(codecs.SystemSharedMemoryRequest, "shared memory request", bytes);
      return {};
    }),
    TraceSetting: unary(
      "TraceSetting",
      notSupported("Trace settings are not supported by DenoTriton's gRPC front end"),
    ),
    LogSettings: unary("LogSettings", (bytes) => {
      const request = decode(codecs.LogSettings, "log settings request", bytes);
      const changes: Record<string, unknown> = {};
      for (const [name, value] of Object.entries(request.settings)) {
        const choice = value.parameter_choice;
        if (choice === undefined) {
          throw InferenceError.invalidArg(`Invalid '${name}': no value is set`);
        }
        changes[name] = value[choice];
      }
      return { settings: toSettingValues(changeLogSettings(logger, changes)) };
    }),
  };

  const empty = codecs.Empty as MessageCodec<never>;
  const responses: Record<string, MessageCodec<never>> = {
    ServerLive: codecs.ServerLiveResponse as MessageCodec<never>,
    ServerReady: codecs.ReadyResponse as MessageCodec<never>,
    ModelReady: codecs.ReadyResponse as MessageCodec<never>,
    ServerMetadata: codecs.ServerMetadataResponse as MessageCodec<never>,
    ModelMetadata: codecs.ModelMetadataResponse as MessageCodec<never>,
    ModelInfer: codecs.ModelInferResponse as MessageCodec<never>,
    ModelStreamInfer: codecs.ModelStreamInferResponse as MessageCodec<never>,
    ModelConfig: codecs.ModelConfigResponse as MessageCodec<never>,
    ModelStatistics: codecs.ModelStatisticsResponse as MessageCodec<never>,
    RepositoryIndex: codecs.RepositoryIndexResponse as MessageCodec<never>,
    LogSettings: codecs.LogSettings as MessageCodec<never>,
    SystemSharedMemoryStatus: codecs.SystemSharedMemoryStatusResponse as MessageCodec<never>,
  };
  const definition: Record<string, grpc.MethodDefinition<Raw, unknown>> = {};
  for (const name of Object.keys(implementation)) {
    definition[name] = method(
      INFERENCE_SERVICE,
      name,
      responses[name] ?? empty,
      name === "ModelStreamInfer",
    );
  }

  const health: GrpcService = {
    definition: {
      Check: method(HEALTH_SERVICE, "Check", codecs.HealthCheckResponse as MessageCodec<never>),
    },
    implementation: {
      Check: unary("Health/Check", (bytes) => {
        decode(codecs.HealthCheckRequest, "health check request", bytes);
        return { status: engine.isReady() ? "SERVING" : "NOT_SERVING" };
      }),
    },
  };

  return { inference: { definition, implementation }, health };
}

const SHM_MESSAGE =
  "System shared memory is not supported by DenoTriton: send tensors in the request";
const CUDA_SHM_MESSAGE =
  "CUDA shared memory is not supported by DenoTriton: send tensors in the request";
