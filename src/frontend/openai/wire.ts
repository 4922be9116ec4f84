/**
 * The OpenAI API's wire shapes and rules, in one place: what a request to `/v1/chat/completions`,
 * `/v1/completions` and `/v1/embeddings` may hold (fields checked as OpenAI checks them, each
 * failure naming its `param`), and the objects the answers are made of (completions, chunks,
 * embeddings, the model list, and the error body `{"error": {message, type, param, code}}`).
 * Objects are built with their keys in OpenAI's order, so a stream can be compared byte for byte.
 *
 * Over 500 lines for a reason: the three endpoints' request checks share their field readers
 * (`optionalNumber`, `stopOf`, `sampling`, `deliveryOf`, ...) and their error wording, and the
 * answer builders share the answer head and usage; split by endpoint, the shared readers would
 * move to a fourth file every part imports, and each endpoint's rules would no longer read side
 * by side with the others'.
 *
 * @module
 */

import {
  type ChatMessage,
  chatMessagesOf,
  type FinishReason,
  type GenerateOptions,
} from "../../protocol/openai.ts";

/** OpenAI's error body. */
export interface OpenAIErrorBody {
  /** The error. */
  readonly error: {
    readonly message: string;
    readonly type: string;
    readonly param: string | null;
    readonly code: string | null;
  };
}

/** Options of {@linkcode OpenAIError}. */
export interface OpenAIErrorOptions extends ErrorOptions {
  /**
   * The error body's `type`.
   *
   * @default {"invalid_request_error"}
   */
  type?: string;
  /**
   * The request field at fault.
   *
   * @default {null}
   */
  param?: string | null;
  /**
   * A machine-readable code (`model_not_found`, `invalid_api_key`, ...).
   *
   * @default {null}
   */
  code?: string | null;
  /**
   * Extra response headers.
   *
   * @default {{}}
   */
  headers?: Readonly<Record<string, string>>;
}

/**
 * An error answered with OpenAI's error body and a status.
 *
 * @example A missing parameter as OpenAI's error body
 * ```ts
 * import { OpenAIError } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new OpenAIError(400, "Missing required parameter: 'messages'.", { param: "messages" });
 * assert.deepEqual(error.body, {
 *   error: {
 *     message: "Missing required parameter: 'messages'.",
 *     type: "invalid_request_error",
 *     param: "messages",
 *     code: null,
 *   },
 * });
 * ```
 */
export class OpenAIError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The error body. */
  readonly body: OpenAIErrorBody;
  /** Extra response headers. */
  readonly headers: Readonly<Record<string, string>>;

  /**
   * Creates an error.
   *
   * @param status The HTTP status.
   * @param message What was wrong.
   * @param options Type, param, code, headers and cause.
   */
  constructor(status: number, message: string, options: OpenAIErrorOptions = {}) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = "OpenAIError";
    this.status = status;
    this.headers = options.headers ?? {};
    this.body = {
      error: {
        message,
        type: options.type ?? "invalid_request_error",
        param: options.param ?? null,
        code: options.code ?? null,
      },
    };
  }
}

function invalid(message: string, param: string | null, code: string | null = null): OpenAIError {
  return new OpenAIError(400, message, { param, code });
}

type Body = Record<string, unknown>;

/**
 * Parses a request body as a JSON object.
 *
 * @param text The body.
 * @returns The object.
 * @throws {OpenAIError} 400 when it is not JSON or not an object.
 *
 * @example Parse an object, refuse broken JSON
 * ```ts
 * import { parseBody } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseBody('{"model":"m"}'), { model: "m" });
 * assert.throws(() => parseBody("{"), /We could not parse the JSON body of your request/);
 * ```
 */
export function parseBody(text: string): Body {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (cause) {
    throw new OpenAIError(
      400,
      "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
      { cause },
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw invalid("The request body must be a JSON object.", null);
  }
  return parsed as Body;
}

function refuseUnknown(body: Body, known: ReadonlySet<string>): void {
  for (const key of Object.keys(body)) {
    if (!known.has(key)) throw invalid(`Unrecognized request argument supplied: ${key}`, key);
  }
}

function required(body: Body, key: string): unknown {
  const value = body[key];
  if (value === undefined || value === null) {
    throw invalid(`Missing required parameter: '${key}'.`, key);
  }
  return value;
}

function modelOf(body: Body): string {
  const model = required(body, "model");
  if (typeof model !== "string" || model === "") {
    throw invalid("Invalid type for 'model': expected a non-empty string.", "model");
  }
  return model;
}

function optionalNumber(
  body: Body,
  key: string,
  check: (value: number) => boolean,
  expected: string,
): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw invalid(`Invalid type for '${key}': expected a number, but got ${typeName(value)}.`, key);
  }
  if (!check(value)) throw invalid(`Invalid '${key}': expected ${expected}, got ${value}.`, key);
  return value;
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

