/**
 * SmolLM2-135M-Instruct on the OpenAI API: `SmolLM2` (chat and completions) and `SmolLM2-embed`
 * (mean-pooled embeddings), each on its own Worker instances running llama.cpp through
 * node-llama-cpp (`smollm2_instance.ts`).
 *
 * @module
 */

import { chatModel, embeddingModel, type Triton, workers } from "../../mod.ts";
import { findSmollm2 } from "./smollm2.ts";
import type { Smollm2InstanceData } from "./smollm2_instance.ts";

/** The chat model's name. */
export const CHAT_MODEL = "SmolLM2";
/** The embedding model's name. */
export const EMBEDDING_MODEL = "SmolLM2-embed";
/** The length of SmolLM2-135M's vectors (its hidden size). */
export const EMBEDDING_DIMENSIONS = 576;

/** Options of {@linkcode bindSmollm2}. */
export interface Smollm2Options {
  /**
   * Worker instances of the chat model (each runs one stream at a time).
   *
   * @default {the cores, at most 2}
   */
  instances?: number;
  /**
   * llama.cpp threads per instance.
   *
   * @default {the cores divided among the instances, at least 1}
   */
  threads?: number;
  /**
   * Each chat instance's context in tokens (prompt and answer).
   *
   * @default {1024}
   */
  contextSize?: number;
  /**
   * Also bind the embedding model (one more Worker).
   *
   * @default {true}
   */
  embeddings?: boolean;
}

/**
 * Binds SmolLM2 on a server.
 *
 * @param triton The server.
 * @param options Instances, threads, context and embeddings.
 * @returns A promise that settles when the models are bound (loaded, when the server runs).
 */
export async function bindSmollm2(triton: Triton, options: Smollm2Options = {}): Promise<void> {
  const modelPath = await findSmollm2();
  const cores = navigator.hardwareConcurrency;
  const instances = options.instances ?? Math.min(2, cores);
  const threads = options.threads ?? Math.max(1, Math.floor(cores / instances));
  const module = new URL("./smollm2_instance.ts", import.meta.url);
  const generate: Smollm2InstanceData = {
    kind: "generate",
    modelPath,
    contextSize: options.contextSize ?? 1024,
    threads,
  };
  await triton.bind(chatModel({
    modelName: CHAT_MODEL,
    generate: workers(module, { count: instances, data: generate }),
  }));
  if (options.embeddings ?? true) {
    const embed: Smollm2InstanceData = { kind: "embed", modelPath, contextSize: 512, threads };
    await triton.bind(embeddingModel({
      modelName: EMBEDDING_MODEL,
      embed: workers(module, { count: 1, data: embed }),
      dimensions: EMBEDDING_DIMENSIONS,
      maxBatchSize: 16,
    }));
  }
}
