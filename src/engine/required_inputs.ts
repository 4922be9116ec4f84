/**
 * The rule both engines hold a request to before a model's code sees it: every input the model
 * does not declare optional is there. The built-in engine checks it with the rest of a request
 * (`builtin/request_validation.ts`); the Triton core checks only how many inputs came when a
 * model has optional ones, so the Triton engine's backend half checks it (`native/backend_bridge.ts`)
 * before it calls the model, for requests from every thread.
 *
 * @module
 */

import type { ModelInfo } from "../config/model_info.ts";
import { InferenceError } from "../errors.ts";

/**
 * Refuses a request that lacks an input its model needs.
 *
 * @param model The model.
 * @param has Whether the request has an input of that name.
 * @throws {InferenceError} (INVALID_ARG) Naming the missing inputs.
 *
 * @example An optional input may be missing, a required one may not
 * ```ts
 * import { refuseMissingInputs } from "./required_inputs.ts";
 * import type { ModelInfo } from "../config/model_info.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "m",
 *   inputs: [{ name: "x", optional: false }, { name: "flag", optional: true }],
 * } as unknown as ModelInfo;
 * refuseMissingInputs(model, (name) => name === "x");
 * assert.throws(
 *   () => refuseMissingInputs(model, (name) => name === "flag"),
 *   /^InferenceError: Invalid request for model 'm': missing required input 'x'$/,
 * );
 * ```
 */
export function refuseMissingInputs(model: ModelInfo, has: (name: string) => boolean): void {
  const missing = model.inputs.filter((spec) => !spec.optional && !has(spec.name));
  if (missing.length === 0) return;
  throw InferenceError.invalidArg(
    `Invalid request for model '${model.name}': missing required input${
      missing.length > 1 ? "s" : ""
    } ${missing.map((spec) => `'${spec.name}'`).join(", ")}`,
  );
}
