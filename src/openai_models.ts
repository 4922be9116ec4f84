/**
 * Models served on the OpenAI API: `chatModel()` binds a text generator for
 * `/v1/chat/completions` and `/v1/completions`, `embeddingModel()` an embedder for
 * `/v1/embeddings`. Each is an ordinary model of the tensor contract in `protocol/openai.ts`
 * (so KServe clients reach it too), written as a typed function: `generateFunc()` and
 * `embedFunc()` turn those functions into the inference callables, on the main thread or in a
 * Worker's module.
 *
 * @module
 */

import type { BindOptions } from "./bind.ts";
import type { InferFunc, InferResult, TensorsOf } from "./callable/types.ts";
import type { TritonContext } from "./callable/context.ts";
import type { ModelConfig } from "./config/model_config.ts";
import { TritonValidationError } from "./errors.ts";
import type { InstanceProvider } from "./instances/instance.ts";
import {
  EMBEDDING_INPUTS,
  embeddingOutputs,
  type FinishReason,
  GENERATE_INPUTS,
  GENERATE_OUTPUTS,
  type GenerateInput,
  type OpenAIOptions,
  readGenerateInput,
  textElement,
} from "./protocol/openai.ts";
import { ndarray } from "./tensor/ndarray.ts";

export type {
  ChatMessage,
  ChatRole,
  FinishReason,
  GenerateInput,
  GenerateOptions,
  OpenAIOptions,
} from "./protocol/openai.ts";
export type { OpenAIEndpoint } from "./config/model_info.ts";

/** What a generator gets: the chat or the prompt, the sampling options and the signal. */
export interface GenerateRequest extends GenerateInput {
  /** Aborted when the client goes away, or the front end has what it needs (a stop string). */
  readonly signal: AbortSignal;
}

/** One step of a generation: its text, and optionally what it counts. */
export interface GenerateStep {
  /** The new text (a token's, or several). */
  readonly text: string;
  /**
   * How many tokens `text` is.
   *
   * @default {1}
   */
  readonly tokens?: number;
  /**
   * Why the generation ends here. A generator that just returns ends with `"stop"`; the front
   * end ends it with `"length"` once `maxTokens` tokens came.
   *
   * @default {undefined}
   */
  readonly finishReason?: FinishReason;
  /**
   * The prompt's length in tokens, for `usage` (once is enough; the last one given counts).
   *
   * @default {0}
   */
  readonly promptTokens?: number;
}

/**
 * A text generator: yields the answer step by step (a string is a step of one token).
 *
 * @param request The chat or prompt, options and signal.
 * @param context The model and instance it runs on.
 */
export type GenerateFunc = (
  request: GenerateRequest,
  context: TritonContext,
) => AsyncIterable<GenerateStep | string> | Iterable<GenerateStep | string>;

/** The inputs of a generation model. */
export type GenerateTensors = TensorsOf<typeof GENERATE_INPUTS>;
/** The outputs of each step of a generation model. */
export type GenerateStepTensors = TensorsOf<typeof GENERATE_OUTPUTS>;

/**
 * Turns a typed generator into the inference callable of a generation model (a Worker
 * module's factory returns this).
 *
 * @param generate The generator.
 * @returns The callable: one request per call, one response per step.
 *
 * @example A Worker module
 * ```ts ignore
 * import { generateFunc, type WorkerContext } from "jsr:@denotriton/triton";
 *
 * export default async (ctx: WorkerContext) => {
 *   const model = await loadMyModel(ctx.data);
 *   return generateFunc(async function* (request) {
 *     for await (const token of model.generate(request.messages ?? request.prompt)) yield token;
 *   });
 * };
 * ```
 */
export function generateFunc(
  generate: GenerateFunc,
): InferFunc<GenerateTensors, GenerateStepTensors, InferResult<GenerateStepTensors>> {
  return async function* (requests, context): AsyncGenerator<InferResult<GenerateStepTensors>[]> {
    // maxBatchSize is 1: each call carries one request (one stream).
    const [request] = requests;
    if (request === undefined) return;
    const input = readGenerateInput(request.data, request.parameters);
    let promptTokens = 0;
    for await (const step of generate({ ...input, signal: request.signal }, context)) {
      if (request.signal.aborted) return;
      const { text, tokens = 1, finishReason, promptTokens: prompt } = typeof step === "string"
        ? { text: step } as GenerateStep
        : step;
      if (prompt !== undefined) promptTokens = prompt;
      yield [stepTensors(text, tokens, finishReason, promptTokens)];
      if (finishReason !== undefined) return;
    }
  };
}

