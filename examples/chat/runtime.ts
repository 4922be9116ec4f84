/**
 * SmolLM2 on llama.cpp through `node-llama-cpp` (pinned 3.21.1): one model and one context per
 * runtime, sized for its instance (a context of `contextSize` tokens and `threads` threads,
 * not the model's 8,192 tokens and every core). The server's Worker instances
 * (`smollm2_instance.ts`) and the benchmark's direct loop (`bench/chat.ts`) both run this class,
 * so they measure the same work.
 *
 * - Chat: the model's own chat template (the Jinja template in the GGUF, which adds SmolLM's
 *   system prompt when the chat has none), rendered by node-llama-cpp's
 *   `JinjaTemplateChatWrapper`; completions take the prompt as it is.
 * - Embeddings: a second copy of the model loaded with mean pooling (`llama.pooling_type`
 *   overridden to 1, MEAN, at load): the mean of the last layer's token states.
 *
 * @module
 */

import {
  type ChatHistoryItem,
  getLlama,
  JinjaTemplateChatWrapper,
  type Llama,
  LlamaChat,
  LlamaCompletion,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  LlamaLogLevel,
  type LlamaModel,
  type LlamaModelOptions,
} from "node-llama-cpp";
import type { Embedding, GenerateRequest, GenerateStep } from "../../mod.ts";

/** How a runtime is sized. */
export interface RuntimeOptions {
  /** The GGUF file. */
  modelPath: string;
  /**
   * The context, in tokens: the prompt and the answer together.
   *
   * @default {1024}
   */
  contextSize?: number;
  /**
   * llama.cpp's threads for this runtime.
   *
   * @default {1}
   */
  threads?: number;
}

/** SmolLM2-135M-Instruct's suggested sampling, used when a request sets none. */
export const DEFAULT_SAMPLING = { temperature: 0.2, topP: 0.9 } as const;

let llamaOnce: Promise<Llama> | undefined;

// One llama.cpp binding per isolate (each Worker has its own).
function llama(): Promise<Llama> {
  // gpu: false and build: "never": the prebuilt CPU binary, never a CUDA/Vulkan probe or a build.
  llamaOnce ??= getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  return llamaOnce;
}

/** Items pushed by callbacks, read as an async iterator. */
class Queue<T> {
  #items: T[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  #error: unknown;

  push(item: T): void {
    this.#items.push(item);
    this.#wake?.();
  }

  end(error?: unknown): void {
    this.#ended = true;
    this.#error = error;
    this.#wake?.();
  }

  async *drain(): AsyncGenerator<T> {
    while (true) {
      while (this.#items.length > 0) yield this.#items.shift()!;
      if (this.#ended) {
        if (this.#error !== undefined) throw this.#error;
        return;
      }
      await new Promise<void>((resolve) => this.#wake = resolve);
      this.#wake = undefined;
    }
  }
}

function historyOf(request: GenerateRequest): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = request.messages!.map((message): ChatHistoryItem => {
    switch (message.role) {
      case "system":
      case "developer":
        return { type: "system", text: message.content };
      case "assistant":
        return { type: "model", response: [message.content] };
      default:
        return { type: "user", text: message.content };
    }
  });
  history.push({ type: "model", response: [] });
  return history;
}

/** A loaded SmolLM2: generation and, when asked, embeddings. */
export class Smollm2Runtime {
  #model: LlamaModel;
  #sequence: LlamaContextSequence | undefined;
  #chat: LlamaChat | undefined;
  #completion: LlamaCompletion | undefined;
  #embedding: LlamaEmbeddingContext | undefined;

  private constructor(model: LlamaModel) {
    this.#model = model;
  }

  /**
   * Loads the model for generation.
   *
   * @param options File, context size and threads.
   * @returns The runtime.
   */
  static async generator(options: RuntimeOptions): Promise<Smollm2Runtime> {
    const model = await (await llama()).loadModel({ modelPath: options.modelPath });
    const runtime = new Smollm2Runtime(model);
    const context = await model.createContext({
      contextSize: options.contextSize ?? 1024,
      threads: options.threads ?? 1,
    });
    runtime.#sequence = context.getSequence();
    const template = model.fileInfo.metadata.tokenizer.chat_template;
    if (typeof template !== "string") throw new Error("The GGUF has no chat template");
    runtime.#chat = new LlamaChat({
      contextSequence: runtime.#sequence,
      chatWrapper: new JinjaTemplateChatWrapper({ template }),
      autoDisposeSequence: false,
    });
    runtime.#completion = new LlamaCompletion({ contextSequence: runtime.#sequence });
    return runtime;
  }

