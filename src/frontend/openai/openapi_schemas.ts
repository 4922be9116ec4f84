/**
 * The JSON Schemas of the OpenAI API's bodies in the server's OpenAPI document: the answers and
 * stream chunks (components beside the KServe ones), and the request bodies as `wire.ts` checks
 * them (the same fields, types, bounds and defaults; unknown fields refused), whose `model` field
 * is an enum of the models served on the endpoint when the document is built.
 *
 * Over 500 lines for a reason: it is data, one schema per OpenAI body and chunk, written beside
 * each other so that a field `wire.ts` checks is visibly described once here.
 *
 * @module
 */

import type { OpenAIEndpoint } from "../../config/model_info.ts";
import type { ModelHandle } from "../../engine/engine.ts";
import { CHAT_ROLES } from "../../protocol/openai.ts";
import { JSON_TYPE, type JsonSchema, type MediaDoc, schemaRef } from "../http/route_doc.ts";
import {
  COMPLETION_DEFAULT_MAX_TOKENS,
  DONE_EVENT,
  MAX_EMBEDDING_INPUTS,
  MAX_STOP_SEQUENCES,
} from "./wire.ts";

const SAFE_INTEGER = Number.MAX_SAFE_INTEGER;
const string = { type: "string" } as const;
const nonNegative = { type: "integer", minimum: 0 } as const;

const STREAM_OPTIONS: JsonSchema = {
  type: ["object", "null"],
  description: "Only with `stream: true`.",
  properties: {
    include_usage: {
      type: ["boolean", "null"],
      default: false,
      description:
        'Every chunk has `"usage": null`, and a last chunk, with no choices, the token counts.',
    },
  },
  additionalProperties: false,
};

