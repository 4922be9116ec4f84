/**
 * Instance module of `workers_test.ts`: echoes `x` as `y` (a fresh array) and `s` as `t`; in a
 * decoupled model it yields one step per element of `x`. A request with the parameter `count`
 * increments the model's counter `echo_counted_total` first.
 *
 * @module
 */

import type { InferContext, InferFunc, InferRequest, InferResult } from "../callable/types.ts";
import { ndarray } from "../tensor/ndarray.ts";
import type { WorkerContext } from "./worker_protocol.ts";

function echo(request: InferRequest): InferResult {
  const x = request.data["x"]!;
  const result: InferResult = { y: ndarray((x.data as Float32Array).slice(), x.shape) };
  if (request.data["s"] !== undefined) result["t"] = request.data["s"];
  return result;
}

/** The factory. */
export default function factory(ctx: WorkerContext): InferFunc {
  if (ctx.model.config.decoupled) {
    return async function* (requests: InferRequest[]): AsyncGenerator<InferResult[]> {
      const x = requests[0]!.data["x"]!.data as Float32Array;
      for (const value of x) yield requests.map(() => ({ y: ndarray(new Float32Array([value])) }));
    };
  }
  return (requests: InferRequest[], context: InferContext) => {
    for (const request of requests) {
      if (request.parameters["count"] !== true) continue;
      context.metrics.family({
        name: "echo_counted_total",
        description: "Counted",
        kind: "counter",
      })
        .metric({ labels: {} }).increment();
    }
    return requests.map(echo);
  };
}
