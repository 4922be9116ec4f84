/**
 * An instance module for the shared-memory tests: writes 42 into `INPUT[0]` and answers the value
 * it replaced as `OUTPUT` [1], so the client sees the write only if the Worker got the region's
 * own memory.
 *
 * @module
 */

import { type InferFunc, type InferResult, ndarray, type Request } from "../../mod.ts";

/** The factory. */
export default function factory(): InferFunc {
  return (requests: Request[]): InferResult[] =>
    requests.map((request) => {
      const input = request.data.INPUT!.data as Float32Array;
      const old = input[0]!;
      input[0] = 42;
      return { OUTPUT: ndarray(new Float32Array([old])) };
    });
}