function optionalString(body: Body, key: string): string | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") {
    throw invalid(`Invalid type for '${key}': expected a string, but got ${typeName(value)}.`, key);
  }
  return value;
}

function optionalBoolean(body: Body, key: string): boolean | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") {
    throw invalid(
      `Invalid type for '${key}': expected a boolean, but got ${typeName(value)}.`,
      key,
    );
  }
  return value;
}

const isCount = (v: number): boolean => Number.isSafeInteger(v) && v >= 1;

/** The most stop sequences a request may give, as OpenAI allows. */
export const MAX_STOP_SEQUENCES = 4;

function stopOf(body: Body): string[] {
  const stop = body["stop"];
  if (stop === undefined || stop === null) return [];
  const list = typeof stop === "string" ? [stop] : stop;
  if (!Array.isArray(list) || !list.every((entry) => typeof entry === "string")) {
    throw invalid("Invalid type for 'stop': expected a string or an array of strings.", "stop");
  }
  if (list.length > MAX_STOP_SEQUENCES) {
    throw invalid(
      `Invalid 'stop': array too long. Expected an array with maximum length ${MAX_STOP_SEQUENCES}, but got an array with length ${list.length} instead.`,
      "stop",
    );
  }
  return list.filter((entry) => entry !== "");
}

// A field OpenAI defines whose other values this server does not implement: refused, not ignored.
function onlyDefault(body: Body, key: string, isDefault: (value: unknown) => boolean): void {
  const value = body[key];
  if (value === undefined || value === null || isDefault(value)) return;
  throw invalid(`Unsupported value for '${key}': this server does not support it.`, key);
}

function sampling(body: Body, maxKeys: readonly string[]): GenerateOptions {
  let maxTokens: number | undefined;
  for (const key of maxKeys) {
    maxTokens = optionalNumber(body, key, isCount, "an integer >= 1") ?? maxTokens;
  }
  const temperature = optionalNumber(
    body,
    "temperature",
    (v) => v >= 0 && v <= 2,
    "a number from 0 to 2",
  );
  const topP = optionalNumber(body, "top_p", (v) => v > 0 && v <= 1, "a number in (0, 1]");
  const seed = optionalNumber(body, "seed", Number.isSafeInteger, "an integer");
  const n = optionalNumber(body, "n", isCount, "an integer >= 1");
  if (n !== undefined && n > 1) {
    throw invalid(
      `Invalid 'n': this server generates one choice per request (n = 1), got ${n}.`,
      "n",
    );
  }
  const user = optionalString(body, "user");
  for (const key of ["frequency_penalty", "presence_penalty"]) {
    onlyDefault(body, key, (v) => v === 0);
  }
  onlyDefault(
    body,
    "logit_bias",
    (v) => typeof v === "object" && Object.keys(v as object).length === 0,
  );
  return {
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(temperature === undefined ? {} : { temperature }),
    ...(topP === undefined ? {} : { topP }),
    ...(seed === undefined ? {} : { seed }),
    stop: stopOf(body),
    ...(user === undefined ? {} : { user }),
  };
}

/** How a generation request wants its answer. */
export interface Delivery {
  /** Whether to stream Server-Sent Events. */
  readonly stream: boolean;
  /** Whether a stream ends with a chunk holding `usage` (`stream_options.include_usage`). */
  readonly includeUsage: boolean;
}

function deliveryOf(body: Body): Delivery {
  const stream = optionalBoolean(body, "stream") ?? false;
  const options = body["stream_options"];
  if (options === undefined || options === null) return { stream, includeUsage: false };
  if (!stream) {
    throw invalid(
      "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
      "stream_options",
    );
  }
  if (typeof options !== "object" || Array.isArray(options)) {
    throw invalid("Invalid type for 'stream_options': expected an object.", "stream_options");
  }
  const record = options as Body;
  for (const key of Object.keys(record)) {
    if (key !== "include_usage") {
      throw invalid(
        `Unrecognized request argument supplied: stream_options.${key}`,
        `stream_options.${key}`,
      );
    }
  }
  const includeUsage = record["include_usage"] ?? false;
  if (typeof includeUsage !== "boolean") {
    throw invalid(
      "Invalid type for 'stream_options.include_usage': expected a boolean.",
      "stream_options.include_usage",
    );
  }
  return { stream, includeUsage };
}

