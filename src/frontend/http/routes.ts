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
import { withSharedMemoryExtension } from "../shared_memory.ts";
import { handleGenerate } from "./generate.ts";
import { type RouteContext, type RouteHandler, Router } from "./router.ts";
import { addOpenAIRoutes } from "../openai/routes.ts";
import { addSharedMemoryRoutes } from "./shared_memory_routes.ts";
import { readJsonBody as readJsonBodyWithin } from "./json_body.ts";
import type { SharedMemoryRegistry } from "../../shm/registry.ts";
import { httpTraceChange, traceSettings } from "../trace_settings.ts";
import type { Tracer } from "../../telemetry/tracer.ts";
import {
  BODY_ERRORS,
  errorResponses,
  type HeaderDoc,
  jsonContent,
  type JsonSchema,
  MODEL_ERRORS,
  type ResponseDoc,
  type RouteDoc,
  schemaRef,
} from "./route_doc.ts";
import {
  BINARY_BODY,
  modelGenerateExample,
  modelGenerateRequestSchema,
  modelGenerateResponseSchema,
  modelInferExample,
  modelInferRequestSchema,
  modelInferResponseSchema,
} from "./openapi_schemas.ts";

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
  /** The server's tracer, whose settings the trace extension reads and changes. */
  readonly tracer?: Tracer;
}

/** The path template of a model's endpoints, with its optional version. */
export const MODEL_PATH = "/v2/models/{model}[/versions/{version}]";

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

