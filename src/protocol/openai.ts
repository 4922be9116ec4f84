/**
 * The tensor contract between the OpenAI-compatible front end (`frontend/openai/`) and the models
 * that serve it (`chatModel()`, `embeddingModel()`): which inputs, outputs and request parameters
 * carry an OpenAI request to a model and its answer back. One set of rules for both sides, and the
 * reason such a model is an ordinary Triton model too: `/v2/models/<m>/generate_stream` with
 * `{"prompt": "Once upon", "max_tokens": 16}` reaches the same generator.
 *
 * - A text generation model is decoupled and unbatched. Inputs: `messages` (BYTES `[1]`, the
 *   chat as OpenAI's JSON array of messages) or `prompt` (BYTES `[1]`, raw text); each is
 *   optional, one of them is given. Request parameters: `max_tokens`, `temperature`, `top_p`,
 *   `seed`, `stop` (a JSON array of strings) and `user`. Each response is one step: `text`
 *   (BYTES `[1]`, the new text), `tokens` (INT32 `[1]`, how many tokens it is), `finish_reason`
 *   (BYTES `[1]`: `""`, `"stop"` or `"length"`) and `prompt_tokens` (INT32 `[1]`).
 * - An embedding model batches texts: input `input` (BYTES `[1]` per row, one text), outputs
 *   `embedding` (FP32 `[dimensions]`) and `tokens` (INT32 `[1]`) per row.
 *
 * @module
 */

import type { ParameterValue } from "../callable/types.ts";
import type { ModelInfo, OpenAIEndpoint, OpenAIServing } from "../config/model_info.ts";
import type { ResolvedTensorSpec, TensorSpec } from "../config/tensor_spec.ts";
import { InferenceError, TritonValidationError } from "../errors.ts";
import type { NDArray } from "../tensor/ndarray.ts";

/** What serving a model on the OpenAI API takes (`BindOptions.openai`). */
export interface OpenAIOptions {
  /**
   * The endpoints whose `model` may name it. A generation model serves `chat` and
   * `completions`, an embedding model `embeddings`.
   *
   * @default {the endpoints its tensors fit}
   */
  endpoints?: readonly OpenAIEndpoint[];
  /**
   * `owned_by` in `GET /v1/models`.
   *
   * @default {"denotriton"}
   */
  ownedBy?: string;
}

/** One message of a chat, as OpenAI's `messages` carry it (text content only). */
export interface ChatMessage {
  /** Who speaks. */
  readonly role: ChatRole;
  /** What was said. */
  readonly content: string;
  /** The speaker's name, when given. */
  readonly name?: string;
}

/** The roles a chat message may have. */
export type ChatRole = "system" | "developer" | "user" | "assistant" | "tool";

/** Every {@linkcode ChatRole}. */
export const CHAT_ROLES: readonly ChatRole[] = ["system", "developer", "user", "assistant", "tool"];

/** Why a generation ended. */
export type FinishReason = "stop" | "length";

/** The inputs of a text generation model. */
export const GENERATE_INPUTS = [
  { name: "messages", dtype: "bytes", shape: [1], optional: true },
  { name: "prompt", dtype: "bytes", shape: [1], optional: true },
] as const satisfies readonly TensorSpec[];

/** The outputs of each step of a text generation model. */
export const GENERATE_OUTPUTS = [
  { name: "text", dtype: "bytes", shape: [1] },
  { name: "tokens", dtype: "int32", shape: [1] },
  { name: "finish_reason", dtype: "bytes", shape: [1] },
  { name: "prompt_tokens", dtype: "int32", shape: [1] },
] as const satisfies readonly TensorSpec[];

/** The input of an embedding model (one text per batch row). */
export const EMBEDDING_INPUTS = [
  { name: "input", dtype: "bytes", shape: [1] },
] as const satisfies readonly TensorSpec[];

/**
 * The outputs of an embedding model per batch row, for vectors of `dimensions` numbers.
 *
 * @param dimensions The length of each vector.
 * @returns The output specs.
 */
export function embeddingOutputs(dimensions: number): readonly [
  { readonly name: "embedding"; readonly dtype: "float32"; readonly shape: readonly [number] },
  { readonly name: "tokens"; readonly dtype: "int32"; readonly shape: readonly [1] },
] {
  return [
    { name: "embedding", dtype: "float32", shape: [dimensions] },
    { name: "tokens", dtype: "int32", shape: [1] },
  ];
}

/** What a generation request asks, beside its messages or prompt. */
export interface GenerateOptions {
  /** The most tokens to generate. */
  readonly maxTokens?: number;
  /** Sampling temperature (0 picks the likeliest token). */
  readonly temperature?: number;
  /** Nucleus sampling: the probability mass to sample from. */
  readonly topP?: number;
  /** The sampler's seed, for repeatable answers. */
  readonly seed?: number;
  /** Strings that end the answer (not included in it). */
  readonly stop: readonly string[];
  /** The end user's id, as the client gave it. */
  readonly user?: string;
}