function stepTensors(
  text: string,
  tokens: number,
  finishReason: FinishReason | undefined,
  promptTokens: number,
): InferResult<GenerateStepTensors> {
  // Each row is the request's batch of one.
  return {
    text: ndarray([textElement(text)], [1, 1], { dtype: "bytes" }),
    tokens: ndarray(new Int32Array([tokens]), [1, 1]),
    finish_reason: ndarray([textElement(finishReason ?? "")], [1, 1], { dtype: "bytes" }),
    prompt_tokens: ndarray(new Int32Array([promptTokens]), [1, 1]),
  };
}

/** The model config a generation or embedding model takes (batching is fixed by its kind). */
export type OpenAIModelConfig = Omit<ModelConfig, "batching" | "maxBatchSize" | "decoupled">;

/** Options of {@linkcode chatModel}. */
export interface ChatModelOptions {
  /** The name clients pass as `model`. */
  modelName: string;
  /**
   * Model version.
   *
   * @default {1}
   */
  modelVersion?: number;
  /**
   * The generator, one per instance (a list), or instances such as `workers(module)` whose
   * module's factory returns `generateFunc(...)`.
   */
  generate: GenerateFunc | readonly GenerateFunc[] | InstanceProvider;
  /**
   * The endpoints and `/v1/models` entry.
   *
   * @default {{ endpoints: ["chat", "completions"] }}
   */
  openai?: OpenAIOptions;
  /**
   * Queue policies, priorities, timeouts, warm-up: every model setting but batching, which is one
   * stream per batch (instances run streams side by side).
   *
   * @default {{}}
   */
  config?: OpenAIModelConfig;
}

function isProvider(value: unknown): value is InstanceProvider {
  return typeof value === "object" && value !== null && "start" in value && "count" in value;
}

/**
 * A text generation model for `/v1/chat/completions` and `/v1/completions` (and KServe's
 * `generate_stream`): decoupled, one stream per batch, so the dynamic batcher's queue policies,
 * priorities, statistics and metrics apply as to any model.
 *
 * @param options Name, generator(s) or instances, endpoints and config.
 * @returns What `bind()` takes.
 *
 * @example Serve a generator and call it with `fetch`
 * ```ts
 * import { chatModel, Triton } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * await using triton = await Triton.start({
 *   engine: "builtin",
 *   config: { httpPort: 0, allowGrpc: false, allowMetrics: false },
 *   models: [chatModel({
 *     modelName: "Echo",
 *     generate: function* (request) {
 *       for (const word of (request.messages?.at(-1)?.content ?? "").split(" ")) yield word;
 *     },
 *   })],
 * });
 * const response = await fetch(`${triton.urls.http}/v1/chat/completions`, {
 *   method: "POST",
 *   body: JSON.stringify({ model: "Echo", messages: [{ role: "user", content: "a b" }] }),
 * });
 * const answer = await response.json();
 * assert.equal(answer.choices[0].message.content, "ab");
 * assert.deepEqual(answer.usage, { prompt_tokens: 0, completion_tokens: 2, total_tokens: 2 });
 * ```
 */
export function chatModel(
  options: ChatModelOptions,
): BindOptions<typeof GENERATE_INPUTS, typeof GENERATE_OUTPUTS> {
  const { generate } = options;
  const callables = isProvider(generate)
    ? generate
    : (Array.isArray(generate) ? generate : [generate as GenerateFunc]).map((fn) => {
      if (typeof fn !== "function") {
        throw new TritonValidationError(
          `Cannot bind model '${options.modelName}': generate must be a function, a list of them or instances`,
        );
      }
      return generateFunc(fn);
    });
  return {
    modelName: options.modelName,
    ...(options.modelVersion === undefined ? {} : { modelVersion: options.modelVersion }),
    inferFunc: callables,
    inputs: GENERATE_INPUTS,
    outputs: GENERATE_OUTPUTS,
    config: { ...options.config, decoupled: true, batching: true, maxBatchSize: 1 },
    openai: { endpoints: ["chat", "completions"], ...options.openai },
  };
}

/** What an embedder gives back for one text. */
export interface Embedding {
  /** The vector, `dimensions` long. */
  readonly embedding: Float32Array | readonly number[];
  /** How many tokens the text was. */
  readonly tokens: number;
}

/**
 * An embedder: one vector per text, in order. The texts may come from several requests the
 * dynamic batcher put together.
 *
 * @param texts The texts.
 * @param context The model and instance it runs on.
 */
export type EmbedFunc = (
  texts: readonly string[],
  context: TritonContext,
) => readonly Embedding[] | Promise<readonly Embedding[]>;

