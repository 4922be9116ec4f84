/**
 * The RPC tables of `inference.GRPCInferenceService` and `grpc.health.v1.Health`, as data: each
 * RPC's endpoint group, response codec and handler (`rpc.ts`), speaking only to the `Engine`
 * contract; {@linkcode createServices} binds them to a front end's engine and settings. The
 * inference RPCs live in `infer_rpcs.ts`; the others are short and live here. Triton 2.51's
 * `grpc_server.cc` is the reference for messages and statuses.
 *
 * Requests arrive undecoded and are decoded inside the handlers, so a malformed message gets a
 * clear INVALID_ARGUMENT (and, on the stream, an `error_message`).
 *
 * @module
 */

import {
  engineRepository,
  type ModelRepository,
  refuseNewConfiguration,
} from "../../engine/repository.ts";
import type { Engine } from "../../engine/engine.ts";
import type { CudaRegionStatus, RegionStatus, SharedMemoryRegistry } from "../../shm/registry.ts";
import { InferenceError } from "../../errors.ts";
import { Logger } from "../../log.ts";
import { changeLogSettings, LOG_SETTING_KINDS, type TritonLogSettings } from "../log_settings.ts";
import { traceSettings } from "../trace_settings.ts";
import type { Tracer } from "../../telemetry/tracer.ts";
import {
  codecs,
  type CudaSharedMemoryRequest,
  type LogSettingValue,
  type SystemSharedMemoryRequest,
  type TraceSettingMessage,
} from "../../protocol/grpc_codec.ts";
import { byteCount, REGISTER_REQUEST } from "../../protocol/shared_memory.ts";
import { withSharedMemoryExtension } from "../shared_memory.ts";
import { modelConfigToMessage } from "../../protocol/model_config_proto.ts";
import type { Service, UnaryCall } from "./call.ts";
import { parseModelVersion } from "./infer_messages.ts";
import { modelInfer, modelStreamInfer } from "./infer_rpcs.ts";
import { decodeRequest, duplex, type Rpc, type ServiceContext, unary } from "./rpc.ts";

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
  /**
   * The server's tracer (the engine's too): `TraceSetting` reads and changes its settings.
   *
   * @default {undefined (the defaults, unchangeable)}
   */
  tracer?: Tracer;
}

/** The inference service name, as in method paths. */
export const INFERENCE_SERVICE = "inference.GRPCInferenceService";

/** The health service name, as in method paths. */
export const HEALTH_SERVICE = "grpc.health.v1.Health";

const SHM_MESSAGE =
  "System shared memory is not supported by DenoTriton: send tensors in the request";
const CUDA_SHM_MESSAGE =
  "CUDA shared memory is not supported by DenoTriton: send tensors in the request";
/** The size of a `cudaIpcMemHandle_t`. */
const IPC_HANDLE_BYTES = 64;
const REPOSITORY_NAME_MESSAGE = "'repository_name' specification is not supported";

function modelRef(call: UnaryCall): { name: string; version: number | undefined } {
  const ref = decodeRequest(codecs.ModelRef, "model request", call.request);
  return { name: ref.name ?? "", version: parseModelVersion(ref.version) };
}

async function repositoryRequest(
  { repository }: ServiceContext,
  call: UnaryCall,
  action: "load" | "unload",
): Promise<Record<string, never>> {
  const request = decodeRequest(
    codecs.RepositoryModelRequest,
    `repository ${action} request`,
    call.request,
  );
  if (request.repository_name) throw InferenceError.unsupported(REPOSITORY_NAME_MESSAGE);
  const name = request.model_name ?? "";
  if (action === "unload") {
    await repository.unload(name);
  } else {
    refuseNewConfiguration(name, Object.keys(request.parameters ?? {}));
    await repository.load(name);
  }
  return {};
}

/** The registry, or the "not supported" answer of a server that serves no regions. */
function registryOf(
  { sharedMemory }: ServiceContext,
  message = SHM_MESSAGE,
): SharedMemoryRegistry {
  if (sharedMemory === undefined) throw InferenceError.unsupported(message);
  return sharedMemory;
}

function sharedMemoryRequest(call: UnaryCall): SystemSharedMemoryRequest {
  return decodeRequest(codecs.SystemSharedMemoryRequest, "shared memory request", call.request);
}

function cudaSharedMemoryRequest(call: UnaryCall): CudaSharedMemoryRequest {
  return decodeRequest(
    codecs.CudaSharedMemoryRequest,
    "cuda shared memory request",
    call.request,
  );
}

/**
 * Registers a CUDA region from a `CudaSharedMemoryRegisterRequest`: `raw_handle` carries the
 * handle's 64 bytes as they are (HTTP carries them in base64).
 */