  /**
   * Loads the model for mean-pooled embeddings.
   *
   * @param options File, context size and threads.
   * @returns The runtime.
   */
  static async embedder(options: RuntimeOptions): Promise<Smollm2Runtime> {
    const model = await (await llama()).loadModel({
      modelPath: options.modelPath,
      // SmolLM2 is a causal LM whose GGUF names no pooling, so llama.cpp would take the last
      // token's state; 1 is llama.cpp's LLAMA_POOLING_TYPE_MEAN.
      // node-llama-cpp's types list the keys it reads itself; llama.cpp reads this one.
      metadataOverrides: { llama: { pooling_type: 1 } } as NonNullable<
        LlamaModelOptions["metadataOverrides"]
      >,
    });
    const runtime = new Smollm2Runtime(model);
    runtime.#embedding = await model.createEmbeddingContext({
      contextSize: options.contextSize ?? 512,
      threads: options.threads ?? 1,
    });
    return runtime;
  }

  /** The length of an embedding vector (the model's hidden size, 576). */
  get dimensions(): number {
    return this.#model.embeddingVectorSize;
  }

  /**
   * Generates the answer to a chat or a prompt, a step per piece of text.
   *
   * @param request The chat or prompt, options and signal.
   * @yields Each piece of text with its token count; the first carries the prompt's tokens.
   */
  async *generate(request: GenerateRequest): AsyncGenerator<GenerateStep> {
    const sequence = this.#sequence!;
    // Each request brings its whole chat: start from an empty context.
    await sequence.clearHistory();
    const queue = new Queue<GenerateStep>();
    let tokens = 0;
    let first = true;
    const promptTokens = request.messages === undefined
      ? this.#model.tokenize(request.prompt!).length
      : this.#chat!.chatWrapper.generateContextState({ chatHistory: historyOf(request) })
        .contextText.tokenize(this.#model.tokenizer).length;
    const options = {
      ...(request.maxTokens === undefined ? {} : { maxTokens: request.maxTokens }),
      temperature: request.temperature ?? DEFAULT_SAMPLING.temperature,
      topP: request.topP ?? DEFAULT_SAMPLING.topP,
      ...(request.seed === undefined ? {} : { seed: request.seed }),
      ...(request.stop.length === 0 ? {} : { customStopTriggers: [...request.stop] }),
      signal: request.signal,
      stopOnAbortSignal: true,
      onToken: (chunk: readonly unknown[]): void => {
        tokens += chunk.length;
      },
      onTextChunk: (text: string): void => {
        queue.push({ text, tokens, ...(first ? { promptTokens } : {}) });
        tokens = 0;
        first = false;
      },
    };
    const done = (async () => {
      const result = request.messages === undefined
        ? await this.#completion!.generateCompletionWithMeta(request.prompt!, options)
        : await this.#chat!.generateResponse(historyOf(request), options);
      return result.metadata.stopReason === "maxTokens" ? "length" : "stop";
    })();
    done.then(() => queue.end(), (error) => queue.end(error));
    yield* queue.drain();
    const finishReason = await done;
    // Tokens that gave no text yet (a partial character, a stop token) still count.
    yield { text: "", tokens, finishReason, ...(first ? { promptTokens } : {}) };
  }

  /**
   * Mean-pooled embeddings of texts.
   *
   * @param texts The texts.
   * @returns One vector per text, with its token count.
   */
  async embed(texts: readonly string[]): Promise<Embedding[]> {
    const results: Embedding[] = [];
    for (const text of texts) {
      const { vector } = await this.#embedding!.getEmbeddingFor(text);
      results.push({
        embedding: Float32Array.from(vector),
        tokens: this.#model.tokenize(text).length,
      });
    }
    return results;
  }

  /** Frees the model and its contexts. */
  async dispose(): Promise<void> {
    await this.#model.dispose();
  }
}
