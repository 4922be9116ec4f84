/**
 * The KServe v2 route table of the HTTP front end and the handler of each route, speaking only
 * to the `Engine` contract. Triton 2.51's `http_server.cc` is the reference for paths, bodies
 * and statuses.
 *
 * Over 500 lines for a reason: the route table is data, and each of its routes' handlers is
 * short; keeping them together keeps the table readable against `http_server.cc`.
 *
 * @module
 */

import type { Engine, InferenceResponse, ModelHandle } from "../../engine/engine.ts";
import {
  engineRepository,
  type ModelRepository,
  refuseNewConfiguration,
} from "../../engine/repository.ts";
import { InferenceError } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { changeLogSettings, tritonLogSettings } from "../log_settings.ts";
import {
  bytesResponse,
  compressResponseBody,
  readRequestBody,
  responseEncoding,
} from "./compression.ts";
import { errorResponse, jsonResponse } from "./errors.ts";
import {
  type DecodeInferOptions,
  decodeInferRequest,
  decodeRawInferRequest,
  type HttpInferRequest,
} from "./infer_request.ts";
import { HEADER_LENGTH_HEADER, parseHeaderLength } from "../../protocol/binary_data.ts";
import { encodeInferResponse } from "./infer_response.ts";
import { parseJsonBytes } from "../../protocol/json_tensor.ts";
import { byteCount, REGISTER_REQUEST } from "../../protocol/shared_memory.ts";
import { withSharedMemoryExtension } from "../shared_memory.ts";
import { handleGenerate } from "./generate.ts";
import { Router } from "./router.ts";
import { addOpenAIRoutes } from "../openai/routes.ts";
import type { SharedMemoryRegistry } from "../../shm/registry.ts";

/** What a route handler receives. */
export interface RouteContext {
  /** The request. */
  readonly request: Request;
  /** Decoded path parameters (`model`, `version`, `repo`, `region`, ...). */
  readonly params: Readonly<Record<string, string>>;
  /** Aborted when the client disconnects before the response is ready. */
  readonly signal: AbortSignal;
}

/** A route handler. */
export type RouteHandler = (context: RouteContext) => Promise<Response>;

/** Settings the handlers need. */
export interface RouteSettings {
  /** Body limit in bytes (after decompression too). */
  readonly maxRequestBytes: number;
  /** Headers to forward as parameters, or `undefined`. */
  readonly headerForwardPattern: RegExp | undefined;
  /** The logger, whose settings `/v2/logging` reads and changes. */
  readonly logger: Logger;
  /** The repository extension's models; the engine's when undefined. */
  readonly repository?: ModelRepository;
  /** The server's system shared-memory regions; `undefined` answers "not supported". */
  readonly sharedMemory?: SharedMemoryRegistry;
}

/** The path of a model's endpoints, with its optional version (named groups `model`, `version`). */
export const MODEL_PATH = String.raw`/v2/models/(?<model>[^/]+)(?:/versions/(?<version>[0-9]+))?`;
const REPO_ACTION = String.raw`(?<action>load|unload)`;

function empty(status: number): Response {
  return new Response(null, { status });
}

/**
 * The model version a route's path names.
 *
 * @param params The path parameters.
 * @returns The version, or `undefined` when the path names none.
 */
export function versionOf(params: Readonly<Record<string, string>>): number | undefined {
  return params["version"] === undefined ? undefined : Number(params["version"]);
}