function registerCuda(registry: SharedMemoryRegistry, call: UnaryCall): void {
  const request = cudaSharedMemoryRequest(call);
  const rawHandle = request.raw_handle ?? new Uint8Array(0);
  if (rawHandle.byteLength !== IPC_HANDLE_BYTES) {
    throw InferenceError.invalidArg(
      `'raw_handle' must be a cudaIpcMemHandle_t (${IPC_HANDLE_BYTES} bytes), got ${rawHandle.byteLength} bytes`,
    );
  }
  registry.registerCuda({
    name: request.name ?? "",
    rawHandle,
    deviceId: byteCount(BigInt(request.device_id ?? 0), "device_id", REGISTER_REQUEST),
    byteSize: byteCount(BigInt(request.byte_size ?? 0), "byte_size", REGISTER_REQUEST),
  });
}

// Each setting travels in the SettingValue field of its type.
function toSettingValues(settings: TritonLogSettings): Record<string, LogSettingValue> {
  const values: Record<string, LogSettingValue> = {};
  for (const [name, kind] of Object.entries(LOG_SETTING_KINDS)) {
    values[name] = { [`${kind}_param`]: settings[name as keyof TritonLogSettings] };
  }
  return values;
}

function logSettings({ logger }: ServiceContext, call: UnaryCall): {
  settings: Record<string, LogSettingValue>;
} {
  const request = decodeRequest(codecs.LogSettings, "log settings request", call.request);
  const changes: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(request.settings)) {
    const choice = value.parameter_choice;
    if (choice === undefined) {
      throw InferenceError.invalidArg(`Invalid '${name}': no value is set`);
    }
    changes[name] = value[choice];
  }
  return { settings: toSettingValues(changeLogSettings(logger, changes)) };
}

// An empty value list clears a setting, as `null` does over HTTP.
function traceSetting({ engine, tracer }: ServiceContext, call: UnaryCall): TraceSettingMessage {
  const request = decodeRequest(codecs.TraceSetting, "trace setting request", call.request);
  const entries = Object.entries(request.settings ?? {});
  const change = entries.length === 0 ? undefined : Object.fromEntries(
    entries.map(([name, value]) => [name, (value.value ?? []).length === 0 ? null : value.value!]),
  );
  const model = request.model_name ? request.model_name : undefined;
  const settings = traceSettings(tracer, engine, { model, change });
  return {
    settings: Object.fromEntries(
      Object.entries(settings).map(([name, value]) => [
        name,
        { value: Array.isArray(value) ? value : [value] },
      ]),
    ),
  };
}