/** A checked `/v1/chat/completions` request. */
export interface ChatRequest extends Delivery {
  /** The model named. */
  readonly model: string;
  /** The chat. */
  readonly messages: readonly ChatMessage[];
  /** Sampling and stop options. */
  readonly options: GenerateOptions;
}

const CHAT_FIELDS: ReadonlySet<string> = new Set([
  "model",
  "messages",
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "seed",
  "stop",
  "n",
  "user",
  "stream",
  "stream_options",
  "frequency_penalty",
  "presence_penalty",
  "logit_bias",
  "logprobs",
  "top_logprobs",
  "response_format",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "store",
  "metadata",
]);

/**
 * Checks a chat completion request.
 *
 * @param body The parsed body.
 * @returns The request.
 * @throws {OpenAIError} 400 naming the field at fault.
 *
 * @example A streamed chat request with usage; no messages refused
 * ```ts
 * import { chatRequestOf } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * const request = chatRequestOf({
 *   model: "m", messages: [{ role: "user", content: "Hi" }], max_completion_tokens: 8,
 *   stream: true, stream_options: { include_usage: true },
 * });
 * assert.deepEqual(request.options, { maxTokens: 8, stop: [] });
 * assert.equal(request.includeUsage, true);
 * assert.throws(() => chatRequestOf({ model: "m" }), /Missing required parameter: 'messages'/);
 * ```
 */
export function chatRequestOf(body: Body): ChatRequest {
  refuseUnknown(body, CHAT_FIELDS);
  const model = modelOf(body);
  const messages = messagesOf(required(body, "messages"));
  onlyDefault(body, "logprobs", (v) => v === false);
  onlyDefault(body, "top_logprobs", (v) => v === 0);
  onlyDefault(body, "response_format", (v) => (v as Body)?.["type"] === "text");
  onlyDefault(body, "tools", (v) => Array.isArray(v) && v.length === 0);
  onlyDefault(body, "tool_choice", (v) => v === "none");
  // Accepted and without effect here (no tools, nothing stored), but of OpenAI's types.
  optionalBoolean(body, "parallel_tool_calls");
  onlyDefault(body, "store", (v) => v === false);
  metadataOf(body);
  return {
    model,
    messages,
    options: sampling(body, ["max_tokens", "max_completion_tokens"]),
    ...deliveryOf(body),
  };
}

function metadataOf(body: Body): void {
  const metadata = body["metadata"];
  if (metadata === undefined || metadata === null) return;
  if (typeof metadata !== "object" || Array.isArray(metadata)) {
    throw invalid(
      `Invalid type for 'metadata': expected an object, but got ${typeName(metadata)}.`,
      "metadata",
    );
  }
  for (const [key, value] of Object.entries(metadata)) {
    if (typeof value !== "string") {
      throw invalid(
        `Invalid type for 'metadata.${key}': expected a string, but got ${typeName(value)}.`,
        `metadata.${key}`,
      );
    }
  }
}

function messagesOf(value: unknown): ChatMessage[] {
  try {
    return chatMessagesOf(value, "messages");
  } catch (error) {
    const message = (error as Error).message;
    const param = /'(messages[^']*)'/.exec(message)?.[1] ?? "messages";
    throw new OpenAIError(400, message, { param, cause: error });
  }
}

/** A checked `/v1/completions` request. */
export interface CompletionRequest extends Delivery {
  /** The model named. */
  readonly model: string;
  /** The prompt. */
  readonly prompt: string;
  /** Sampling and stop options. */
  readonly options: GenerateOptions;
}

const COMPLETION_FIELDS: ReadonlySet<string> = new Set([
  "model",
  "prompt",
  "max_tokens",
  "temperature",
  "top_p",
  "seed",
  "stop",
  "n",
  "user",
  "stream",
  "stream_options",
  "frequency_penalty",
  "presence_penalty",
  "logit_bias",
  "logprobs",
  "echo",
  "suffix",
  "best_of",
]);

