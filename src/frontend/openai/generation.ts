/**
 * One generation, from a model's steps to the text an OpenAI answer carries: the rules every
 * generation model gets for free, whatever it does itself. `max_tokens` ends the answer with
 * `"length"` once that many tokens came; a `stop` string ends it with `"stop"` and is not sent
 * (text that may be the start of one is held back until it is not); a model that just ends
 * finishes with `"stop"`. Ending early stops reading the engine's stream, which cancels the
 * request, so the instance is free at its next step.
 *
 * @module
 */

import type { StreamResponse } from "../../engine/engine.ts";
import {
  type FinishReason,
  type GenerateOptions,
  readGenerateStep,
} from "../../protocol/openai.ts";
import { type Usage, usageOf } from "./wire.ts";
import { hostTensors } from "../../tensor/device_tensor.ts";

/** What a generation yields: text as it may be sent, then its end. */
export type GenerationEvent =
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "end"; readonly finishReason: FinishReason; readonly usage: Usage };

/**
 * The length of the longest end of `text` that begins one of `stops` (and may become it).
 *
 * @param text The text not sent yet.
 * @param stops The stop strings.
 * @returns How many characters to hold back.
 *
 * @example Hold back the start of a stop sequence
 * ```ts
 * import { heldBack } from "./generation.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(heldBack("Hello wor", ["world"]), 3);
 * assert.equal(heldBack("Hello", ["world"]), 0);
 * ```
 */
export function heldBack(text: string, stops: readonly string[]): number {
  let longest = 0;
  for (const stop of stops) {
    for (let length = Math.min(stop.length - 1, text.length); length > longest; length--) {
      if (text.endsWith(stop.slice(0, length))) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}

/**
 * Runs a generation over a model's steps.
 *
 * @param steps The engine's stream for the request.
 * @param options The request's `maxTokens` and `stop`.
 * @returns The text to send, in pieces, then the end with usage.
 *
 * @example A stop string in the middle of a step
 * ```ts
 * import { generation } from "./generation.ts";
 * import { textElement } from "../../protocol/openai.ts";
 * import { type NDArray, ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const step = (text: string) => ({
 *   modelName: "m", modelVersion: "1", final: false,
 *   outputs: new Map<string, NDArray>([
 *     ["text", ndarray([textElement(text)], [1, 1], { dtype: "bytes" })],
 *     ["tokens", ndarray(new Int32Array([1]), [1, 1])],
 *     ["finish_reason", ndarray([textElement("")], [1, 1], { dtype: "bytes" })],
 *     ["prompt_tokens", ndarray(new Int32Array([2]), [1, 1])],
 *   ]),
 * });
 * async function* steps() {
 *   yield step("Hello");
 *   yield step(" wor");
 *   yield step("ld. Bye");
 * }
 * const events = await Array.fromAsync(generation(steps(), { stop: ["."] }));
 * assert.deepEqual(events, [
 *   { kind: "text", text: "Hello" },
 *   { kind: "text", text: " wor" },
 *   { kind: "text", text: "ld" },
 *   { kind: "end", finishReason: "stop", usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 } },
 * ]);
 * ```
 */
export async function* generation(
  steps: AsyncIterable<StreamResponse>,
  options: Pick<GenerateOptions, "maxTokens" | "stop">,
): AsyncGenerator<GenerationEvent, void, undefined> {
  const { maxTokens, stop } = options;
  let pending = "";
  let promptTokens = 0;
  let completionTokens = 0;
  let finishReason: FinishReason | undefined;
  // Leaving this loop early (a stop string, max_tokens) returns the engine's stream: cancelled.
  for await (const response of steps) {
    // A final response without outputs is Triton's flags-only final: nothing to read.
    if (response.final && response.outputs.size === 0) break;
    const step = readGenerateStep(hostTensors(response.outputs));
    promptTokens = step.promptTokens || promptTokens;
    completionTokens += step.tokens;
    pending += step.text;
    const at = stop.length === 0 ? -1 : firstStop(pending, stop);
    if (at >= 0) {
      if (at > 0) yield { kind: "text", text: pending.slice(0, at) };
      pending = "";
      finishReason = "stop";
      break;
    }
    const keep = heldBack(pending, stop);
    if (pending.length > keep) {
      yield { kind: "text", text: pending.slice(0, pending.length - keep) };
      pending = pending.slice(pending.length - keep);
    }
    if (step.finishReason !== undefined) {
      finishReason = step.finishReason;
      break;
    }
    if (maxTokens !== undefined && completionTokens >= maxTokens) {
      finishReason = "length";
      break;
    }
  }
  if (pending !== "") yield { kind: "text", text: pending };
  yield {
    kind: "end",
    finishReason: finishReason ?? "stop",
    usage: usageOf(promptTokens, completionTokens),
  };
}

function firstStop(text: string, stops: readonly string[]): number {
  let first = -1;
  for (const stop of stops) {
    const at = text.indexOf(stop);
    if (at >= 0 && (first < 0 || at < first)) first = at;
  }
  return first;
}
