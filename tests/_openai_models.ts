/**
 * Deterministic models of the OpenAI front end's tests: `Fixed` (a generator of fixed tokens,
 * on the main thread or in a Worker), `Forever` (a generator that only ends when cancelled,
 * counting its running and cancelled streams) and `Letters` (an embedder of letter counts).
 *
 * @module
 */

import {
  type BindOptions,
  chatModel,
  type Embedding,
  embeddingModel,
  type GenerateRequest,
  type GenerateStep,
  workers,
} from "../mod.ts";

/** The tokens `Fixed` answers, one step each. */
export const FIXED_TOKENS: readonly string[] = ["Hello", ",", " world", "!"];

/**
 * The prompt's length as `Fixed` counts it: its words (the messages' contents, or the prompt).
 *
 * @param request The request.
 * @returns The count.
 */
export function promptWords(request: Pick<GenerateRequest, "messages" | "prompt">): number {
  const text = request.messages?.map((message) => message.content).join(" ") ?? request.prompt ??
    "";
  return text.split(/\s+/).filter((word) => word !== "").length;
}

/**
 * `Fixed`'s generator: the fixed tokens, the prompt's word count on the first.
 *
 * @param request The request.
 * @yields Each token.
 */
export function* fixedTokens(request: GenerateRequest): Generator<GenerateStep> {
  for (const [index, text] of FIXED_TOKENS.entries()) {
    yield index === 0 ? { text, promptTokens: promptWords(request) } : { text };
  }
}

/**
 * `Fixed` on the main thread, or in one Worker.
 *
 * @param where Where it runs.
 * @returns The bind options.
 */
export function fixedModel(where: "main" | "worker"): BindOptions {
  return chatModel({
    modelName: "Fixed",
    generate: where === "main"
      ? fixedTokens
      : workers(new URL("./_workers/openai_fixed.ts", import.meta.url), { count: 1 }),
  });
}

/** What `Forever` counts: streams started and streams ended (only a cancel ends one). */
export interface ForeverCounts {
  /** Streams started. */
  started: number;
  /** Streams ended: their signal aborted, or the engine returned their generator. */
  ended: number;
}

/**
 * `Forever`: one instance whose generator yields `"tick"` every 5 ms until its request is
 * cancelled, so only a cancelled stream frees it.
 *
 * @param counts Where it counts.
 * @returns The bind options.
 */
export function foreverModel(counts: ForeverCounts): BindOptions {
  return chatModel({
    modelName: "Forever",
    generate: async function* (request: GenerateRequest): AsyncGenerator<string> {
      counts.started++;
      try {
        while (!request.signal.aborted) {
          yield "tick";
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      } finally {
        counts.ended++;
      }
    },
  });
}

/**
 * `Letters`: 3-number vectors `[length, count of "a", 1]`, the text's words as its tokens.
 *
 * @param texts The texts.
 * @returns The vectors.
 */
export function letters(texts: readonly string[]): Embedding[] {
  return texts.map((text) => ({
    embedding: [text.length, [...text].filter((c) => c === "a").length, 1],
    tokens: text.split(/\s+/).filter((word) => word !== "").length,
  }));
}

/**
 * `Letters` as a model (batches of up to 4 texts).
 *
 * @returns The bind options.
 */
export function lettersModel(): BindOptions {
  return embeddingModel({
    modelName: "Letters",
    embed: letters,
    dimensions: 3,
    maxBatchSize: 4,
  });
}