/** `max_tokens` of a completion when the request gives none, as OpenAI's default. */
export const COMPLETION_DEFAULT_MAX_TOKENS = 16;

/**
 * Checks a (legacy) completion request.
 *
 * @param body The parsed body.
 * @returns The request; `max_tokens` defaults to 16, as on OpenAI.
 * @throws {OpenAIError} 400 naming the field at fault.
 *
 * @example A one-prompt list and the default token limit
 * ```ts
 * import { completionRequestOf } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * const request = completionRequestOf({ model: "m", prompt: ["Once upon"] });
 * assert.equal(request.prompt, "Once upon");
 * assert.equal(request.options.maxTokens, 16);
 * ```
 */
export function completionRequestOf(body: Body): CompletionRequest {
  refuseUnknown(body, COMPLETION_FIELDS);
  const model = modelOf(body);
  let prompt = required(body, "prompt");
  if (Array.isArray(prompt)) {
    if (prompt.length !== 1) {
      throw invalid(
        `Invalid 'prompt': this server completes one prompt per request, got ${prompt.length}.`,
        "prompt",
      );
    }
    prompt = prompt[0];
  }
  if (typeof prompt !== "string") {
    throw invalid(
      "Invalid type for 'prompt': expected a string (token arrays are not supported).",
      "prompt",
    );
  }
  onlyDefault(body, "logprobs", () => false);
  onlyDefault(body, "echo", (v) => v === false);
  onlyDefault(body, "suffix", (v) => v === "");
  onlyDefault(body, "best_of", (v) => v === 1);
  const options = sampling(body, ["max_tokens"]);
  return {
    model,
    prompt,
    options: { maxTokens: COMPLETION_DEFAULT_MAX_TOKENS, ...options },
    ...deliveryOf(body),
  };
}

/** A checked `/v1/embeddings` request. */
export interface EmbeddingRequest {
  /** The model named. */
  readonly model: string;
  /** The texts. */
  readonly input: readonly string[];
  /** How vectors are written: lists of numbers, or base64 of little-endian float32. */
  readonly encodingFormat: "float" | "base64";
  /** The vector length asked for, when given. */
  readonly dimensions?: number;
}

const EMBEDDING_FIELDS: ReadonlySet<string> = new Set([
  "model",
  "input",
  "encoding_format",
  "dimensions",
  "user",
]);

/** The most texts one embeddings request may hold, as OpenAI allows. */
export const MAX_EMBEDDING_INPUTS = 2048;

/**
 * Checks an embeddings request.
 *
 * @param body The parsed body.
 * @returns The request.
 * @throws {OpenAIError} 400 naming the field at fault.
 *
 * @example One text input; token arrays refused
 * ```ts
 * import { embeddingRequestOf } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(embeddingRequestOf({ model: "e", input: "hello" }), {
 *   model: "e", input: ["hello"], encodingFormat: "float",
 * });
 * assert.throws(() => embeddingRequestOf({ model: "e", input: [1, 2] }), /token arrays are not supported/);
 * ```
 */
export function embeddingRequestOf(body: Body): EmbeddingRequest {
  refuseUnknown(body, EMBEDDING_FIELDS);
  const model = modelOf(body);
  const raw = required(body, "input");
  const input = typeof raw === "string" ? [raw] : raw;
  if (!Array.isArray(input) || !input.every((text) => typeof text === "string")) {
    throw invalid(
      "Invalid type for 'input': expected a string or an array of strings (token arrays are not supported).",
      "input",
    );
  }
  if (input.length === 0 || input.length > MAX_EMBEDDING_INPUTS) {
    throw invalid(
      `Invalid 'input': expected 1 to ${MAX_EMBEDDING_INPUTS} texts, got ${input.length}.`,
      "input",
    );
  }
  if (input.some((text) => text === "")) {
    throw invalid("Invalid 'input': texts must not be empty.", "input");
  }
  const format = optionalString(body, "encoding_format") ?? "float";
  if (format !== "float" && format !== "base64") {
    throw invalid(
      `Invalid value for 'encoding_format': '${format}' is not one of float, base64.`,
      "encoding_format",
    );
  }
  optionalString(body, "user");
  const dimensions = optionalNumber(body, "dimensions", isCount, "an integer >= 1");
  return {
    model,
    input,
    encodingFormat: format,
    ...(dimensions === undefined ? {} : { dimensions }),
  };
}

