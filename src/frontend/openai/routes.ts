/**
 * The OpenAI-compatible routes of the HTTP front end, as data ({@linkcode OPENAI_ROUTES}: method,
 * path template, handler, and the description the OpenAPI document holds, `route_docs.ts`),
 * plugged into the front end's router by {@linkcode addOpenAIRoutes}.
 * Every route speaks only to the `Engine` contract: one lookup of the model a request names
 * (which must be bound with `openai` for that endpoint), then `inferStream` or `infer`, so the
 * model's batching, queue policy, priorities, statistics and metrics apply as to a KServe request.
 * Each route answers its failures with OpenAI's error body (`errors.ts`).
 *
 * @module
 */

import type { Engine, InferenceRequest, ModelHandle } from "../../engine/engine.ts";
import { InferenceError, toInferenceError } from "../../errors.ts";
import { sseEvent } from "../../protocol/generate.ts";
import {
  type ChatMessage,
  type GenerateOptions,
  generateParameters,
  textElement,
} from "../../protocol/openai.ts";
import { ndarray } from "../../tensor/ndarray.ts";
import { readRequestBody } from "../http/compression.ts";
import type { RouteDoc } from "../http/route_doc.ts";
import type { RouteContext, RouteHandler, Router } from "../http/router.ts";
import { openAIErrorOf, openAIErrorResponse } from "./errors.ts";
import { generation, type GenerationEvent } from "./generation.ts";
import {
  CHAT_DOC,
  COMPLETIONS_DOC,
  EMBEDDINGS_DOC,
  LIST_MODELS_DOC,
  RETRIEVE_MODEL_DOC,
} from "./route_docs.ts";
import {
  type AnswerHead,
  answerHead,
  chatChunk,
  chatCompletion,
  chatRequestOf,
  completionRequestOf,
  type Delivery,
  DONE_EVENT,
  embeddingList,
  embeddingRequestOf,
  type ModelEntry,
  modelList,
  modelObject,
  OpenAIError,
  parseBody,
  textCompletion,
} from "./wire.ts";
import type { OpenAIEndpoint } from "../../config/model_info.ts";
import { hostTensors } from "../../tensor/device_tensor.ts";

/** What the OpenAI routes need beside the engine. */
export interface OpenAIRouteSettings {
  /** Body limit in bytes (after decompression too). */
  readonly maxRequestBytes: number;
}

/** A route handler of the OpenAI API. */
export type OpenAIHandler = (
  engine: Engine,
  settings: OpenAIRouteSettings,
  context: RouteContext,
) => Promise<Response>;

/** One route of the OpenAI API. */
export interface OpenAIRoute {
  /** The method. */
  readonly method: "GET" | "POST";
  /** The path template (`/v1/models/{model}`, `http/path_template.ts`). */
  readonly path: string;
  /** What answers it. */
  readonly handler: OpenAIHandler;
  /** Its description in the OpenAPI document. */
  readonly doc: RouteDoc;
}

const decoder = new TextDecoder();

async function readBody(
  context: RouteContext,
  settings: OpenAIRouteSettings,
): Promise<Record<string, unknown>> {
  const body = await readRequestBody(context.request, settings.maxRequestBytes);
  return parseBody(decoder.decode(body));
}

function json(body: unknown): Response {
  return new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });
}

/**
 * The model a request names, for an endpoint: the request's one lookup.
 *
 * @param engine The engine.
 * @param name The `model` field.
 * @param endpoint The endpoint asked.
 * @returns The model's handle.
 * @throws {OpenAIError} 404 `model_not_found` when no model of that name serves the endpoint.
 */
