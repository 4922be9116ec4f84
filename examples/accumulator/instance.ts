/**
 * The Accumulator's instance module for `workers()`: each Worker runs {@linkcode accumulate}, and
 * the running totals of the sequences it runs live in that Worker.
 *
 * @module
 */

import type { InferFunc } from "../../mod.ts";
import { accumulate } from "./model.ts";

/** Every instance runs the same callable; the sequences' totals are per instance. */
export default function factory(): InferFunc {
  return accumulate as InferFunc;
}