/** Token counts of an answer. */
export interface Usage {
  /** The prompt's tokens. */
  readonly prompt_tokens: number;
  /** The answer's tokens. */
  readonly completion_tokens: number;
  /** Both. */
  readonly total_tokens: number;
}

/**
 * `usage` from the two counts.
 *
 * @param promptTokens The prompt's tokens.
 * @param completionTokens The answer's tokens.
 * @returns The usage object.
 */
export function usageOf(promptTokens: number, completionTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}

/** What every object of one answer shares: its id, time and model. */
export interface AnswerHead {
  /** `chatcmpl-...` or `cmpl-...`. */
  readonly id: string;
  /** Seconds since the epoch. */
  readonly created: number;
  /** The model named by the request. */
  readonly model: string;
}

/**
 * A new answer's head.
 *
 * @param prefix `chatcmpl` or `cmpl`.
 * @param model The model.
 * @returns The head, with a random id.
 */
export function answerHead(prefix: "chatcmpl" | "cmpl", model: string): AnswerHead {
  const id = crypto.randomUUID().replaceAll("-", "");
  return { id: `${prefix}-${id}`, created: Math.floor(Date.now() / 1000), model };
}

/** How a whole answer ended: why, and the tokens it took. */
export interface AnswerEnd {
  /** Why it ended. */
  readonly finishReason: FinishReason;
  /** Token counts. */
  readonly usage: Usage;
}

/**
 * The `chat.completion` object.
 *
 * @param head Id, time, model.
 * @param content The answer.
 * @param end Why it ended, and the token counts.
 * @returns The object.
 *
 * @example A whole answer
 * ```ts
 * import { chatCompletion } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * const usage = { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 };
 * const answer = chatCompletion({ id: "chatcmpl-1", created: 1, model: "m" }, "Hi", {
 *   finishReason: "stop",
 *   usage,
 * });
 * assert.deepEqual(answer, {
 *   id: "chatcmpl-1",
 *   object: "chat.completion",
 *   created: 1,
 *   model: "m",
 *   choices: [{
 *     index: 0,
 *     message: { role: "assistant", content: "Hi", refusal: null },
 *     logprobs: null,
 *     finish_reason: "stop",
 *   }],
 *   usage,
 * });
 * ```
 */
export function chatCompletion(head: AnswerHead, content: string, end: AnswerEnd): unknown {
  const { finishReason, usage } = end;
  return {
    id: head.id,
    object: "chat.completion",
    created: head.created,
    model: head.model,
    choices: [{
      index: 0,
      message: { role: "assistant", content, refusal: null },
      logprobs: null,
      finish_reason: finishReason,
    }],
    usage,
  };
}

/** What one chunk of a chat stream carries. */
export type ChatChunkPart =
  | { readonly kind: "role" }
  | { readonly kind: "content"; readonly content: string }
  | { readonly kind: "finish"; readonly finishReason: FinishReason }
  | { readonly kind: "usage"; readonly usage: Usage };

/**
 * One `chat.completion.chunk`, as OpenAI streams them: the first carries the role, the next
 * ones content, then one the `finish_reason`, and with `include_usage` every chunk has
 * `"usage": null` and a last one, with no choices, the usage.
 *
 * @param head Id, time, model.
 * @param part What the chunk carries.
 * @param includeUsage Whether the stream ends with usage.
 * @returns The object.
 *
 * @example A content chunk
 * ```ts
 * import { chatChunk } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * const head = { id: "chatcmpl-1", created: 1, model: "m" };
 * assert.equal(
 *   JSON.stringify(chatChunk(head, { kind: "content", content: "Hi" }, false)),
 *   '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}',
 * );
 * ```
 */
export function chatChunk(head: AnswerHead, part: ChatChunkPart, includeUsage: boolean): unknown {
  const choice = (delta: unknown, finishReason: FinishReason | null): unknown => ({
    index: 0,
    delta,
    logprobs: null,
    finish_reason: finishReason,
  });
  const choices = part.kind === "role"
    ? [choice({ role: "assistant", content: "", refusal: null }, null)]
    : part.kind === "content"
    ? [choice({ content: part.content }, null)]
    : part.kind === "finish"
    ? [choice({}, part.finishReason)]
    : [];
  return {
    id: head.id,
    object: "chat.completion.chunk",
    created: head.created,
    model: head.model,
    choices,
    ...(includeUsage ? { usage: part.kind === "usage" ? part.usage : null } : {}),
  };
}