/** The inputs of an embedding model. */
export type EmbeddingTensors = TensorsOf<typeof EMBEDDING_INPUTS>;
/** The outputs of an embedding model. */
export type EmbeddingResultTensors = TensorsOf<ReturnType<typeof embeddingOutputs>>;

const decoder = new TextDecoder();

/**
 * Turns a typed embedder into the inference callable of an embedding model (a Worker module's
 * factory returns this).
 *
 * @param embed The embedder.
 * @returns The callable: every text of the batch in one call.
 */
export function embedFunc(
  embed: EmbedFunc,
): InferFunc<EmbeddingTensors, EmbeddingResultTensors, InferResult<EmbeddingResultTensors>> {
  return async (requests, context) => {
    const texts = requests.flatMap((request) =>
      request.data.input.data.map((t) => decoder.decode(t))
    );
    const vectors = await embed(texts, context);
    if (vectors.length !== texts.length) {
      throw new TritonValidationError(
        `The embedder gave ${vectors.length} vectors for ${texts.length} texts`,
      );
    }
    const dimensions = context.model.outputs[0]!.shape[0]!;
    let next = 0;
    return requests.map((request) => {
      const rows = request.data.input.shape[0]!;
      const embedding = new Float32Array(rows * dimensions);
      const tokens = new Int32Array(rows);
      for (let row = 0; row < rows; row++, next++) {
        const vector = vectors[next]!;
        if (vector.embedding.length !== dimensions) {
          throw new TritonValidationError(
            `The embedder gave a vector of ${vector.embedding.length} numbers; the model declares ${dimensions}`,
          );
        }
        embedding.set(vector.embedding, row * dimensions);
        tokens[row] = vector.tokens;
      }
      return {
        embedding: ndarray(embedding, [rows, dimensions]),
        tokens: ndarray(tokens, [rows, 1]),
      };
    });
  };
}

/** Options of {@linkcode embeddingModel}. */
export interface EmbeddingModelOptions {
  /** The name clients pass as `model`. */
  modelName: string;
  /**
   * Model version.
   *
   * @default {1}
   */
  modelVersion?: number;
  /** The embedder, one per instance (a list), or instances whose factory returns `embedFunc(...)`. */
  embed: EmbedFunc | readonly EmbedFunc[] | InstanceProvider;
  /** The length of each vector. */
  dimensions: number;
  /**
   * The most texts in one batch; a request with more is split into batches of this size.
   *
   * @default {32}
   */
  maxBatchSize?: number;
  /**
   * The `/v1/models` entry.
   *
   * @default {{ endpoints: ["embeddings"] }}
   */
  openai?: OpenAIOptions;
  /**
   * Every model setting but batching (the batcher's queue delay, policies, ...).
   *
   * @default {{}}
   */
  config?: OpenAIModelConfig;
}

/**
 * An embedding model for `/v1/embeddings`: texts are batch rows, so the dynamic batcher puts
 * several requests' texts into one call.
 *
 * @param options Name, embedder(s) or instances, dimensions and batching.
 * @returns What `bind()` takes.
 *
 * @example Text lengths as a two-dimensional embedding
 * ```ts
 * import { embeddingModel } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const model = embeddingModel({
 *   modelName: "Lengths",
 *   embed: (texts) => texts.map((text) => ({ embedding: [text.length, 1], tokens: 1 })),
 *   dimensions: 2,
 * });
 * assert.deepEqual(model.outputs[0], { name: "embedding", dtype: "float32", shape: [2] });
 * ```
 */
export function embeddingModel(
  options: EmbeddingModelOptions,
): BindOptions<typeof EMBEDDING_INPUTS, ReturnType<typeof embeddingOutputs>> {
  const { embed, dimensions } = options;
  if (!Number.isSafeInteger(dimensions) || dimensions < 1) {
    throw new TritonValidationError(
      `Cannot bind model '${options.modelName}': dimensions must be an integer >= 1, got ${dimensions}`,
    );
  }
  const callables = isProvider(embed)
    ? embed
    : (Array.isArray(embed) ? embed : [embed as EmbedFunc]).map((fn) => embedFunc(fn));
  return {
    modelName: options.modelName,
    ...(options.modelVersion === undefined ? {} : { modelVersion: options.modelVersion }),
    inferFunc: callables,
    inputs: EMBEDDING_INPUTS,
    outputs: embeddingOutputs(dimensions),
    config: { ...options.config, batching: true, maxBatchSize: options.maxBatchSize ?? 32 },
    openai: { endpoints: ["embeddings"], ...options.openai },
  };
}