/** The OpenAI schemas of the document's components, by name (`#/components/schemas/<name>`). */
export const OPENAI_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  OpenAIError: {
    type: "object",
    description: "OpenAI's error body.",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message", "type", "param", "code"],
        properties: {
          message: { ...string, description: "What was wrong." },
          type: {
            ...string,
            description: "`invalid_request_error`, `requests` (429) or `server_error`.",
          },
          param: { type: ["string", "null"], description: "The request field at fault." },
          code: {
            type: ["string", "null"],
            description: "`model_not_found`, `invalid_api_key`, `rate_limit_exceeded`, or null.",
          },
        },
      },
    },
  },
  OpenAIUsage: {
    type: "object",
    required: ["prompt_tokens", "completion_tokens", "total_tokens"],
    properties: {
      prompt_tokens: nonNegative,
      completion_tokens: nonNegative,
      total_tokens: nonNegative,
    },
  },
  OpenAIModel: {
    type: "object",
    required: ["id", "object", "created", "owned_by"],
    properties: {
      id: { ...string, description: "The model's name: what the `model` field names." },
      object: { const: "model" },
      created: { ...nonNegative, description: "When it was bound (seconds since the epoch)." },
      owned_by: { ...string, description: "`openai.ownedBy` of its binding." },
    },
  },
  OpenAIModelList: {
    type: "object",
    required: ["object", "data"],
    properties: {
      object: { const: "list" },
      data: { type: "array", items: schemaRef("OpenAIModel") },
    },
  },
  ChatContentPart: {
    type: "object",
    description: "A part of a message's content: text parts only.",
    required: ["type", "text"],
    properties: { type: { const: "text" }, text: string },
  },
  ChatMessage: {
    description:
      "A message: text content (a string, or text parts joined), an assistant's may be null or absent. Other keys are ignored.",
    oneOf: [
      {
        type: "object",
        title: "Message",
        required: ["role", "content"],
        properties: {
          role: { enum: CHAT_ROLES.filter((role) => role !== "assistant") },
          content: {
            anyOf: [string, { type: "array", items: schemaRef("ChatContentPart") }],
          },
          name: string,
        },
      },
      {
        type: "object",
        title: "Assistant message",
        required: ["role"],
        properties: {
          role: { const: "assistant" },
          content: {
            anyOf: [string, { type: "array", items: schemaRef("ChatContentPart") }, {
              type: "null",
            }],
          },
          name: string,
        },
      },
    ],
  },
  ChatCompletion: {
    type: "object",
    required: ["id", "object", "created", "model", "choices", "usage"],
    properties: {
      id: { ...string, pattern: "^chatcmpl-" },
      object: { const: "chat.completion" },
      created: nonNegative,
      model: string,
      choices: {
        type: "array",
        minItems: 1,
        maxItems: 1,
        items: {
          type: "object",
          required: ["index", "message", "logprobs", "finish_reason"],
          properties: {
            index: { const: 0 },
            message: {
              type: "object",
              required: ["role", "content", "refusal"],
              properties: {
                role: { const: "assistant" },
                content: string,
                refusal: { type: "null" },
              },
            },
            logprobs: { type: "null" },
            finish_reason: { enum: ["stop", "length"] },
          },
        },
      },
      usage: schemaRef("OpenAIUsage"),
    },
  },
  ChatCompletionChunk: {
    type: "object",
    description:
      "One event of a chat stream: the first carries the role, the next ones content, then one the `finish_reason`; with `include_usage` a last one, with no choices, the usage.",
    required: ["id", "object", "created", "model", "choices"],
    properties: {
      id: { ...string, pattern: "^chatcmpl-" },
      object: { const: "chat.completion.chunk" },
      created: nonNegative,
      model: string,
      choices: {
        type: "array",
        maxItems: 1,
        items: {
          type: "object",
          required: ["index", "delta", "logprobs", "finish_reason"],
          properties: {
            index: { const: 0 },
            delta: {
              type: "object",
              properties: {
                role: { const: "assistant" },
                content: string,
                refusal: { type: "null" },
              },
            },
            logprobs: { type: "null" },
            finish_reason: { enum: ["stop", "length", null] },
          },
        },
      },
      usage: {
        anyOf: [schemaRef("OpenAIUsage"), { type: "null" }],
        description: "With `stream_options.include_usage` only.",
      },
    },
  },
  Completion: {
    type: "object",
    required: ["id", "object", "created", "model", "choices", "usage"],
    properties: {
      id: { ...string, pattern: "^cmpl-" },
      object: { const: "text_completion" },
      created: nonNegative,
      model: string,
      choices: {
        type: "array",
        minItems: 1,
        maxItems: 1,
        items: {
          type: "object",
          required: ["text", "index", "logprobs", "finish_reason"],
          properties: {
            text: string,
            index: { const: 0 },
            logprobs: { type: "null" },
            finish_reason: { enum: ["stop", "length"] },
          },
        },
      },
      usage: schemaRef("OpenAIUsage"),
    },
  },
  CompletionChunk: {
    type: "object",
    description:
      "One event of a completion stream: the text so far, then one with the `finish_reason`; with `include_usage` a last one, with no choices, the usage.",
    required: ["id", "object", "created", "model", "choices"],
    properties: {
      id: { ...string, pattern: "^cmpl-" },
      object: { const: "text_completion" },
      created: nonNegative,
      model: string,
      choices: {
        type: "array",
        maxItems: 1,
        items: {
          type: "object",
          required: ["text", "index", "logprobs", "finish_reason"],
          properties: {
            text: string,
            index: { const: 0 },
            logprobs: { type: "null" },
            finish_reason: { enum: ["stop", "length", null] },
          },
        },
      },
      usage: {
        anyOf: [schemaRef("OpenAIUsage"), { type: "null" }],
        description: "With `stream_options.include_usage` only.",
      },
    },
  },
  EmbeddingList: {
    type: "object",
    required: ["object", "data", "model", "usage"],
    properties: {
      object: { const: "list" },
      data: {
        type: "array",
        minItems: 1,
        items: {
          type: "object",
          required: ["object", "index", "embedding"],
          properties: {
            object: { const: "embedding" },
            index: nonNegative,
            embedding: {
              anyOf: [
                { type: "array", items: { type: "number" }, title: "float" },
                {
                  ...string,
                  title: "base64",
                  contentEncoding: "base64",
                  description: "The vector's float32 numbers, little-endian, in base64.",
                },
              ],
            },
          },
        },
      },
      model: string,
      usage: {
        type: "object",
        required: ["prompt_tokens", "total_tokens"],
        properties: { prompt_tokens: nonNegative, total_tokens: nonNegative },
      },
    },
  },
};

