/**
 * What the OpenAI routes say of themselves in the server's OpenAPI document (`RouteDoc`s beside
 * the handlers of `routes.ts`): the request bodies and answers (`openapi_schemas.ts`), OpenAI's
 * error body for every status a route answers, and the API key of the `openai` endpoint group.
 * The `model` field is an enum of the models served on the endpoint when the document is built,
 * and the examples name one of them, so a docs page's "Try it out" is answered.
 *
 * @module
 */

import type { OpenAIEndpoint } from "../../config/model_info.ts";
import type { ModelHandle } from "../../engine/engine.ts";
import {
  ACCESS_TOKEN_SCHEME,
  type BodyDoc,
  type ExampleDoc,
  JSON_TYPE,
  jsonContent,
  type JsonSchema,
  type ModelOperationDoc,
  type ResponseDoc,
  type RouteDoc,
  schemaRef,
} from "../http/route_doc.ts";
import {
  chatRequestSchema,
  completionRequestSchema,
  embeddingRequestSchema,
  eventStream,
} from "./openapi_schemas.ts";

const string = { type: "string" } as const;

/** The name of the OpenAI API key's security scheme (`Authorization: Bearer <key>`). */
export const OPENAI_KEY_SCHEME = "openAIApiKey";

/** The security scheme of the API key: the access token, as OpenAI clients send it. */
export const OPENAI_KEY_SCHEME_OBJECT: Readonly<Record<string, string>> = {
  type: "http",
  scheme: "bearer",
  description:
    "The server's access token (`Triton.getAccessToken()`) as the OpenAI API key, when `securityConfig` restricts the `openai` group: `Authorization: Bearer <token>` (what OpenAI's clients send), or the `triton-access-token` header.",
};

function errors(statuses: Readonly<Record<number, string>>): Record<string, ResponseDoc> {
  return Object.fromEntries(
    Object.entries(statuses).map((
      [status, description],
    ) => [status, { description, content: jsonContent(schemaRef("OpenAIError")) }]),
  );
}

/** What the access check answers for the `openai` group, and the schemes it takes. */
export const OPENAI_ACCESS: {
  readonly security: readonly Readonly<Record<string, readonly string[]>>[];
  readonly responses: Readonly<Record<string, ResponseDoc>>;
} = {
  security: [{ [OPENAI_KEY_SCHEME]: [] }, { [ACCESS_TOKEN_SCHEME]: [] }],
  responses: {
    401: {
      description:
        "No API key, or not the access token (`invalid_api_key`); OpenAI answers 401 for both",
      content: jsonContent(schemaRef("OpenAIError")),
      headers: {
        "www-authenticate": { description: "`Bearer`, when no key was sent.", schema: string },
      },
    },
  },
};

const GENERATION_ERRORS = errors({
  400:
    "The body is not valid: not JSON, an unknown field, a field of the wrong type or value, or a value this server does not support (`param` names the field); or the model refused the request",
  404: "No model of that name is served on this endpoint (`model_not_found`)",
  413: "The body, or its decompressed form, is over the server's `maxRequestBytes`",
  429: "The model's queue is full (`rate_limit_exceeded`)",
  500: "The model failed (`server_error`)",
  503: "The model was unloaded or is not ready (`server_error`)",
});

function bodyOf(schema: JsonSchema, examples: Readonly<Record<string, ExampleDoc>>): BodyDoc {
  return { required: true, content: { [JSON_TYPE]: { schema, examples } } };
}

function served(models: readonly ModelHandle[], endpoint: OpenAIEndpoint): ModelHandle[] {
  return models.filter((model) => model.openai?.endpoints.includes(endpoint) === true);
}

function chatExamples(model: string): Record<string, ExampleDoc> {
  const messages = [{ role: "user", content: "Say hello" }];
  return {
    whole: { summary: "The whole answer", value: { model, messages } },
    streamed: {
      summary: "Streamed, with the token counts last",
      value: { model, messages, stream: true, stream_options: { include_usage: true } },
    },
  };
}

function completionExamples(model: string): Record<string, ExampleDoc> {
  const prompt = "Once upon a time";
  return {
    whole: { summary: "The whole answer", value: { model, prompt, max_tokens: 16 } },
    streamed: { summary: "Streamed", value: { model, prompt, max_tokens: 16, stream: true } },
  };
}