function readJsonBody(
  request: Request,
  settings: RouteSettings,
): Promise<Record<string, unknown> | undefined> {
  return readJsonBodyWithin(request, settings.maxRequestBytes);
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

/** Options of {@linkcode inferReply}. */
export interface InferReplyOptions {
  /**
   * The request's `accept-encoding` header: the reply is compressed when it allows and it pays.
   *
   * @default {null}
   */
  readonly acceptEncoding?: string | null;
  /**
   * Whether the model batches (its outputs then carry the batch dimension).
   *
   * @default {false}
   */
  readonly batching?: boolean;
}

/**
 * Encodes an engine's answer to a decoded inference request and sends it: binary or JSON
 * outputs as the request asked, compressed when the client accepts it and it pays.
 *
 * @param decoded The decoded request.
 * @param result The engine's response.
 * @param options The client's accepted encodings and whether the model batches.
 * @returns The HTTP response.
 */
export async function inferReply(
  decoded: HttpInferRequest,
  result: InferenceResponse,
  options: InferReplyOptions = {},
): Promise<Response> {
  let encoded: ReturnType<typeof encodeInferResponse>;
  try {
    decoded.sharedMemory.writeOutputs(result.outputs);
    encoded = encodeInferResponse(result, {
      outputFormats: decoded.outputFormats,
      defaultBinary: decoded.defaultBinary,
      batching: options.batching ?? false,
      sharedMemoryOutputs: decoded.sharedMemory.outputs,
    });
  } finally {
    // The regions outlive the request (an unregister meanwhile unmaps them only now).
    decoded.sharedMemory.release();
  }
  const encoding = responseEncoding(options.acceptEncoding ?? null);
  // Most clients accept no compression: their reply is sent without waiting on a promise.
  const reply = encoding === undefined
    ? { body: encoded.body, encoding }
    : await compressResponseBody(encoded.body, encoding);
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
  return await inferReply(decoded, result, {
    acceptEncoding: context.request.headers.get("accept-encoding"),
    batching: model.maxBatchSize > 0,
  });
}

async function repositoryAction(
  repository: ModelRepository,
  settings: RouteSettings,
  context: RouteContext,
  action: "load" | "unload",
): Promise<Response> {
  const model = context.params["model"]!;
  const body = await readJsonBody(context.request, settings);
  if (action === "unload") {
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

async function traceSetting(
  settings: RouteSettings,
  engine: Engine,
  context: RouteContext,
): Promise<Response> {
  const model = context.params["model"];
  const change = context.request.method === "POST"
    ? httpTraceChange(await readJsonBody(context.request, settings) ?? {})
    : undefined;
  return jsonResponse(traceSettings(settings.tracer, engine, { model, change }));
}

async function logging(settings: RouteSettings, context: RouteContext): Promise<Response> {
  if (context.request.method === "POST") {
    const body = await readJsonBody(context.request, settings) ?? {};
    return jsonResponse(changeLogSettings(settings.logger, body));
  }
  return jsonResponse(tritonLogSettings(settings.logger));
}

const INFER_ERRORS = errorResponses({
  ...BODY_ERRORS,
  ...MODEL_ERRORS,
  400: "The request is not valid for the model (names, datatypes, shapes, data, parameters)",
  501: "The model is decoupled (use generate_stream or gRPC), or an unsupported Content-Encoding",
  503: "The model was unloaded or is not ready, or its queue is full or timed out",
});

const HEADER_LENGTH_DOC: HeaderDoc = {
  description:
    "Binary data extension: the JSON's length in bytes; the tensors' bytes follow it. 0: the whole body is the model's only input, as raw bytes.",
  schema: { type: "integer", minimum: 0 },
};

const BINARY_RESPONSE: ResponseDoc = {
  description: "Outputs asked for as binary data follow the JSON",
  content: {
    "application/octet-stream": {
      schema: {
        type: "string",
        format: "binary",
        description:
          "The JSON response (its length in `Inference-Header-Content-Length`), then the bytes of each output asked for as binary data, in the order of the JSON's outputs.",
      },
    },
  },
  headers: {
    [HEADER_LENGTH_HEADER]: {
      description: "With binary outputs: the JSON's length in bytes; their bytes follow it.",
      schema: { type: "integer", minimum: 0 },
    },
  },
};

function inferResponses(json: JsonSchema): Record<string, ResponseDoc> {
  return {
    200: {
      description:
        "The outputs: JSON, or with binary data (`application/octet-stream`, the JSON's length in `Inference-Header-Content-Length`) when asked for",
      content: { ...jsonContent(json), ...BINARY_RESPONSE.content },
      headers: BINARY_RESPONSE.headers!,
    },
    ...INFER_ERRORS,
  };
}

const INFER_DOC: RouteDoc = {
  operationId: "modelInfer",
  summary: "Run an inference",
  description:
    "KServe v2 inference, with Triton's binary data extension: JSON tensors, or tensors as bytes after the JSON. A model the server serves has its own path below, with its inputs and outputs.",
  headers: { [HEADER_LENGTH_HEADER]: HEADER_LENGTH_DOC },
  requestBody: {
    required: true,
    content: {
      ...jsonContent(schemaRef("InferenceRequest")),
      "application/octet-stream": { schema: BINARY_BODY },
    },
  },
  responses: inferResponses(schemaRef("InferenceResponse")),
  forModel: (model) => {
    if (model.decoupled) return undefined;
    const example = modelInferExample(model);
    return {
      requestBody: {
        required: true,
        content: {
          ...jsonContent(modelInferRequestSchema(model), example),
          "application/octet-stream": { schema: BINARY_BODY },
        },
      },
      responses: inferResponses(modelInferResponseSchema(model)),
    };
  },
};

const GENERATE_ERRORS = errorResponses({
  ...BODY_ERRORS,
  ...MODEL_ERRORS,
  400:
    "The request is not valid for the model, or (generate) the model did not answer exactly one response",
  503: "The model was unloaded or is not ready, or its queue is full or timed out",
});

const GENERATE_DOC: RouteDoc = {
  operationId: "modelGenerate",
  summary: "Generate: one JSON object in, one out (Triton's generate extension)",
  requestBody: { content: jsonContent(schemaRef("GenerateRequest")) },
  responses: {
    200: { description: "The response", content: jsonContent(schemaRef("GenerateResponse")) },
    ...GENERATE_ERRORS,
  },
  forModel: (model) => ({
    requestBody: {
      content: jsonContent(modelGenerateRequestSchema(model), modelGenerateExample(model)),
    },
    responses: {
      200: {
        description: "The response",
        content: jsonContent(modelGenerateResponseSchema(model)),
      },
    },
  }),
};

/** The Server-Sent Events of generate_stream: OpenAPI 3.1's schema of one event. */
function eventStream(response: JsonSchema): ResponseDoc {
  return {
    description:
      'Server-Sent Events: one `data: <generate response>` event per response; a failure after the first is a last `data: {"error": "..."}`',
    content: {
      "text/event-stream": {
        schema: {
          type: "object",
          required: ["data"],
          properties: {
            event: { type: "string" },
            data: {
              type: "string",
              contentMediaType: "application/json",
              contentSchema: { anyOf: [response, schemaRef("Error")] },
            },
          },
        },
      },
    },
  };
}

const GENERATE_STREAM_DOC: RouteDoc = {
  operationId: "modelGenerateStream",
  summary: "Generate, streamed: every response of the model as a Server-Sent Event",
  requestBody: { content: jsonContent(schemaRef("GenerateRequest")) },
  responses: { 200: eventStream(schemaRef("GenerateResponse")), ...GENERATE_ERRORS },
  forModel: (model) => ({
    requestBody: {
      content: jsonContent(modelGenerateRequestSchema(model), modelGenerateExample(model)),
    },
    responses: { 200: eventStream(modelGenerateResponseSchema(model)) },
  }),
};

function traceDoc(
  operationId: string,
  summary: string,
  change = false,
  forModel = false,
): RouteDoc {
  const settings = {
    description: "The settings",
    content: jsonContent(schemaRef("TraceSettings")),
  };
  const model = forModel ? MODEL_ERRORS : {};
  return change
    ? {
      operationId,
      summary,
      requestBody: { content: jsonContent(schemaRef("TraceSettingsRequest")) },
      responses: {
        200: settings,
        ...errorResponses({
          ...BODY_ERRORS,
          ...model,
          400:
            "The body is not valid, or a setting does not parse or is out of range (the message names it)",
          501:
            "The body's Content-Encoding is not gzip, deflate or identity, or the front end was given no tracer",
        }),
      },
    }
    : {
      operationId,
      summary,
      responses: { 200: settings, ...(forModel ? errorResponses(model) : {}) },
    };
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
  const repository = settings.repository ?? engineRepository(engine);
  const model = MODEL_PATH;

  router
    .add(
      "GET",
      "/v2/health/live",
      {
        group: "health",
        handler: () => Promise.resolve(empty(engine.isLive() ? 200 : 400)),
        doc: {
          operationId: "serverLive",
          summary: "Whether the server is live",
          responses: { 200: { description: "Live" }, 400: { description: "Not live" } },
        },
      },
    )
    .add(
      "GET",
      "/v2/health/ready",
      {
        group: "health",
        handler: () => Promise.resolve(empty(engine.isReady() ? 200 : 400)),
        doc: {
          operationId: "serverReady",
          summary: "Whether the server is ready",
          description: "With `strictReadiness` (the default), only when every model is ready too.",
          responses: { 200: { description: "Ready" }, 400: { description: "Not ready" } },
        },
      },
    )
    .add(
      "GET",
      "/v2",
      {
        group: "metadata",
        handler: () =>
          Promise.resolve(
            jsonResponse(withSharedMemoryExtension(engine.serverMetadata(), settings.sharedMemory)),
          ),
        doc: {
          operationId: "serverMetadata",
          summary: "The server's name, version and protocol extensions",
          responses: {
            200: { description: "The metadata", content: jsonContent(schemaRef("ServerMetadata")) },
          },
        },
      },
    )
    .add(
      "GET",
      "/v2/models/stats",
      {
        group: "statistics",
        handler: () => Promise.resolve(jsonResponse(engine.modelStatistics())),
        doc: {
          operationId: "modelsStatistics",
          summary: "Statistics of every model",
          responses: {
            200: { description: "Statistics", content: jsonContent(schemaRef("ModelStatistics")) },
          },
        },
      },
    )
    .add(
      "GET",
      model,
      {
        group: "metadata",
        handler: ({ params }) =>
          Promise.resolve(jsonResponse(engine.modelMetadata(params["model"]!, versionOf(params)))),
        doc: {
          operationId: "modelMetadata",
          summary: "A model's inputs and outputs",
          responses: {
            200: { description: "The metadata", content: jsonContent(schemaRef("ModelMetadata")) },
            ...errorResponses(MODEL_ERRORS),
          },
        },
      },
    )
    .add(
      "GET",
      `${model}/ready`,
      {
        group: "health",
        handler: ({ params }) =>
          Promise.resolve(
            engine.modelReady(params["model"]!, versionOf(params))
              ? empty(200)
              : errorResponse(400, "Model version not ready"),
          ),
        doc: {
          operationId: "modelReady",
          summary: "Whether a model is ready",
          responses: {
            200: { description: "Ready" },
            ...errorResponses({ 400: "Not ready, or unknown" }),
          },
        },
      },
    )
    .add(
      "GET",
      `${model}/config`,
      {
        group: "model-config",
        handler: ({ params }) =>
          Promise.resolve(jsonResponse(engine.modelConfig(params["model"]!, versionOf(params)))),
        doc: {
          operationId: "modelConfig",
          summary: "A model's configuration, in Triton's model-config JSON",
          responses: {
            200: {
              description: "The configuration",
              content: jsonContent(schemaRef("ModelConfig")),
            },
            ...errorResponses(MODEL_ERRORS),
          },
        },
      },
    )
    .add(
      "POST",
      `${model}/infer`,
      {
        group: "inference",
        handler: (context) => infer(engine, settings, context),
        doc: INFER_DOC,
      },
    )
    .add(
      "POST",
      `${model}/generate`,
      {
        group: "inference",
        handler: (context) => handleGenerate(engine, context, settings),
        doc: GENERATE_DOC,
      },
    )
    .add(
      "POST",
      `${model}/generate_stream`,
      {
        group: "inference",
        handler: (context) => handleGenerate(engine, context, { ...settings, streaming: true }),
        doc: GENERATE_STREAM_DOC,
      },
    )
    .add(
      "GET",
      `${model}/stats`,
      {
        group: "statistics",
        handler: ({ params }) =>
          Promise.resolve(
            jsonResponse(engine.modelStatistics(params["model"]!, versionOf(params))),
          ),
        doc: {
          operationId: "modelStatistics",
          summary: "A model's statistics",
          responses: {
            200: { description: "Statistics", content: jsonContent(schemaRef("ModelStatistics")) },
            ...errorResponses({
              ...MODEL_ERRORS,
              400: "The model or version is not available (Triton's answer for statistics)",
            }),
          },
        },
      },
    )
    .add(
      "GET",
      `${model}/trace/setting`,
      {
        group: "trace",
        handler: (context) => traceSetting(settings, engine, context),
        doc: traceDoc(
          "modelTraceSettings",
          "A model's trace settings (its own, else the global ones)",
          false,
          true,
        ),
      },
    )
    .add(
      "POST",
      `${model}/trace/setting`,
      {
        group: "trace",
        handler: (context) => traceSetting(settings, engine, context),
        doc: traceDoc("updateModelTraceSettings", "Change a model's trace settings", true, true),
      },
    )
    .add(
      "GET",
      "/v2/trace/setting",
      {
        group: "trace",
        handler: (context) => traceSetting(settings, engine, context),
        doc: traceDoc("traceSettings", "The global trace settings"),
      },
    )
    .add(
      "POST",
      "/v2/trace/setting",
      {
        group: "trace",
        handler: (context) => traceSetting(settings, engine, context),
        doc: traceDoc("updateTraceSettings", "Change the trace settings", true),
      },
    )
    .add("GET", "/v2/logging", {
      group: "logging",
      handler: (context) => logging(settings, context),
      doc: {
        operationId: "logSettings",
        summary: "The log settings",
        responses: {
          200: { description: "The settings", content: jsonContent(schemaRef("LogSettings")) },
        },
      },
    })
    .add("POST", "/v2/logging", {
      group: "logging",
      handler: (context) => logging(settings, context),
      doc: {
        operationId: "updateLogSettings",
        summary: "Change the log settings",
        requestBody: { content: jsonContent(schemaRef("LogSettingsRequest")) },
        responses: {
          200: { description: "The settings now", content: jsonContent(schemaRef("LogSettings")) },
          ...errorResponses({ ...BODY_ERRORS, 501: "The request changes `log_file`" }),
        },
      },
    });

  const index = async ({ request }: RouteContext): Promise<Response> => {
    const body = await readJsonBody(request, settings);
    const ready = body?.["ready"] ?? false;
    if (typeof ready !== "boolean") {
      throw InferenceError.invalidArg("Invalid 'ready' in the request: expected a boolean");
    }
    return jsonResponse(repository.index(ready));
  };
  const indexDoc = (operationId: string): RouteDoc => ({
    operationId,
    summary: "The models of the repository and their state",
    requestBody: { content: jsonContent(schemaRef("RepositoryIndexRequest")) },
    responses: {
      200: { description: "The models", content: jsonContent(schemaRef("RepositoryIndex")) },
      ...errorResponses(BODY_ERRORS),
    },
  });
  router.add(
    "POST",
    "/v2/repository/index",
    { group: "model-repository", handler: index, doc: indexDoc("repositoryIndex") },
  );
  for (const action of ["load", "unload"] as const) {
    router.add(
      "POST",
      `/v2/repository/models/{model}/${action}`,
      {
        group: "model-repository",
        handler: (context) => repositoryAction(repository, settings, context, action),
        doc: {
          operationId: `repositoryModel${action === "load" ? "Load" : "Unload"}`,
          summary: action === "load"
            ? "Load a bound model that was unloaded"
            : "Unload a model; it stays bound, so a load serves it again",
          requestBody: { content: jsonContent(schemaRef("RepositoryLoadRequest")) },
          responses: {
            200: { description: action === "load" ? "Loaded" : "Unloaded" },
            ...errorResponses({
              ...BODY_ERRORS,
              404: "No model of that name is bound",
              501: "A load with a new configuration or files, or an unsupported Content-Encoding",
              503: "The server is not running",
            }),
          },
        },
      },
    );
  }
  // Triton ignores a repository name on the index, and refuses it on load/unload.
  router.add(
    "POST",
    "/v2/repository/{repo}/index",
    { group: "model-repository", handler: index, doc: indexDoc("namedRepositoryIndex") },
  );
  for (const action of ["load", "unload"] as const) {
    router.add(
      "POST",
      `/v2/repository/{repo}/models/{model}/${action}`,
      {
        group: "model-repository",
        handler: () => {
          throw InferenceError.unsupported("'repository_name' specification is not supported");
        },
        doc: {
          operationId: `namedRepositoryModel${action === "load" ? "Load" : "Unload"}`,
          summary: `Not supported: ${action} in a named repository`,
          responses: errorResponses({ 501: "Always: the server has one repository" }),
        },
      },
    );
  }

  addSharedMemoryRoutes(router, settings.sharedMemory, settings.maxRequestBytes);
  // The OpenAI-compatible API (/v1/...), for the models bound with `openai`.
  addOpenAIRoutes(router, engine, settings);
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
 * @example A synchronous throw becomes a rejection
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
