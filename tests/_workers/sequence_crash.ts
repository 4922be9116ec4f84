/**
 * The Accumulator's callable in a Worker that dies mid-batch when a request's `x` is -1 (an
 * uncaught error outside the call), for `sequence_test.ts`.
 *
 * @module
 */

import type { InferFunc, InferReturn } from "../../mod.ts";
import { accumulate } from "../../examples/accumulator/model.ts";

/** Every instance runs the Accumulator, except that `x = -1` kills its Worker. */
export default function factory(): InferFunc {
  return (requests, context): InferReturn => {
    if (requests.some((request) => (request.data.x?.data as Int32Array)[0] === -1)) {
      setTimeout(() => {
        throw new Error("boom");
      }, 0);
      return new Promise<never>(() => {});
    }
    return (accumulate as InferFunc)(requests, context);
  };
}