export function openAIModel(engine: Engine, name: string, endpoint: OpenAIEndpoint): ModelHandle {
  let model: ModelHandle;
  try {
    model = engine.model(name);
  } catch (error) {
    if (!(error instanceof InferenceError && error.code === "NOT_FOUND")) throw error;
    throw new OpenAIError(404, `The model '${name}' does not exist`, {
      param: "model",
      code: "model_not_found",
      cause: error,
    });
  }
  if (!model.openai?.endpoints.includes(endpoint)) {
    const serves = model.openai?.endpoints.join(", ");
    throw new OpenAIError(
      404,
      `The model '${name}' is not served on the ${endpoint} endpoint${
        serves === undefined ? " (it is not bound with openai)" : ` (it serves: ${serves})`
      }`,
      { param: "model", code: "model_not_found" },
    );
  }
  return model;
}

function modelEntries(engine: Engine): ModelEntry[] {
  const names = new Set(
    engine.repositoryIndex(true).filter((entry) => entry.state === "READY").map((entry) =>
      entry.name
    ),
  );
  const entries: ModelEntry[] = [];
  for (const name of [...names].sort()) {
    let openai: ModelHandle["openai"];
    try {
      openai = engine.model(name).openai;
    } catch {
      continue; // unloaded meanwhile
    }
    if (openai !== undefined) {
      entries.push({ id: name, created: openai.created, ownedBy: openai.ownedBy });
    }
  }
  return entries;
}

function listModels(engine: Engine): Promise<Response> {
  return Promise.resolve(json(modelList(modelEntries(engine))));
}

function retrieveModel(
  engine: Engine,
  _: OpenAIRouteSettings,
  { params }: RouteContext,
): Promise<Response> {
  const entry = modelEntries(engine).find((model) => model.id === params["model"]);
  if (entry === undefined) {
    throw new OpenAIError(404, `The model '${params["model"]}' does not exist`, {
      param: "model",
      code: "model_not_found",
    });
  }
  return Promise.resolve(json(modelObject(entry)));
}

async function chat(
  engine: Engine,
  settings: OpenAIRouteSettings,
  context: RouteContext,
): Promise<Response> {
  const request = chatRequestOf(await readBody(context, settings));
  const model = openAIModel(engine, request.model, "chat");
  return await answerGeneration(engine, model, { messages: request.messages }, request, context, {
    head: answerHead("chatcmpl", request.model),
    kind: "chat",
  });
}

async function completions(
  engine: Engine,
  settings: OpenAIRouteSettings,
  context: RouteContext,
): Promise<Response> {
  const request = completionRequestOf(await readBody(context, settings));
  const model = openAIModel(engine, request.model, "completions");
  return await answerGeneration(engine, model, { prompt: request.prompt }, request, context, {
    head: answerHead("cmpl", request.model),
    kind: "completions",
  });
}

interface Answer {
  readonly head: AnswerHead;
  readonly kind: "chat" | "completions";
}

/**
 * The Server-Sent Events of one generation event, as OpenAI streams them.
 *
 * @param answer The answer's head and kind.
 * @param event The event.
 * @param delivery Whether usage is streamed.
 * @returns The events' data, in order.
 */
function eventsOf(answer: Answer, event: GenerationEvent, delivery: Delivery): unknown[] {
  const { head, kind } = answer;
  const usage = delivery.includeUsage;
  if (kind === "chat") {
    if (event.kind === "text") {
      return [chatChunk(head, { kind: "content", content: event.text }, usage)];
    }
    return [
      chatChunk(head, { kind: "finish", finishReason: event.finishReason }, usage),
      ...(usage ? [chatChunk(head, { kind: "usage", usage: event.usage }, usage)] : []),
    ];
  }
  // With include_usage every chunk has "usage": null, and the last one the counts.
  const chunkUsage = usage ? { usage: null } : {};
  if (event.kind === "text") return [textCompletion(head, event.text, chunkUsage)];
  return [
    textCompletion(head, "", { finishReason: event.finishReason, ...chunkUsage }),
    ...(usage ? [textCompletion(head, "", { usage: event.usage, choices: false })] : []),
  ];
}