/** The RPCs of `inference.GRPCInferenceService`, by name. */
export const INFERENCE_RPCS: Readonly<Record<string, Rpc>> = Object.freeze({
  ServerLive: unary("health", codecs.ServerLiveResponse, ({ engine }) => ({
    live: engine.isLive(),
  })),
  ServerReady: unary("health", codecs.ReadyResponse, ({ engine }) => ({
    ready: engine.isReady(),
  })),
  ModelReady: unary("health", codecs.ReadyResponse, ({ engine }, call) => {
    const { name, version } = modelRef(call);
    return { ready: engine.modelReady(name, version) };
  }),
  ServerMetadata: unary("metadata", codecs.ServerMetadataResponse, (context) => {
    const metadata = withSharedMemoryExtension(
      context.engine.serverMetadata(),
      context.sharedMemory,
    );
    return { ...metadata, extensions: [...metadata.extensions] };
  }),
  ModelMetadata: unary("metadata", codecs.ModelMetadataResponse, ({ engine }, call) => {
    const { name, version } = modelRef(call);
    return engine.modelMetadata(name, version);
  }),
  ModelInfer: unary("inference", codecs.ModelInferResponse, modelInfer),
  ModelStreamInfer: duplex("inference", codecs.ModelStreamInferResponse, modelStreamInfer),
  ModelConfig: unary("model-config", codecs.ModelConfigResponse, ({ engine }, call) => {
    const { name, version } = modelRef(call);
    return { config: modelConfigToMessage(engine.modelConfig(name, version)) };
  }),
  ModelStatistics: unary("statistics", codecs.ModelStatisticsResponse, ({ engine }, call) => {
    const { name, version } = modelRef(call);
    const { model_stats } = engine.modelStatistics(name || undefined, version);
    // Each version's statistics, as the plain object tree the codec encodes.
    return { model_stats: model_stats.map((stats) => ({ ...stats })) };
  }),
  RepositoryIndex: unary("model-repository", codecs.RepositoryIndexResponse, (context, call) => {
    const request = decodeRequest(
      codecs.RepositoryIndexRequest,
      "repository index request",
      call.request,
    );
    if (request.repository_name) throw InferenceError.unsupported(REPOSITORY_NAME_MESSAGE);
    return { models: context.repository.index(request.ready ?? false) };
  }),
  RepositoryModelLoad: unary(
    "model-repository",
    codecs.Empty,
    (context, call) => repositoryRequest(context, call, "load"),
  ),
  RepositoryModelUnload: unary(
    "model-repository",
    codecs.Empty,
    (context, call) => repositoryRequest(context, call, "unload"),
  ),
  SystemSharedMemoryStatus: unary(
    "shared-memory",
    codecs.SystemSharedMemoryStatusResponse,
    (context, call) => {
      const registry = registryOf(context);
      const request = sharedMemoryRequest(call);
      const regions: Record<string, RegionStatus> = {};
      for (const region of registry.status(request.name)) regions[region.name] = region;
      return { regions };
    },
  ),
  SystemSharedMemoryRegister: unary("shared-memory", codecs.Empty, (context, call) => {
    const registry = registryOf(context);
    const request = sharedMemoryRequest(call);
    // uint64 fields decode as digit strings or numbers; the HTTP route's rule checks them.
    registry.register({
      name: request.name ?? "",
      key: request.key ?? "",
      offset: byteCount(BigInt(request.offset ?? 0), "offset", REGISTER_REQUEST),
      byteSize: byteCount(BigInt(request.byte_size ?? 0), "byte_size", REGISTER_REQUEST),
    });
    return {};
  }),
  SystemSharedMemoryUnregister: unary("shared-memory", codecs.Empty, (context, call) => {
    const registry = registryOf(context);
    registry.unregister(sharedMemoryRequest(call).name);
    return {};
  }),
  // A front end without a registry registers nothing: it lists no region and unregisters
  // quietly, as Triton does without GPUs (perf_analyzer unregisters CUDA regions when it ends).
  CudaSharedMemoryStatus: unary(
    "shared-memory",
    codecs.CudaSharedMemoryStatusResponse,
    ({ sharedMemory }, call) => {
      const { name } = cudaSharedMemoryRequest(call);
      let listed: CudaRegionStatus[];
      if (sharedMemory !== undefined) listed = sharedMemory.cudaStatus(name);
      else if (name) {
        throw InferenceError.notFound(`Unable to find cuda shared memory region: '${name}'`);
      } else listed = [];
      const regions: Record<string, CudaRegionStatus> = {};
      for (const region of listed) regions[region.name] = region;
      return { regions };
    },
  ),
  CudaSharedMemoryRegister: unary("shared-memory", codecs.Empty, (context, call) => {
    registerCuda(registryOf(context, CUDA_SHM_MESSAGE), call);
    return {};
  }),
  CudaSharedMemoryUnregister: unary("shared-memory", codecs.Empty, ({ sharedMemory }, call) => {
    const { name } = cudaSharedMemoryRequest(call);
    sharedMemory?.unregisterCuda(name);
    return {};
  }),
  TraceSetting: unary("trace", codecs.TraceSetting, traceSetting),
  LogSettings: unary("logging", codecs.LogSettings, logSettings),
});

/** The RPCs of `grpc.health.v1.Health`, by name. */
export const HEALTH_RPCS: Readonly<Record<string, Rpc>> = Object.freeze({
  Check: unary("health", codecs.HealthCheckResponse, ({ engine }, call) => {
    decodeRequest(codecs.HealthCheckRequest, "health check request", call.request);
    return { status: engine.isReady() ? "SERVING" : "NOT_SERVING" };
  }),
});

function bindAll(
  name: string,
  rpcs: Readonly<Record<string, Rpc>>,
  context: ServiceContext,
  logPrefix = "",
): Service {
  const methods: Service["methods"] = Object.fromEntries(
    Object.entries(rpcs).map(([rpc, { bind }]) => [rpc, bind(context, `${logPrefix}${rpc}`)]),
  );
  return { name, methods };
}

/**
 * Builds the inference and health services over an engine.
 *
 * @param engine The engine serving the models.
 * @param options Header forwarding, logging, the repository and shared memory.
 * @returns The inference service and the health service.
 *
 * @example Method names and kinds
 * ```ts
 * import { createServices } from "./service.ts";
 * import type { Engine } from "../../engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const { inference, health } = createServices({} as Engine);
 * assert.equal(inference.name, "inference.GRPCInferenceService");
 * assert.equal(inference.methods.ModelInfer?.kind, "unary");
 * assert.equal(inference.methods.ModelStreamInfer?.kind, "duplex");
 * assert.equal(health.methods.Check?.group, "health");
 * ```
 */
export function createServices(
  engine: Engine,
  options: GrpcServiceOptions = {},
): { inference: Service; health: Service } {
  const context: ServiceContext = {
    engine,
    logger: options.logger ?? new Logger(),
    repository: options.repository ?? engineRepository(engine),
    sharedMemory: options.sharedMemory,
    headerForwardPattern: options.headerForwardPattern,
    tracer: options.tracer,
  };
  return {
    inference: bindAll(INFERENCE_SERVICE, INFERENCE_RPCS, context),
    health: bindAll(HEALTH_SERVICE, HEALTH_RPCS, context, "Health/"),
  };
}
