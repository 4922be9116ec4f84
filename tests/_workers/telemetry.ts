/**
 * The Worker instance module of the telemetry tests: the callable of `_telemetry_model.ts`.
 *
 * @module
 */

import type { InferFunc } from "../../mod.ts";
import { telemetryCallable } from "../_telemetry_model.ts";

/** The callable, in this Worker. */
export default function factory(): InferFunc {
  return telemetryCallable("worker");
}