const ENDPOINT_PATHS: Readonly<Record<OpenAIEndpoint, string>> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  embeddings: "/v1/embeddings",
};

function modelField(endpoint: OpenAIEndpoint, names: readonly string[] | undefined): JsonSchema {
  const binding = endpoint === "embeddings" ? "`embeddingModel()`" : "`chatModel()`";
  if (names === undefined) {
    return {
      ...string,
      minLength: 1,
      description: `A model bound with ${binding} (or bind's \`openai\` option) for ${
        ENDPOINT_PATHS[endpoint]
      }; \`GET /v1/models\` lists them. Any other name answers 404 \`model_not_found\`.`,
    };
  }
  return {
    ...string,
    enum: names,
    description: `A model the server serves on ${ENDPOINT_PATHS[endpoint]}.`,
  };
}

/** The sampling and delivery fields chat and completions share, as `wire.ts` checks them. */
function generationFields(maxTokensDefault?: number): Record<string, JsonSchema> {
  return {
    max_tokens: {
      type: ["integer", "null"],
      minimum: 1,
      maximum: SAFE_INTEGER,
      description: "The most tokens to generate; the answer then ends with `length`.",
      ...(maxTokensDefault === undefined ? {} : { default: maxTokensDefault }),
    },
    temperature: { type: ["number", "null"], minimum: 0, maximum: 2 },
    top_p: { type: ["number", "null"], exclusiveMinimum: 0, maximum: 1 },
    seed: { type: ["integer", "null"], minimum: -SAFE_INTEGER, maximum: SAFE_INTEGER },
    stop: {
      description: `Up to ${MAX_STOP_SEQUENCES} strings that end the answer (not included in it).`,
      anyOf: [string, { type: "array", items: string, maxItems: MAX_STOP_SEQUENCES }, {
        type: "null",
      }],
    },
    n: {
      type: ["integer", "null"],
      minimum: 1,
      maximum: 1,
      description: "One choice per request.",
    },
    user: { type: ["string", "null"], description: "The end user's id, passed to the model." },
    stream: {
      type: ["boolean", "null"],
      default: false,
      description: "Answer with Server-Sent Events (`text/event-stream`), ending with `[DONE]`.",
    },
    stream_options: STREAM_OPTIONS,
    frequency_penalty: { enum: [0, null], description: "Only 0: no penalties are applied." },
    presence_penalty: { enum: [0, null], description: "Only 0: no penalties are applied." },
    logit_bias: { type: ["object", "null"], maxProperties: 0, description: "Only empty." },
  };
}

// `stream_options` needs `stream: true` (the server answers 400 otherwise, as OpenAI does).
const STREAM_OPTIONS_NEED_STREAM: JsonSchema[] = [
  { required: ["stream"], properties: { stream: { const: true } } },
  { properties: { stream_options: { type: "null" } } },
];

const UNKNOWN_REFUSED =
  "A field not listed is refused (400 naming it), as OpenAI refuses it; a field OpenAI defines whose other values this server does not implement takes only its default.";

/**
 * The body of `POST /v1/chat/completions`.
 *
 * @param names The models served on the endpoint; `undefined` for any name.
 * @returns The schema.
 *
 * @example Required fields and the served model names
 * ```ts
 * import { chatRequestSchema } from "./openapi_schemas.ts";
 * import assert from "node:assert/strict";
 *
 * const schema = chatRequestSchema(["Fixed"]) as {
 *   required: string[];
 *   properties: { model: { enum: string[] } };
 *   additionalProperties: boolean;
 * };
 * assert.deepEqual(schema.required, ["model", "messages"]);
 * assert.deepEqual(schema.properties.model.enum, ["Fixed"]);
 * assert.equal(schema.additionalProperties, false);
 * ```
 */