async function answerGeneration(
  engine: Engine,
  model: ModelHandle,
  input: { readonly messages?: readonly ChatMessage[]; readonly prompt?: string },
  request: Delivery & { readonly options: GenerateOptions },
  context: RouteContext,
  answer: Answer,
): Promise<Response> {
  const [name, text] = input.messages !== undefined
    ? ["messages", JSON.stringify(input.messages)]
    : ["prompt", input.prompt!];
  // Aborted when the event stream is cancelled (the client went away after the headers).
  const gone = new AbortController();
  const inference: InferenceRequest = {
    modelName: model.name,
    modelVersion: model.version,
    // The model batches (one stream per batch): the tensor has its batch axis.
    inputs: new Map([[name, ndarray([textElement(text)], [1, 1], { dtype: "bytes" })]]),
    parameters: generateParameters(request.options),
    signal: AbortSignal.any([context.signal, gone.signal]),
  };
  const events = generation(engine.inferStream(inference, model), request.options);

  if (!request.stream) {
    let content = "";
    for await (const event of events) {
      if (event.kind === "text") content += event.text;
      else {
        return json(
          answer.kind === "chat"
            ? chatCompletion(answer.head, content, {
              finishReason: event.finishReason,
              usage: event.usage,
            })
            : textCompletion(answer.head, content, {
              finishReason: event.finishReason,
              usage: event.usage,
            }),
        );
      }
    }
    throw InferenceError.internal("The generation ended without its last event");
  }

  // The status goes out with the first event, so a failure before it (a full queue, a model
  // that fails at once) is an error answer with its status.
  const first = await events.next();
  let done = false;
  const send = (
    controller: ReadableStreamDefaultController<Uint8Array>,
    event: GenerationEvent,
  ): void => {
    for (const data of eventsOf(answer, event, request)) {
      controller.enqueue(sseEvent(JSON.stringify(data)));
    }
    if (event.kind === "end") {
      done = true;
      controller.enqueue(sseEvent(DONE_EVENT));
      controller.close();
    }
  };
  const stream = new ReadableStream<Uint8Array>({
    start(controller): void {
      if (answer.kind === "chat") {
        controller.enqueue(
          sseEvent(JSON.stringify(chatChunk(answer.head, { kind: "role" }, request.includeUsage))),
        );
      }
      if (!first.done) send(controller, first.value);
    },
    async pull(controller): Promise<void> {
      if (done) return;
      try {
        const next = await events.next();
        if (next.done) {
          done = true;
          controller.close();
        } else send(controller, next.value);
      } catch (error) {
        done = true;
        if (gone.signal.aborted) return;
        // Headers are sent: the failure is the stream's last event, as OpenAI's are.
        controller.enqueue(
          sseEvent(JSON.stringify(openAIErrorOf(toInferenceError(error)).body)),
        );
        controller.close();
      }
    },
    cancel(): void {
      if (done) return;
      done = true;
      gone.abort(
        InferenceError.cancelled(
          `Request for model '${model.name}' was cancelled: the client disconnected`,
        ),
      );
      // Not awaited: a pending step finishes first, then the engine stops pulling.
      events.return().catch(() => {});
    },
  }, { highWaterMark: 0 });
  return new Response(stream, {
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" },
  });
}

