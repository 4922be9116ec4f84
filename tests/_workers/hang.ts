/**
 * An instance module whose callable never returns (it awaits forever) and whose module prints
 * `running` when a batch starts: for the shutdown and execution-timeout tests. The request
 * parameter `exit` makes it call `Deno.exit()` instead, and `fast` answers at once (`y` = `x`).
 *
 * @module
 */

import type { InferFunc, InferResult, Request } from "../../mod.ts";

/** The factory. */
export default function factory(): InferFunc {
  return (requests: Request[]): InferResult[] | Promise<InferResult[]> => {
    const parameters = requests[0]!.parameters;
    if (parameters.fast === true) return requests.map((r) => ({ y: r.data.x! }));
    if (parameters.exit === true) Deno.exit(3);
    console.log("running");
    return new Promise<never>(() => {});
  };
}
