/**
 * The instance module of the pipeline tests' Worker caller: the callable of
 * `_pipeline_models.ts` that calls another model (`context.infer`), run in a Worker.
 *
 * @module
 */

import type { InferFunc } from "../../mod.ts";
import { callerFunc } from "../_pipeline_models.ts";

/** The factory. */
export default function factory(): InferFunc {
  return callerFunc();
}
