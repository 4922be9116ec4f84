/**
 * The JSON Schemas of the OpenAI API's bodies in the server's OpenAPI document: the answers and
 * stream chunks (components beside the KServe ones), and the request bodies as `wire.ts` checks
 * them (the same fields, types, bounds and defaults; unknown fields refused), whose `model` field
 * is an enum of the models served on the endpoint when the document is built.
 *
 * One schema per OpenAI body and chunk, written beside each other so that a field `wire.ts`
 * checks is visibly described once here; what they repeat (a completion's and a chunk's shape,
 * the fields a server takes only at their default) is written once, and what they share with the
 * KServe schemas comes from `../http/openapi_schemas.ts`.
 *
 * @module
 */

import type { OpenAIEndpoint } from "../../config/model_info.ts";
import type { ModelHandle } from "../../engine/engine.ts";
import { CHAT_ROLES } from "../../protocol/openai.ts";
import { JSON_TYPE, type JsonSchema, type MediaDoc, schemaRef } from "../http/route_doc.ts";
import { ERROR_MESSAGE, NON_NEGATIVE, oneOrMany, STRING } from "../http/openapi_schemas.ts";
import {
  COMPLETION_DEFAULT_MAX_TOKENS,
  DONE_EVENT,
  MAX_EMBEDDING_INPUTS,
  MAX_STOP_SEQUENCES,
} from "./wire.ts";

const SAFE_INTEGER = Number.MAX_SAFE_INTEGER;
const NULL = { type: "null" } as const;

/** `true`, `false` or null, `false` by default: a switch. */
const OFF_BY_DEFAULT = { type: ["boolean", "null"], default: false } as const;

const STREAM_OPTIONS: JsonSchema = {
  type: ["object", "null"],
  description: "Only with `stream: true`.",
  properties: {
    include_usage: {
      ...OFF_BY_DEFAULT,
      description:
        'Every chunk has `"usage": null`, and a last chunk, with no choices, the token counts.',
    },
  },
  additionalProperties: false,
};

/** Token counts, all required: a usage record of the named counts. */
function tokenCounts(...names: string[]): JsonSchema {
  return {
    type: "object",
    required: names,
    properties: Object.fromEntries(names.map((name) => [name, NON_NEGATIVE])),
  };
}

/** An answer's or a stream chunk's `id` prefix and `object`. */
interface AnswerKind {
  readonly prefix: string;
  readonly object: string;
}

/**
 * A chat or text completion, or one chunk of its stream (`stream`: the chunk's description): one
 * choice of `choice`'s fields then `logprobs` and `finish_reason` (null in a chunk until the
 * last), and the usage (in a chunk, null but in the last).
 */
function completionAnswer(
  { prefix, object }: AnswerKind,
  choice: Readonly<Record<string, JsonSchema>>,
  stream?: string,
): JsonSchema {
  const finishReasons = ["stop", "length"];
  return {
    type: "object",
    ...(stream === undefined ? {} : { description: stream }),
    required: [
      "id",
      "object",
      "created",
      "model",
      "choices",
      ...(stream === undefined ? ["usage"] : []),
    ],
    properties: {
      id: { ...STRING, pattern: `^${prefix}` },
      object: { const: object },
      created: NON_NEGATIVE,
      model: STRING,
      choices: {
        type: "array",
        ...(stream === undefined ? { minItems: 1 } : {}),
        maxItems: 1,
        items: {
          type: "object",
          required: [...Object.keys(choice), "logprobs", "finish_reason"],
          properties: {
            ...choice,
            logprobs: NULL,
            finish_reason: {
              enum: stream === undefined ? finishReasons : [...finishReasons, null],
            },
          },
        },
      },
      usage: stream === undefined ? schemaRef("OpenAIUsage") : {
        anyOf: [schemaRef("OpenAIUsage"), NULL],
        description: "With `stream_options.include_usage` only.",
      },
    },
  };
}

/** The one choice's index. */
const FIRST = { const: 0 } as const;

/** What an assistant's message and a chat chunk's delta carry: text, never a refusal. */
const ASSISTANT_FIELDS: Readonly<Record<string, JsonSchema>> = {
  role: { const: "assistant" },
  content: STRING,
  refusal: NULL,
};

/** A message's text content: a string, or text parts. */
const TEXT_CONTENT: JsonSchema[] = [STRING, { type: "array", items: schemaRef("ChatContentPart") }];