/** Options of {@linkcode textCompletion}. */
export interface TextCompletionOptions {
  /**
   * Why it ended, or `null` while streaming.
   *
   * @default {null}
   */
  readonly finishReason?: FinishReason | null;
  /**
   * Token counts: whole answers always, chunks with `include_usage` (`null` but on the last);
   * absent, the object has no `usage`.
   */
  readonly usage?: Usage | null;
  /**
   * Whether the object has its choice (the usage chunk has none).
   *
   * @default {true}
   */
  readonly choices?: boolean;
}

/**
 * The `text_completion` object, whole or as a chunk of a stream (the same object with the text
 * so far; the last chunk has the `finish_reason`, and with `include_usage` a last one, with no
 * choices, the usage).
 *
 * @param head Id, time, model.
 * @param text The text (of this chunk).
 * @param options Why it ended, the token counts, and whether the object has its choice.
 * @returns The object.
 *
 * @example A streamed piece of text
 * ```ts
 * import { textCompletion } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   JSON.stringify(textCompletion({ id: "cmpl-1", created: 1, model: "m" }, " upon")),
 *   '{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":" upon","index":0,"logprobs":null,"finish_reason":null}]}',
 * );
 * ```
 */
export function textCompletion(
  head: AnswerHead,
  text: string,
  options: TextCompletionOptions = {},
): unknown {
  const { finishReason = null, usage, choices = true } = options;
  return {
    id: head.id,
    object: "text_completion",
    created: head.created,
    model: head.model,
    choices: choices ? [{ text, index: 0, logprobs: null, finish_reason: finishReason }] : [],
    ...(usage === undefined ? {} : { usage }),
  };
}

/** Options of {@linkcode embeddingList}. */
export interface EmbeddingListOptions {
  /**
   * `float` (lists of numbers) or `base64` (little-endian float32).
   *
   * @default {"float"}
   */
  readonly encodingFormat?: "float" | "base64";
  /** The texts' tokens. */
  readonly promptTokens: number;
}

/**
 * The answer of `/v1/embeddings`.
 *
 * @param model The model named.
 * @param vectors One vector per text.
 * @param options The encoding of the vectors and the texts' tokens.
 * @returns The object.
 *
 * @example An embedding as base64
 * ```ts
 * import { embeddingList } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * const list = embeddingList("e", [new Float32Array([1, 0.5])], {
 *   encodingFormat: "base64",
 *   promptTokens: 2,
 * }) as {
 *   data: { embedding: string }[];
 * };
 * assert.equal(list.data[0]!.embedding, "AACAPwAAAD8=");
 * ```
 */
export function embeddingList(
  model: string,
  vectors: readonly Float32Array[],
  options: EmbeddingListOptions,
): unknown {
  const { encodingFormat = "float", promptTokens } = options;
  return {
    object: "list",
    data: vectors.map((vector, index) => ({
      object: "embedding",
      index,
      embedding: encodingFormat === "float" ? Array.from(vector) : base64Of(vector),
    })),
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

function base64Of(vector: Float32Array): string {
  // Float32Array is host-endian; the wire is little-endian.
  const bytes = new Uint8Array(vector.length * 4);
  const view = new DataView(bytes.buffer);
  vector.forEach((value, index) => view.setFloat32(index * 4, value, true));
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** One model of `/v1/models`. */
export interface ModelEntry {
  /** The model's name. */
  readonly id: string;
  /** When it was bound (seconds since the epoch). */
  readonly created: number;
  /** Who owns it. */
  readonly ownedBy: string;
}

/**
 * A `model` object.
 *
 * @param entry The model.
 * @returns The object.
 */
export function modelObject(entry: ModelEntry): unknown {
  return { id: entry.id, object: "model", created: entry.created, owned_by: entry.ownedBy };
}

/**
 * The answer of `GET /v1/models`.
 *
 * @param entries The models.
 * @returns The object.
 *
 * @example List one model
 * ```ts
 * import { modelList } from "./wire.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(modelList([{ id: "m", created: 1, ownedBy: "me" }]), {
 *   object: "list",
 *   data: [{ id: "m", object: "model", created: 1, owned_by: "me" }],
 * });
 * ```
 */
export function modelList(entries: readonly ModelEntry[]): unknown {
  return { object: "list", data: entries.map(modelObject) };
}

/** The last event of every OpenAI stream. */
export const DONE_EVENT = "[DONE]";