export function chatRequestSchema(names: readonly string[] | undefined): JsonSchema {
  const { max_tokens: maxTokens, ...fields } = generationFields();
  return {
    type: "object",
    description: UNKNOWN_REFUSED,
    required: ["model", "messages"],
    properties: {
      model: modelField("chat", names),
      messages: { type: "array", minItems: 1, items: schemaRef("ChatMessage") },
      max_tokens: { ...maxTokens as object, description: "`max_completion_tokens`'s old name." },
      max_completion_tokens: maxTokens,
      ...fields,
      logprobs: { enum: [false, null] },
      top_logprobs: { enum: [0, null] },
      response_format: {
        anyOf: [
          { type: "object", required: ["type"], properties: { type: { const: "text" } } },
          { type: "null" },
        ],
      },
      tools: { type: ["array", "null"], maxItems: 0, description: "Only empty: no tools." },
      tool_choice: { enum: ["none", null] },
      parallel_tool_calls: { type: ["boolean", "null"] },
      store: { enum: [false, null], description: "Nothing is stored." },
      metadata: { type: ["object", "null"], additionalProperties: string },
    },
    additionalProperties: false,
    anyOf: STREAM_OPTIONS_NEED_STREAM,
  };
}

/**
 * The body of `POST /v1/completions`.
 *
 * @param names The models served on the endpoint; `undefined` for any name.
 * @returns The schema.
 */
export function completionRequestSchema(names: readonly string[] | undefined): JsonSchema {
  return {
    type: "object",
    description: UNKNOWN_REFUSED,
    required: ["model", "prompt"],
    properties: {
      model: modelField("completions", names),
      prompt: {
        description: "One prompt: a string, or a list of one string (no token arrays).",
        anyOf: [string, { type: "array", items: string, minItems: 1, maxItems: 1 }],
      },
      ...generationFields(COMPLETION_DEFAULT_MAX_TOKENS),
      logprobs: { type: "null" },
      echo: { enum: [false, null] },
      suffix: { enum: ["", null] },
      best_of: { enum: [1, null] },
    },
    additionalProperties: false,
    anyOf: STREAM_OPTIONS_NEED_STREAM,
  };
}

/** The vector length of an embedding model (its `embedding` output's one dimension). */
function dimensionsOf(model: ModelHandle): number {
  return model.outputs[0]!.shape[0]!;
}

/**
 * The body of `POST /v1/embeddings`.
 *
 * @param models The models served on the endpoint, each with its vector length; `undefined` for
 *   any name.
 * @returns The schema.
 */
export function embeddingRequestSchema(models: readonly ModelHandle[] | undefined): JsonSchema {
  return {
    type: "object",
    description: UNKNOWN_REFUSED,
    required: ["model", "input"],
    properties: {
      model: modelField("embeddings", models?.map((model) => model.name)),
      input: {
        description: `A text, or 1 to ${MAX_EMBEDDING_INPUTS} texts (no token arrays); none empty.`,
        anyOf: [{ ...string, minLength: 1 }, {
          type: "array",
          minItems: 1,
          maxItems: MAX_EMBEDDING_INPUTS,
          items: { ...string, minLength: 1 },
        }],
      },
      encoding_format: { enum: ["float", "base64", null], default: "float" },
      dimensions: {
        type: ["integer", "null"],
        minimum: 1,
        maximum: SAFE_INTEGER,
        description: `The model's vector length, or a 400: the server does not shorten vectors${
          models === undefined
            ? ""
            : ` (${models.map((model) => `${model.name}: ${dimensionsOf(model)}`).join(", ")})`
        }.`,
      },
      user: { type: ["string", "null"] },
    },
    additionalProperties: false,
    // Each model takes its own vector length.
    ...(models === undefined ? {} : {
      anyOf: models.map((model) => ({
        properties: {
          model: { const: model.name },
          dimensions: { enum: [dimensionsOf(model), null] },
        },
      })),
    }),
  };
}

/**
 * The Server-Sent Events of an OpenAI stream: one chunk per event, then `[DONE]`.
 *
 * @param chunk The component schema of a chunk.
 * @returns The `text/event-stream` media type: the schema of one event.
 */
export function eventStream(chunk: string): MediaDoc {
  return {
    schema: {
      type: "object",
      description:
        "One Server-Sent Event (`data: <JSON>` and a blank line). A failure after the first event is a last event with OpenAI's error body.",
      required: ["data"],
      properties: {
        data: {
          ...string,
          anyOf: [
            { const: DONE_EVENT, description: "The last event." },
            {
              contentMediaType: JSON_TYPE,
              contentSchema: { anyOf: [schemaRef(chunk), schemaRef("OpenAIError")] },
            },
          ],
        },
      },
    },
  };
}