async function readJsonBody(
  request: Request,
  settings: RouteSettings,
): Promise<Record<string, unknown> | undefined> {
  const body = await readRequestBody(request, settings.maxRequestBytes);
  if (body.byteLength === 0) return undefined;
  let parsed: unknown;
  try {
    parsed = parseJsonBytes(body);
  } catch (error) {
    throw InferenceError.invalidArg(
      `Unable to parse the request JSON: ${(error as Error).message}`,
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw InferenceError.invalidArg("Unable to parse the request JSON: expected an object");
  }
  return parsed as Record<string, unknown>;
}

/**
 * The model an HTTP inference request names, refusing decoupled ones (HTTP answers once).
 *
 * @param engine The engine.
 * @param modelName The model name from the URL.
 * @param modelVersion The version from the URL.
 * @returns The handle: the request's one lookup (decoding reads it, the engine takes it as is).
 * @throws {InferenceError} When the model is unknown or decoupled.
 */
export function inferModel(
  engine: Engine,
  modelName: string,
  modelVersion: number | undefined,
): ModelHandle {
  const model = engine.model(modelName, modelVersion);
  if (model.decoupled) {
    throw InferenceError.unsupported(
      "HTTP end point doesn't support models with decoupled transaction policy",
    );
  }
  return model;
}

/** An inference request's body as read, with where its JSON ends. */
export interface InferBody {
  /** The body, decompressed; binary tensors after the JSON start on an 8-byte boundary. */
  readonly body: Uint8Array;
  /** The JSON's length (`inference-header-content-length`); 0 for a raw binary request. */
  readonly headerLength: number | undefined;
}

/**
 * Reads an inference request's body.
 *
 * @param request The HTTP request.
 * @param maxRequestBytes The body limit.
 * @returns The body and its JSON length.
 * @throws {InferenceError} When the body is too large, badly encoded or its header length wrong.
 */
export async function readInferBody(request: Request, maxRequestBytes: number): Promise<InferBody> {
  const headerLengthField = request.headers.get(HEADER_LENGTH_HEADER);
  // Binary tensors start after the JSON (the whole body of a raw request): placed on an 8-byte
  // boundary, they are viewed in place instead of copied.
  const alignAt = /^\s*\d{1,15}\s*$/.test(headerLengthField ?? "")
    ? Number(headerLengthField)
    : undefined;
  const body = await readRequestBody(
    request,
    maxRequestBytes,
    alignAt === undefined ? {} : { alignAt },
  );
  return { body, headerLength: parseHeaderLength(headerLengthField, body.byteLength) };
}

/**
 * What decoding an inference body needs beside the body: the URL's model and version, header
 * forwarding, the disconnect signal and the shared-memory regions.
 *
 * @param settings The route settings.
 * @param context The route context.
 * @returns The decode options.
 */
export function inferDecodeOptions(
  settings: Pick<RouteSettings, "headerForwardPattern" | "sharedMemory">,
  { request, params, signal }: RouteContext,
): DecodeInferOptions {
  const modelVersion = versionOf(params);
  return {
    modelName: params["model"]!,
    ...(modelVersion !== undefined ? { modelVersion } : {}),
    headers: request.headers,
    ...(settings.headerForwardPattern !== undefined
      ? { headerForwardPattern: settings.headerForwardPattern }
      : {}),
    signal,
    ...(settings.sharedMemory !== undefined ? { sharedMemory: settings.sharedMemory } : {}),
  };
}

/**
 * Encodes an engine's answer to a decoded inference request and sends it: binary or JSON
 * outputs as the request asked, compressed when the client accepts it and it pays.
 *
 * @param request The HTTP request (its `accept-encoding`).
 * @param decoded The decoded request.
 * @param result The engine's response.
 * @param batching Whether the model batches (its outputs then carry the batch dimension).
 * @returns The HTTP response.
 */
export async function inferReply(
  request: Request,
  decoded: HttpInferRequest,
  result: InferenceResponse,
  batching: boolean,
): Promise<Response> {
  let encoded: ReturnType<typeof encodeInferResponse>;
  try {
    decoded.sharedMemory.writeOutputs(result.outputs);
    encoded = encodeInferResponse(result, {
      outputFormats: decoded.outputFormats,
      defaultBinary: decoded.defaultBinary,
      batching,
      sharedMemoryOutputs: decoded.sharedMemory.outputs,
    });
  } finally {
    // The regions outlive the request (an unregister meanwhile unmaps them only now).
    decoded.sharedMemory.release();
  }
  const reply = await compressResponseBody(
    encoded.body,
    responseEncoding(request.headers.get("accept-encoding")),
  );
  return bytesResponse(
    reply.body,
    reply.encoding === undefined
      ? encoded.headers
      : { ...encoded.headers, "content-encoding": reply.encoding },
  );
}

async function infer(
  engine: Engine,
  settings: RouteSettings,
  context: RouteContext,
): Promise<Response> {
  const model = inferModel(engine, context.params["model"]!, versionOf(context.params));
  const { body, headerLength } = await readInferBody(context.request, settings.maxRequestBytes);
  const options = inferDecodeOptions(settings, context);
  const decoded: HttpInferRequest = headerLength === 0
    ? decodeRawInferRequest(body, model, options)
    : decodeInferRequest(body, headerLength, options);
  let result: InferenceResponse;
  try {
    result = await engine.infer(decoded.request, model);
  } catch (error) {
    decoded.sharedMemory.release();
    throw error;
  }
  return await inferReply(context.request, decoded, result, model.maxBatchSize > 0);
}

async function repositoryAction(
  repository: ModelRepository,
  settings: RouteSettings,
  context: RouteContext,
): Promise<Response> {
  const model = context.params["model"]!;
  const body = await readJsonBody(context.request, settings);
  if (context.params["action"] === "unload") {
    await repository.unload(model);
    return empty(200);
  }
  const parameters = body?.["parameters"];
  refuseNewConfiguration(
    model,
    typeof parameters === "object" && parameters !== null ? Object.keys(parameters) : [],
  );
  await repository.load(model);
  return empty(200);
}

function traceSettings(): Record<string, unknown> {
  return {
    trace_level: ["OFF"],
    trace_rate: "1000",
    trace_count: "-1",
    log_frequency: "0",
    trace_file: "",
    trace_mode: "triton",
  };
}

async function traceSetting(settings: RouteSettings, context: RouteContext): Promise<Response> {
  if (context.request.method === "POST") {
    const body = await readJsonBody(context.request, settings) ?? {};
    const level = body["trace_level"];
    const off = level === undefined || level === null ||
      (Array.isArray(level) && level.every((entry) => entry === "OFF"));
    const others = Object.keys(body).filter((key) => key !== "trace_level");
    if (!off || others.some((key) => body[key] !== null)) {
      throw InferenceError.unsupported(
        "Tracing is not supported by this server: trace level stays OFF",
      );
    }
  }
  return jsonResponse(traceSettings());
}

async function logging(settings: RouteSettings, context: RouteContext): Promise<Response> {
  if (context.request.method === "POST") {
    const body = await readJsonBody(context.request, settings) ?? {};
    return jsonResponse(changeLogSettings(settings.logger, body));
  }
  return jsonResponse(tritonLogSettings(settings.logger));
}

function sharedMemoryUnsupported(kind: string): never {
  throw InferenceError.unsupported(
    `${kind} shared memory is not supported by this server: send tensors in the request body`,
  );
}

function nonNegative(body: Record<string, unknown>, key: string): number | undefined {
  const value = body[key];
  return value === undefined ? undefined : byteCount(value, key, REGISTER_REQUEST);
}

async function registerSystemRegion(
  registry: SharedMemoryRegistry,
  settings: RouteSettings,
  { request, params }: RouteContext,
): Promise<Response> {
  const body = await readJsonBody(request, settings) ?? {};
  if (body["key"] === undefined) {
    throw InferenceError.invalidArg("Shared memory register request has no 'key' field");
  }
  if (typeof body["key"] !== "string") {
    throw InferenceError.invalidArg(
      "Unable to parse 'key' of the shared memory register request: expected a string",
    );
  }
  const byteSize = nonNegative(body, "byte_size");
  if (byteSize === undefined) {
    throw InferenceError.invalidArg("Shared memory register request has no 'byte_size' field");
  }
  registry.register({
    name: params["region"]!,
    key: body["key"],
    offset: nonNegative(body, "offset") ?? 0,
    byteSize,
  });
  return empty(200);
}

/**
 * Builds the route table of the KServe v2 HTTP API over an engine.
 *
 * @param engine The engine.
 * @param settings Body limit, header forwarding and logger.
 * @returns The router.
 *
 * @example Every route has an endpoint group
 * ```ts
 * import { buildRoutes } from "./routes.ts";
 * import { Logger } from "../../log.ts";
 * import type { Engine, InferenceResponse, ModelHandle } from "../../engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const router = buildRoutes({} as Engine, {
 *   maxRequestBytes: 1024, headerForwardPattern: undefined, logger: new Logger(),
 * });
 * const found = router.match("POST", "/v2/models/m/versions/2/infer");
 * assert.equal(found.kind, "found");
 * if (found.kind === "found") {
 *   assert.equal(found.route.group, "inference");
 *   assert.deepEqual(found.params, { model: "m", version: "2" });
 * }
 * ```
 */
export function buildRoutes(engine: Engine, settings: RouteSettings): Router<RouteHandler> {
  const router = new Router<RouteHandler>();
  const route = (path: string): RegExp => new RegExp(`^${path}$`);
  const repository = settings.repository ?? engineRepository(engine);

  router
    .add(
      "GET",
      route("/v2/health/live"),
      "health",
      () => Promise.resolve(empty(engine.isLive() ? 200 : 400)),
    )
    .add(
      "GET",
      route("/v2/health/ready"),
      "health",
      () => Promise.resolve(empty(engine.isReady() ? 200 : 400)),
    )
    .add(
      "GET",
      route("/v2"),
      "metadata",
      () =>
        Promise.resolve(
          jsonResponse(withSharedMemoryExtension(engine.serverMetadata(), settings.sharedMemory)),
        ),
    )
    .add(
      "GET",
      route("/v2/models/stats"),
      "statistics",
      () => Promise.resolve(jsonResponse(engine.modelStatistics())),
    )
    .add(
      "GET",
      route(MODEL_PATH),
      "metadata",
      ({ params }) =>
        Promise.resolve(jsonResponse(engine.modelMetadata(params["model"]!, versionOf(params)))),
    )
    .add(
      "GET",
      route(`${MODEL_PATH}/ready`),
      "health",
      ({ params }) =>
        Promise.resolve(
          engine.modelReady(params["model"]!, versionOf(params))
            ? empty(200)
            : errorResponse(400, "Model version not ready"),
        ),
    )
    .add(
      "GET",
      route(`${MODEL_PATH}/config`),
      "model-config",
      ({ params }) =>
        Promise.resolve(jsonResponse(engine.modelConfig(params["model"]!, versionOf(params)))),
    )
    .add(
      "POST",
      route(`${MODEL_PATH}/infer`),
      "inference",
      (context) => infer(engine, settings, context),
    )
    .add(
      "POST",
      route(`${MODEL_PATH}/generate`),
      "inference",
      (context) => handleGenerate(engine, settings, context, false),
    )
    .add(
      "POST",
      route(`${MODEL_PATH}/generate_stream`),
      "inference",
      (context) => handleGenerate(engine, settings, context, true),
    )
    .add(
      "GET",
      route(`${MODEL_PATH}/stats`),
      "statistics",
      ({ params }) =>
        Promise.resolve(jsonResponse(engine.modelStatistics(params["model"]!, versionOf(params)))),
    )
    .add(
      "GET",
      route(`${MODEL_PATH}/trace/setting`),
      "trace",
      (context) => traceSetting(settings, context),
    )
    .add(
      "POST",
      route(`${MODEL_PATH}/trace/setting`),
      "trace",
      (context) => traceSetting(settings, context),
    )
    .add("GET", route("/v2/trace/setting"), "trace", (context) => traceSetting(settings, context))
    .add("POST", route("/v2/trace/setting"), "trace", (context) => traceSetting(settings, context))
    .add("GET", route("/v2/logging"), "logging", (context) => logging(settings, context))
    .add(
      "POST",
      route("/v2/logging"),
      "logging",
      (context) => logging(settings, context),
    );

  const index = async ({ request }: RouteContext): Promise<Response> => {
    const body = await readJsonBody(request, settings);
    const ready = body?.["ready"] ?? false;
    if (typeof ready !== "boolean") {
      throw InferenceError.invalidArg("Invalid 'ready' in the request: expected a boolean");
    }
    return jsonResponse(repository.index(ready));
  };
  router
    .add("POST", route("/v2/repository/index"), "model-repository", index)
    .add(
      "POST",
      route(`/v2/repository/models/(?<model>[^/]+)/${REPO_ACTION}`),
      "model-repository",
      (context) => repositoryAction(repository, settings, context),
    )
    // Triton ignores a repository name on the index, and refuses it on load/unload.
    .add("POST", route("/v2/repository/(?<repo>[^/]+)/index"), "model-repository", index)
    .add(
      "POST",
      route(`/v2/repository/(?<repo>[^/]+)/models/(?<model>[^/]+)/${REPO_ACTION}`),
      "model-repository",
      () => {
        throw InferenceError.unsupported(
          "'repository_name' specification is not supported",
        );
      },
    );

  const registry = settings.sharedMemory;
  if (registry !== undefined) {
    router
      .add(
        "GET",
        route("/v2/systemsharedmemory/status"),
        "shared-memory",
        () => Promise.resolve(jsonResponse(registry.status())),
      )
      .add(
        "GET",
        route("/v2/systemsharedmemory/region/(?<region>[^/]+)/status"),
        "shared-memory",
        ({ params }) => Promise.resolve(jsonResponse(registry.status(params["region"]!))),
      )
      .add(
        "POST",
        route("/v2/systemsharedmemory/region/(?<region>[^/]+)/register"),
        "shared-memory",
        (context) => registerSystemRegion(registry, settings, context),
      )
      .add("POST", route("/v2/systemsharedmemory/unregister"), "shared-memory", () => {
        registry.unregister();
        return Promise.resolve(empty(200));
      })
      .add(
        "POST",
        route("/v2/systemsharedmemory/region/(?<region>[^/]+)/unregister"),
        "shared-memory",
        ({ params }) => {
          registry.unregister(params["region"]!);
          return Promise.resolve(empty(200));
        },
      );
  }
  // The OpenAI-compatible API (/v1/...), for the models bound with `openai`.
  addOpenAIRoutes(router, engine, settings);
  const unsupported = registry === undefined
    ? [["systemsharedmemory", "System"], ["cudasharedmemory", "CUDA"]]
    : [["cudasharedmemory", "CUDA"]];
  for (const [prefix, kind] of unsupported) {
    router
      .add(
        "GET",
        route(`/v2/${prefix}/status`),
        "shared-memory",
        () => Promise.resolve(jsonResponse([])),
      )
      .add(
        "GET",
        route(`/v2/${prefix}/region/(?<region>[^/]+)/status`),
        "shared-memory",
        ({ params }) => {
          throw InferenceError.notFound(
            `Unable to find ${kind!.toLowerCase()} shared memory region: '${params["region"]}'`,
          );
        },
      )
      .add(
        "POST",
        route(`/v2/${prefix}/region/(?<region>[^/]+)/register`),
        "shared-memory",
        () => sharedMemoryUnsupported(kind!),
      )
      // Nothing can be registered, so unregistering always succeeds.
      .add(
        "POST",
        route(`/v2/${prefix}/unregister`),
        "shared-memory",
        () => Promise.resolve(empty(200)),
      )
      .add(
        "POST",
        route(`/v2/${prefix}/region/(?<region>[^/]+)/unregister`),
        "shared-memory",
        () => Promise.resolve(empty(200)),
      );
  }
  return router;
}

/**
 * Wraps a synchronous throw of a handler into a rejected promise (handlers that throw before
 * their first `await`).
 *
 * @param handler A route handler.
 * @param context Its context.
 * @returns The handler's response promise.
 *
 * @example
 * ```ts
 * import { runHandler } from "./routes.ts";
 * import assert from "node:assert/strict";
 *
 * await assert.rejects(runHandler(() => { throw new Error("x"); }, {
 *   request: new Request("http://x/"), params: {}, signal: new AbortController().signal,
 * }), /x/);
 * ```
 */
export function runHandler(handler: RouteHandler, context: RouteContext): Promise<Response> {
  try {
    return handler(context);
  } catch (error) {
    return Promise.reject(error);
  }
}
