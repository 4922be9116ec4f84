/**
 * The per-model execution timeout (`ModelConfig.executionTimeoutS`), shared by main-thread and
 * Worker instances so that both engines fail a hung batch the same way.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import type { ModelInfo } from "../config/model_info.ts";

/**
 * The error a batch fails with when it outlives the model's execution timeout.
 *
 * @example Message and code
 * ```ts
 * import { executionTimeoutError } from "./_deadline.ts";
 * import { resolveModelConfig } from "../config/model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "Slow", version: 1, strict: false, inputs: [], outputs: [],
 *   config: resolveModelConfig({ executionTimeoutS: 2 }),
 * };
 * const error = executionTimeoutError(model, 0);
 * assert.equal(error.code, "UNAVAILABLE");
 * assert.equal(
 *   error.message,
 *   "Model 'Slow' version 1 did not finish within its execution timeout of 2 s (instance 0)",
 * );
 * ```
 *
 * @param model The model.
 * @param index The instance index.
 * @returns An UNAVAILABLE `InferenceError`.
 */
export function executionTimeoutError(model: ModelInfo, index: number): InferenceError {
  return InferenceError.unavailable(
    `Model '${model.name}' version ${model.version} did not finish within its execution timeout of ${model.config.executionTimeoutS} s (instance ${index})`,
  );
}

/**
 * Settles like `work`, or rejects with `onTimeout()`'s error once the model's execution timeout
 * passes first (never without a timeout). A late outcome of `work` is dropped, not reported.
 *
 * @example No timeout configured
 * ```ts
 * import { withDeadline } from "./_deadline.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(await withDeadline(Promise.resolve(7), 0, () => new Error("late")), 7);
 * await assert.rejects(
 *   withDeadline(new Promise(() => {}), 0.01, () => new Error("late")),
 *   /late/,
 * );
 * ```
 *
 * @param work The batch.
 * @param seconds The timeout; 0 for none.
 * @param onTimeout Called once the timeout passed; returns the error to reject with.
 * @returns The outcome of `work`.
 */
export function withDeadline<T>(
  work: Promise<T>,
  seconds: number,
  onTimeout: () => Error,
): Promise<T> {
  if (seconds <= 0) return work;
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      reject(onTimeout());
    }, seconds * 1000);
    work.then(
      (value) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
