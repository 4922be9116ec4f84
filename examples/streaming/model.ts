/**
 * A token-by-token text generator: a tiny deterministic bigram table (each word names the word
 * that follows it) continues a prompt one word per response, like an LLM streaming tokens.
 * Decoupled: each request yields any number of responses.
 *
 * @module
 */

import { type NDArray, ndarray, type Triton } from "../../mod.ts";

/** Which word follows which; generation stops at "." or after `max_tokens` words. */
export const BIGRAMS: Readonly<Record<string, string>> = {
  once: "upon",
  upon: "a",
  a: "time",
  time: "there",
  there: "was",
  was: "a",
  the: "model",
  model: "streamed",
  streamed: "every",
  every: "token",
  token: "to",
  to: "the",
  deno: "serves",
  serves: "the",
  hello: "world",
  world: ".",
};

/** The word generation starts from when the prompt's last word is not in the table. */
export const FALLBACK = "the";

/**
 * The words generated after `prompt`, at most `maxTokens` of them.
 *
 * @param prompt The prompt text.
 * @param maxTokens The most words to generate.
 * @returns The generated words.
 */
export function* generateWords(prompt: string, maxTokens: number): Generator<string> {
  let word = prompt.trim().toLowerCase().split(/\s+/).at(-1) ?? "";
  for (let i = 0; i < maxTokens; i++) {
    word = BIGRAMS[word] ?? FALLBACK;
    yield word;
    if (word === ".") return;
  }
}

const decoder = new TextDecoder();

/**
 * Binds `Generator`: input `prompt` (BYTES, one string), optional parameter `max_tokens`
 * (default 8); one response per word, output `token` (BYTES, one string). A client that
 * disconnects stops the generation (`request.signal`).
 *
 * @param triton The server.
 * @returns A promise that settles when the model is loaded.
 */
export function bindStreaming(triton: Triton): Promise<void> {
  return triton.bind({
    modelName: "Generator",
    inferFunc: async function* ([request]): AsyncGenerator<{ token: NDArray<"bytes"> }[]> {
      // Unbatched: one request per call.
      if (request === undefined) return;
      const prompt = decoder.decode(request.prompt.data[0]);
      const max = request.parameters.max_tokens;
      const maxTokens = typeof max === "number" && max >= 0 ? max : 8;
      for (const word of generateWords(prompt, maxTokens)) {
        if (request.signal.aborted) return;
        // A real model would compute here; yielding to the event loop lets responses flow.
        await new Promise((resolve) => setTimeout(resolve, 1));
        yield [{ token: ndarray([word], [1]) }];
      }
    },
    inputs: [{ name: "prompt", dtype: "bytes", shape: [1] }],
    outputs: [{ name: "token", dtype: "bytes", shape: [1] }],
    config: { decoupled: true, batching: false },
    strict: true,
  });
}