/** A generation request as the tensor contract carries it. */
export interface GenerateInput extends GenerateOptions {
  /** The chat (chat completions). */
  readonly messages?: readonly ChatMessage[];
  /** The raw prompt (completions). */
  readonly prompt?: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The request parameters that carry {@linkcode GenerateOptions}.
 *
 * @param options The options.
 * @returns The parameters (absent options are left out).
 *
 * @example A token limit and a stop list as parameters
 * ```ts
 * import { generateParameters } from "./openai.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(generateParameters({ maxTokens: 8, stop: ["\n"] }), {
 *   max_tokens: 8,
 *   stop: '["\\n"]',
 * });
 * ```
 */
export function generateParameters(options: GenerateOptions): Record<string, ParameterValue> {
  const parameters: Record<string, ParameterValue> = {};
  if (options.maxTokens !== undefined) parameters["max_tokens"] = options.maxTokens;
  if (options.temperature !== undefined) parameters["temperature"] = options.temperature;
  if (options.topP !== undefined) parameters["top_p"] = options.topP;
  if (options.seed !== undefined) parameters["seed"] = options.seed;
  if (options.stop.length > 0) parameters["stop"] = JSON.stringify(options.stop);
  if (options.user !== undefined) parameters["user"] = options.user;
  return parameters;
}

/**
 * One BYTES element of a UTF-8 string, shaped `[1]`.
 *
 * @param text The text.
 * @returns The element, for `ndarray([...], [1], { dtype: "bytes" })`.
 */
export function textElement(text: string): Uint8Array {
  return encoder.encode(text);
}

function numberParameter(
  parameters: Readonly<Record<string, ParameterValue>>,
  key: string,
  check: (value: number) => boolean,
  expected: string,
): number | undefined {
  const value = parameters[key];
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !check(value)) {
    throw InferenceError.invalidArg(
      `Invalid request parameter '${key}': expected ${expected}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function firstText(tensor: NDArray | undefined, name: string): string | undefined {
  if (tensor === undefined) return undefined;
  const element = (tensor.data as readonly Uint8Array[])[0];
  if (tensor.dtype !== "bytes" || element === undefined) {
    throw InferenceError.invalidArg(`Input '${name}' must hold one string`);
  }
  return decoder.decode(element);
}

/**
 * Checks the chat messages of a request, as the front end and a model both read them.
 *
 * @param value The parsed JSON.
 * @param where What to name in a message, e.g. `messages`.
 * @returns The messages.
 * @throws {InferenceError} (INVALID_ARG) Naming the first bad message and field.
 *
 * @example A user message passes, an unknown role is refused
 * ```ts
 * import { chatMessagesOf } from "./openai.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(chatMessagesOf([{ role: "user", content: "Hi" }], "messages"), [
 *   { role: "user", content: "Hi" },
 * ]);
 * assert.throws(() => chatMessagesOf([{ role: "robot", content: "Hi" }], "messages"), {
 *   message: "Invalid value for 'messages[0].role': 'robot' is not one of system, developer, user, assistant, tool",
 * });
 * ```
 */
export function chatMessagesOf(value: unknown, where: string): ChatMessage[] {
  if (!Array.isArray(value)) {
    throw InferenceError.invalidArg(`Invalid type for '${where}': expected an array of messages`);
  }
  if (value.length === 0) {
    throw InferenceError.invalidArg(
      `Invalid '${where}': empty array, expected at least one message`,
    );
  }
  return value.map((message: unknown, index): ChatMessage => {
    const at = `${where}[${index}]`;
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      throw InferenceError.invalidArg(`Invalid type for '${at}': expected an object`);
    }
    const { role, content, name } = message as Record<string, unknown>;
    if (role === undefined) {
      throw InferenceError.invalidArg(`Missing required parameter: '${at}.role'`);
    }
    if (typeof role !== "string" || !(CHAT_ROLES as readonly string[]).includes(role)) {
      throw InferenceError.invalidArg(
        `Invalid value for '${at}.role': ${
          typeof role === "string" ? `'${role}'` : JSON.stringify(role)
        } is not one of ${CHAT_ROLES.join(", ")}`,
      );
    }
    const text = contentText(content, `${at}.content`, role === "assistant");
    if (name !== undefined && typeof name !== "string") {
      throw InferenceError.invalidArg(`Invalid type for '${at}.name': expected a string`);
    }
    return {
      role: role as ChatRole,
      content: text,
      ...(name === undefined ? {} : { name }),
    };
  });
}

// Content is a string, or OpenAI's array of parts, of which text parts are supported.
function contentText(content: unknown, at: string, optional: boolean): string {
  if (typeof content === "string") return content;
  if ((content === undefined || content === null) && optional) return "";
  if (content === undefined) throw InferenceError.invalidArg(`Missing required parameter: '${at}'`);
  if (Array.isArray(content)) {
    return content.map((part: unknown, index) => {
      const record = typeof part === "object" && part !== null
        ? part as Record<string, unknown>
        : {};
      if (record["type"] !== "text" || typeof record["text"] !== "string") {
        throw InferenceError.invalidArg(
          `Invalid value for '${at}[${index}]': only parts of type 'text' are supported`,
        );
      }
      return record["text"];
    }).join("");
  }
  throw InferenceError.invalidArg(
    `Invalid type for '${at}': expected a string or an array of parts`,
  );
}

/**
 * Reads a generation request from a model's request: the `messages` or `prompt` input and the
 * parameters. What a model reads, whichever front end sent the request.
 *
 * @param inputs The request's `messages` and `prompt` tensors (either may be absent).
 * @param parameters The request parameters.
 * @returns The request.
 * @throws {InferenceError} (INVALID_ARG) For neither or both inputs, or a bad parameter.
 *
 * @example Read a prompt, its token limit and stop list
 * ```ts
 * import { readGenerateInput, textElement } from "./openai.ts";
 * import { type NDArray, ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const prompt = ndarray([textElement("Once upon")], [1], { dtype: "bytes" });
 * assert.deepEqual(readGenerateInput({ prompt }, { max_tokens: 4, stop: '["."]' }), {
 *   prompt: "Once upon",
 *   maxTokens: 4,
 *   stop: ["."],
 * });
 * ```
 */
export function readGenerateInput(
  inputs: { readonly messages?: NDArray | undefined; readonly prompt?: NDArray | undefined },
  parameters: Readonly<Record<string, ParameterValue>>,
): GenerateInput {
  const messagesText = firstText(inputs.messages, "messages");
  const prompt = firstText(inputs.prompt, "prompt");
  if ((messagesText === undefined) === (prompt === undefined)) {
    throw InferenceError.invalidArg(
      "A generation request needs one of the inputs 'messages' and 'prompt'",
    );
  }
  let messages: ChatMessage[] | undefined;
  if (messagesText !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(messagesText);
    } catch (error) {
      throw InferenceError.invalidArg(
        `Input 'messages' is not JSON: ${(error as Error).message}`,
      );
    }
    messages = chatMessagesOf(parsed, "messages");
  }
  const maxTokens = numberParameter(
    parameters,
    "max_tokens",
    (v) => Number.isSafeInteger(v) && v >= 1,
    "an integer >= 1",
  );
  const temperature = numberParameter(
    parameters,
    "temperature",
    (v) => v >= 0 && v <= 2,
    "a number from 0 to 2",
  );
  const topP = numberParameter(parameters, "top_p", (v) => v > 0 && v <= 1, "a number in (0, 1]");
  const seed = numberParameter(parameters, "seed", Number.isSafeInteger, "an integer");
  const user = parameters["user"];
  if (user !== undefined && typeof user !== "string") {
    throw InferenceError.invalidArg("Invalid request parameter 'user': expected a string");
  }
  return {
    ...(messages === undefined ? {} : { messages }),
    ...(prompt === undefined ? {} : { prompt }),
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(temperature === undefined ? {} : { temperature }),
    ...(topP === undefined ? {} : { topP }),
    ...(seed === undefined ? {} : { seed }),
    stop: stopOf(parameters["stop"]),
    ...(user === undefined ? {} : { user }),
  };
}

function stopOf(value: ParameterValue | undefined): string[] {
  if (value === undefined) return [];
  let parsed: unknown = value;
  if (typeof value === "string") {
    try {
      parsed = JSON.parse(value);
    } catch {
      // A plain string is one stop sequence (a KServe client writing it by hand).
      return [value];
    }
  }
  if (typeof parsed === "string") return [parsed];
  if (!Array.isArray(parsed) || !parsed.every((entry) => typeof entry === "string")) {
    throw InferenceError.invalidArg(
      "Invalid request parameter 'stop': expected a string or a JSON array of strings",
    );
  }
  return parsed;
}

/** One step of a generation, as its tensors carry it. */
export interface GenerateStepOutput {
  /** The new text. */
  readonly text: string;
  /** How many tokens the text is. */
  readonly tokens: number;
  /** Why the generation ended, on its last step. */
  readonly finishReason: FinishReason | undefined;
  /** The prompt's length in tokens (0 when the model does not say). */
  readonly promptTokens: number;
}

/**
 * Reads one step of a generation model's stream.
 *
 * @param outputs The step's outputs.
 * @returns The step.
 * @throws {InferenceError} (INTERNAL) When an output is missing or of the wrong dtype.
 *
 * @example Read one streamed step with its token counts
 * ```ts
 * import { readGenerateStep, textElement } from "./openai.ts";
 * import { type NDArray, ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const outputs = new Map<string, NDArray>([
 *   ["text", ndarray([textElement(" upon")], [1], { dtype: "bytes" })],
 *   ["tokens", ndarray(new Int32Array([1]), [1])],
 *   ["finish_reason", ndarray([textElement("")], [1], { dtype: "bytes" })],
 *   ["prompt_tokens", ndarray(new Int32Array([3]), [1])],
 * ]);
 * assert.deepEqual(readGenerateStep(outputs), {
 *   text: " upon", tokens: 1, finishReason: undefined, promptTokens: 3,
 * });
 * ```
 */
export function readGenerateStep(outputs: ReadonlyMap<string, NDArray>): GenerateStepOutput {
  const text = firstText(outputs.get("text"), "text");
  const reason = firstText(outputs.get("finish_reason"), "finish_reason");
  const tokens = outputs.get("tokens");
  const promptTokens = outputs.get("prompt_tokens");
  if (
    text === undefined || reason === undefined || tokens?.dtype !== "int32" ||
    promptTokens?.dtype !== "int32"
  ) {
    throw InferenceError.internal(
      "The model's step lacks an output of the generation contract (text, tokens, finish_reason, prompt_tokens)",
    );
  }
  if (reason !== "" && reason !== "stop" && reason !== "length") {
    throw InferenceError.internal(`The model's finish_reason '${reason}' is not stop or length`);
  }
  return {
    text,
    tokens: Number((tokens.data as Int32Array)[0] ?? 0),
    finishReason: reason === "" ? undefined : reason,
    promptTokens: Number((promptTokens.data as Int32Array)[0] ?? 0),
  };
}

function sameSpecs(
  declared: readonly ResolvedTensorSpec[],
  contract: readonly { name: string; dtype: string; shape: readonly number[] }[],
): boolean {
  return declared.length === contract.length && contract.every((spec, index) => {
    const other = declared[index]!;
    return other.name === spec.name && other.dtype === spec.dtype &&
      other.shape.length === spec.shape.length;
  });
}

/**
 * Checks that a model bound with `openai` follows the tensor contract of its endpoints, and
 * resolves its `/v1/models` entry.
 *
 * @param name The model's name.
 * @param options What `bind()` got as `openai`.
 * @param model The model's resolved tensors and config.
 * @returns How the model is served on the OpenAI API.
 * @throws {TritonValidationError} Naming what does not fit.
 *
 * @example Refuse a chat model without the chat tensors
 * ```ts
 * import { openAIServingOf } from "./openai.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.throws(() => openAIServingOf("M", { endpoints: ["chat"] }, {
 *   inputs: [], outputs: [], config: resolveModelConfig({}),
 * }), /Cannot bind model 'M': the OpenAI chat endpoint needs/);
 * ```
 */
export function openAIServingOf(
  name: string,
  options: OpenAIOptions,
  model: Pick<ModelInfo, "inputs" | "outputs" | "config">,
): OpenAIServing {
  const generation = sameSpecs(model.inputs, GENERATE_INPUTS) &&
    sameSpecs(model.outputs, GENERATE_OUTPUTS) && model.config.decoupled &&
    model.config.maxBatchSize === 1;
  const embedding = sameSpecs(model.inputs, EMBEDDING_INPUTS) &&
    sameSpecs(model.outputs, embeddingOutputs(model.outputs[0]?.shape[0] ?? 1)) &&
    !model.config.decoupled && model.config.maxBatchSize >= 1 &&
    (model.outputs[0]?.shape[0] ?? 0) > 0;
  const endpoints = options.endpoints ??
    (generation ? ["chat", "completions"] : embedding ? ["embeddings"] : []);
  if (endpoints.length === 0) {
    throw new TritonValidationError(
      `Cannot bind model '${name}': openai needs the tensors of chatModel() or embeddingModel()`,
    );
  }
  for (const endpoint of endpoints) {
    if (endpoint !== "chat" && endpoint !== "completions" && endpoint !== "embeddings") {
      throw new TritonValidationError(
        `Cannot bind model '${name}': unknown OpenAI endpoint '${endpoint}' (chat, completions, embeddings)`,
      );
    }
    const fits = endpoint === "embeddings" ? embedding : generation;
    if (!fits) {
      throw new TritonValidationError(
        `Cannot bind model '${name}': the OpenAI ${endpoint} endpoint needs the tensors and config of ${
          endpoint === "embeddings" ? "embeddingModel()" : "chatModel()"
        }`,
      );
    }
  }
  return Object.freeze({
    endpoints: Object.freeze([...new Set(endpoints)]),
    ownedBy: options.ownedBy ?? "denotriton",
    created: Math.floor(Date.now() / 1000),
  });
}