function embeddingExamples(model: string): Record<string, ExampleDoc> {
  return {
    float: {
      summary: "Two texts, as lists of numbers",
      value: { model, input: ["Hello", "world"] },
    },
    base64: {
      summary: "One text, as base64 float32",
      value: { model, input: "Hello", encoding_format: "base64" },
    },
  };
}

/** The example model names of a document without models. */
const EXAMPLE_CHAT_MODEL = "my-chat-model";
const EXAMPLE_EMBEDDING_MODEL = "my-embedding-model";

function generationDoc(
  endpoint: "chat" | "completions",
  operationId: string,
  summary: string,
): RouteDoc {
  const chat = endpoint === "chat";
  const requestBody = (names: readonly string[] | undefined): BodyDoc =>
    bodyOf(
      chat ? chatRequestSchema(names) : completionRequestSchema(names),
      (chat ? chatExamples : completionExamples)(names?.[0] ?? EXAMPLE_CHAT_MODEL),
    );
  return {
    operationId,
    summary,
    tag: "openai",
    description:
      "`stream: false` (the default) answers one JSON object; `stream: true` answers Server-Sent Events, one chunk each, ending with `data: [DONE]`. The model runs as any request of it does: batcher, queue policy, priorities, statistics.",
    requestBody: requestBody(undefined),
    responses: {
      200: {
        description: "The answer: JSON, or with `stream: true` Server-Sent Events",
        content: {
          ...jsonContent(schemaRef(chat ? "ChatCompletion" : "Completion")),
          "text/event-stream": eventStream(chat ? "ChatCompletionChunk" : "CompletionChunk"),
        },
      },
      ...GENERATION_ERRORS,
    },
    forModels: (models): ModelOperationDoc | undefined => {
      const names = served(models, endpoint).map((model) => model.name);
      return names.length === 0 ? undefined : { requestBody: requestBody(names) };
    },
  };
}

/** `POST /v1/chat/completions`. */
export const CHAT_DOC: RouteDoc = generationDoc(
  "chat",
  "createChatCompletion",
  "Answers a chat, whole or streamed as Server-Sent Events",
);

/** `POST /v1/completions`. */
export const COMPLETIONS_DOC: RouteDoc = generationDoc(
  "completions",
  "createCompletion",
  "Completes a prompt, whole or streamed as Server-Sent Events",
);

/** `POST /v1/embeddings`. */
export const EMBEDDINGS_DOC: RouteDoc = {
  operationId: "createEmbedding",
  summary: "Embeds texts as vectors",
  tag: "openai",
  description:
    "The texts go to the model in batches of at most its `maxBatchSize`, which the dynamic batcher may join with other requests' texts.",
  requestBody: bodyOf(
    embeddingRequestSchema(undefined),
    embeddingExamples(EXAMPLE_EMBEDDING_MODEL),
  ),
  responses: {
    200: { description: "One vector per text", content: jsonContent(schemaRef("EmbeddingList")) },
    ...GENERATION_ERRORS,
  },
  forModels: (models) => {
    const embedders = served(models, "embeddings");
    return embedders.length === 0 ? undefined : {
      requestBody: bodyOf(
        embeddingRequestSchema(embedders),
        embeddingExamples(embedders[0]!.name),
      ),
    };
  },
};

/** `GET /v1/models`. */
export const LIST_MODELS_DOC: RouteDoc = {
  operationId: "listModels",
  summary: "Lists the models served on the OpenAI API",
  tag: "openai",
  responses: {
    200: {
      description: "The models bound with `openai`, ready, in name order",
      content: jsonContent(schemaRef("OpenAIModelList")),
    },
  },
};

const MODEL_NOT_FOUND = errors({
  404: "No model of that name is served on the OpenAI API (`model_not_found`)",
});

/** `GET /v1/models/{model}`. */
export const RETRIEVE_MODEL_DOC: RouteDoc = {
  operationId: "retrieveModel",
  summary: "Describes one model served on the OpenAI API",
  tag: "openai",
  responses: {
    200: { description: "The model", content: jsonContent(schemaRef("OpenAIModel")) },
    ...MODEL_NOT_FOUND,
  },
  forModel: (model) =>
    model.openai === undefined ? undefined : {
      responses: {
        200: {
          description: "The model",
          content: jsonContent({
            allOf: [schemaRef("OpenAIModel"), { properties: { id: { const: model.name } } }],
          }),
        },
      },
    },
};