async function embeddings(
  engine: Engine,
  settings: OpenAIRouteSettings,
  context: RouteContext,
): Promise<Response> {
  const request = embeddingRequestOf(await readBody(context, settings));
  const model = openAIModel(engine, request.model, "embeddings");
  const dimensions = model.outputs[0]!.shape[0]!;
  if (request.dimensions !== undefined && request.dimensions !== dimensions) {
    throw new OpenAIError(
      400,
      `Invalid 'dimensions': the model '${request.model}' gives vectors of ${dimensions}, got ${request.dimensions}.`,
      { param: "dimensions" },
    );
  }
  // At most maxBatchSize texts per request: more are split, and the batcher may join them again.
  const size = model.maxBatchSize;
  const parts: (readonly string[])[] = [];
  for (let i = 0; i < request.input.length; i += size) parts.push(request.input.slice(i, i + size));
  const answers = await Promise.all(parts.map((texts) =>
    engine.infer({
      modelName: model.name,
      modelVersion: model.version,
      inputs: new Map([[
        "input",
        ndarray(texts.map(textElement), [texts.length, 1], { dtype: "bytes" }),
      ]]),
      parameters: {},
      signal: context.signal,
    }, model)
  ));
  const vectors: Float32Array[] = [];
  let tokens = 0;
  for (const response of answers) {
    const outputs = hostTensors(response.outputs);
    const embedding = outputs.get("embedding");
    const counts = outputs.get("tokens");
    if (embedding?.dtype !== "float32" || counts?.dtype !== "int32") {
      throw InferenceError.internal("The embedding model did not answer 'embedding' and 'tokens'");
    }
    const data = embedding.data as Float32Array;
    for (let row = 0; row < embedding.shape[0]!; row++) {
      vectors.push(data.subarray(row * dimensions, (row + 1) * dimensions));
    }
    for (const count of counts.data as Int32Array) tokens += count;
  }
  return json(embeddingList(request.model, vectors, {
    encodingFormat: request.encodingFormat,
    promptTokens: tokens,
  }));
}

/**
 * The routes of the OpenAI API, in match order.
 *
 * @example The five routes in match order
 * ```ts
 * import { OPENAI_ROUTES } from "./routes.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(OPENAI_ROUTES.map((route) => `${route.method} ${route.path}`), [
 *   "GET /v1/models",
 *   "GET /v1/models/{model}",
 *   "POST /v1/chat/completions",
 *   "POST /v1/completions",
 *   "POST /v1/embeddings",
 * ]);
 * ```
 */
export const OPENAI_ROUTES: readonly OpenAIRoute[] = [
  { method: "GET", path: "/v1/models", handler: listModels, doc: LIST_MODELS_DOC },
  { method: "GET", path: "/v1/models/{model}", handler: retrieveModel, doc: RETRIEVE_MODEL_DOC },
  { method: "POST", path: "/v1/chat/completions", handler: chat, doc: CHAT_DOC },
  { method: "POST", path: "/v1/completions", handler: completions, doc: COMPLETIONS_DOC },
  { method: "POST", path: "/v1/embeddings", handler: embeddings, doc: EMBEDDINGS_DOC },
];

/**
 * OpenAI's answer to a `/v1/` request no route serves: 405 when a route serves the path under
 * another method, 404 otherwise (also for a path whose parameter is not valid percent-encoding).
 */
function unknownPath(router: Router<RouteHandler>, context: RouteContext): Promise<Response> {
  const { pathname } = new URL(context.request.url);
  const method = context.request.method;
  const served = router.methodsAt(pathname);
  const asked = method === "HEAD" ? "GET" : method;
  if (served.length > 0 && !served.includes(asked as (typeof served)[number])) {
    throw new OpenAIError(405, `Invalid method for URL (${method} ${pathname})`, {
      headers: { allow: served.join(", ") },
    });
  }
  throw new OpenAIError(404, `Invalid URL (${method} ${pathname})`);
}

/**
 * Adds the OpenAI routes to the HTTP front end's router, in the `openai` endpoint group (which
 * `securityConfig` can restrict to an API key), and the `/v1/` prefix's fallback: any other
 * request under it is answered 404 or 405 with OpenAI's error body.
 *
 * @param router The router.
 * @param engine The engine.
 * @param settings The body limit.
 */
export function addOpenAIRoutes(
  router: Router<RouteHandler>,
  engine: Engine,
  settings: OpenAIRouteSettings,
): void {
  const answering = (handler: OpenAIHandler): RouteHandler => async (context) => {
    try {
      return await handler(engine, settings, context);
    } catch (error) {
      return openAIErrorResponse(openAIErrorOf(error));
    }
  };
  for (const route of OPENAI_ROUTES) {
    router.add(route.method, route.path, {
      group: "openai",
      handler: answering(route.handler),
      doc: route.doc,
    });
  }
  router.fallback("/v1/", "openai", answering((_, __, context) => unknownPath(router, context)));
}