/** A request message of `role`; its `content` is required unless it may be null (the assistant's). */
function chatMessage(title: string, role: JsonSchema, content: JsonSchema[]): JsonSchema {
  return {
    type: "object",
    title,
    required: content.includes(NULL) ? ["role"] : ["role", "content"],
    properties: { role, content: { anyOf: content }, name: STRING },
  };
}

/** A text completion and its chunks: the same `id` prefix and `object`. */
const TEXT_COMPLETION: AnswerKind = { prefix: "cmpl-", object: "text_completion" };
const TEXT_CHOICE: Readonly<Record<string, JsonSchema>> = { text: STRING, index: FIRST };

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
          message: ERROR_MESSAGE,
          type: {
            ...STRING,
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
  OpenAIUsage: tokenCounts("prompt_tokens", "completion_tokens", "total_tokens"),
  OpenAIModel: {
    type: "object",
    required: ["id", "object", "created", "owned_by"],
    properties: {
      id: { ...STRING, description: "The model's name: what the `model` field names." },
      object: { const: "model" },
      created: { ...NON_NEGATIVE, description: "When it was bound (seconds since the epoch)." },
      owned_by: { ...STRING, description: "`openai.ownedBy` of its binding." },
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
    properties: { type: { const: "text" }, text: STRING },
  },
  ChatMessage: {
    description:
      "A message: text content (a string, or text parts joined), an assistant's may be null or absent. Other keys are ignored.",
    oneOf: [
      chatMessage(
        "Message",
        { enum: CHAT_ROLES.filter((role) => role !== "assistant") },
        TEXT_CONTENT,
      ),
      chatMessage("Assistant message", { const: "assistant" }, [...TEXT_CONTENT, NULL]),
    ],
  },
  ChatCompletion: completionAnswer({ prefix: "chatcmpl-", object: "chat.completion" }, {
    index: FIRST,
    message: {
      type: "object",
      required: Object.keys(ASSISTANT_FIELDS),
      properties: ASSISTANT_FIELDS,
    },
  }),
  ChatCompletionChunk: completionAnswer(
    { prefix: "chatcmpl-", object: "chat.completion.chunk" },
    { index: FIRST, delta: { type: "object", properties: ASSISTANT_FIELDS } },
    "One event of a chat stream: the first carries the role, the next ones content, then one the `finish_reason`; with `include_usage` a last one, with no choices, the usage.",
  ),
  Completion: completionAnswer(TEXT_COMPLETION, TEXT_CHOICE),
  CompletionChunk: completionAnswer(
    TEXT_COMPLETION,
    TEXT_CHOICE,
    "One event of a completion stream: the text so far, then one with the `finish_reason`; with `include_usage` a last one, with no choices, the usage.",
  ),
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
            index: NON_NEGATIVE,
            embedding: {
              anyOf: [
                { type: "array", items: { type: "number" }, title: "float" },
                {
                  ...STRING,
                  title: "base64",
                  contentEncoding: "base64",
                  description: "The vector's float32 numbers, little-endian, in base64.",
                },
              ],
            },
          },
        },
      },
      model: STRING,
      usage: tokenCounts("prompt_tokens", "total_tokens"),
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
      ...STRING,
      minLength: 1,
      description: `A model bound with ${binding} (or bind's \`openai\` option) for ${
        ENDPOINT_PATHS[endpoint]
      }; \`GET /v1/models\` lists them. Any other name answers 404 \`model_not_found\`.`,
    };
  }
  return {
    ...STRING,
    enum: names,
    description: `A model the server serves on ${ENDPOINT_PATHS[endpoint]}.`,
  };
}

/** A count of at least 1, or null. */
const POSITIVE_OR_NULL = { type: ["integer", "null"], minimum: 1, maximum: SAFE_INTEGER } as const;

/**
 * A field OpenAI defines whose other values this server does not implement: only its default
 * (or null) is taken.
 */
function onlyDefault(value: unknown, description?: string): JsonSchema {
  return { enum: [value, null], ...(description === undefined ? {} : { description }) };
}

const NO_PENALTY = onlyDefault(0, "Only 0: no penalties are applied.");

/**
 * An OpenAI request body: the fields listed, `model` and one more required, any other refused;
 * `rules`, what the fields must also meet together.
 */
function requestBody(
  required: string,
  properties: Readonly<Record<string, unknown>>,
  rules: readonly JsonSchema[] | undefined,
): JsonSchema {
  return {
    type: "object",
    description: UNKNOWN_REFUSED,
    required: ["model", required],
    properties,
    additionalProperties: false,
    ...(rules === undefined ? {} : { anyOf: rules }),
  };
}

/** The sampling and delivery fields chat and completions share, as `wire.ts` checks them. */
function generationFields(maxTokensDefault?: number): Record<string, JsonSchema> {
  return {
    max_tokens: {
      ...POSITIVE_OR_NULL,
      description: "The most tokens to generate; the answer then ends with `length`.",
      ...(maxTokensDefault === undefined ? {} : { default: maxTokensDefault }),
    },
    temperature: { type: ["number", "null"], minimum: 0, maximum: 2 },
    top_p: { type: ["number", "null"], exclusiveMinimum: 0, maximum: 1 },
    seed: { type: ["integer", "null"], minimum: -SAFE_INTEGER, maximum: SAFE_INTEGER },
    stop: {
      description: `Up to ${MAX_STOP_SEQUENCES} strings that end the answer (not included in it).`,
      anyOf: [...oneOrMany(STRING, { maxItems: MAX_STOP_SEQUENCES }), NULL],
    },
    n: {
      type: ["integer", "null"],
      minimum: 1,
      maximum: 1,
      description: "One choice per request.",
    },
    user: { type: ["string", "null"], description: "The end user's id, passed to the model." },
    stream: {
      ...OFF_BY_DEFAULT,
      description: "Answer with Server-Sent Events (`text/event-stream`), ending with `[DONE]`.",
    },
    stream_options: STREAM_OPTIONS,
    frequency_penalty: NO_PENALTY,
    presence_penalty: NO_PENALTY,
    logit_bias: { type: ["object", "null"], maxProperties: 0, description: "Only empty." },
  };
}

// `stream_options` needs `stream: true` (the server answers 400 otherwise, as OpenAI does).
const STREAM_OPTIONS_NEED_STREAM: JsonSchema[] = [
  { required: ["stream"], properties: { stream: { const: true } } },
  { properties: { stream_options: NULL } },
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
  return requestBody("messages", {
    model: modelField("chat", names),
    messages: { type: "array", minItems: 1, items: schemaRef("ChatMessage") },
    max_tokens: { ...maxTokens as object, description: "`max_completion_tokens`'s old name." },
    max_completion_tokens: maxTokens,
    ...fields,
    logprobs: onlyDefault(false),
    top_logprobs: onlyDefault(0),
    response_format: {
      anyOf: [
        { type: "object", required: ["type"], properties: { type: { const: "text" } } },
        NULL,
      ],
    },
    tools: { type: ["array", "null"], maxItems: 0, description: "Only empty: no tools." },
    tool_choice: onlyDefault("none"),
    parallel_tool_calls: { type: ["boolean", "null"] },
    store: onlyDefault(false, "Nothing is stored."),
    metadata: { type: ["object", "null"], additionalProperties: STRING },
  }, STREAM_OPTIONS_NEED_STREAM);
}

/**
 * The body of `POST /v1/completions`.
 *
 * @param names The models served on the endpoint; `undefined` for any name.
 * @returns The schema.
 */
export function completionRequestSchema(names: readonly string[] | undefined): JsonSchema {
  return requestBody("prompt", {
    model: modelField("completions", names),
    prompt: {
      description: "One prompt: a string, or a list of one string (no token arrays).",
      anyOf: oneOrMany(STRING, { minItems: 1, maxItems: 1 }),
    },
    ...generationFields(COMPLETION_DEFAULT_MAX_TOKENS),
    logprobs: NULL,
    echo: onlyDefault(false),
    suffix: onlyDefault(""),
    best_of: onlyDefault(1),
  }, STREAM_OPTIONS_NEED_STREAM);
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
  return requestBody(
    "input",
    {
      model: modelField("embeddings", models?.map((model) => model.name)),
      input: {
        description: `A text, or 1 to ${MAX_EMBEDDING_INPUTS} texts (no token arrays); none empty.`,
        anyOf: oneOrMany({ ...STRING, minLength: 1 }, {
          minItems: 1,
          maxItems: MAX_EMBEDDING_INPUTS,
        }),
      },
      encoding_format: { enum: ["float", "base64", null], default: "float" },
      dimensions: {
        ...POSITIVE_OR_NULL,
        description: `The model's vector length, or a 400: the server does not shorten vectors${
          models === undefined
            ? ""
            : ` (${models.map((model) => `${model.name}: ${dimensionsOf(model)}`).join(", ")})`
        }.`,
      },
      user: { type: ["string", "null"] },
    },
    // Each model takes its own vector length.
    models?.map((model) => ({
      properties: {
        model: { const: model.name },
        dimensions: { enum: [dimensionsOf(model), null] },
      },
    })),
  );
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
          ...STRING,
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
