/**
 * The instance module of the Worker tests. `ctx.data` is a `SharedArrayBuffer` of Int32 flags:
 * [0] counts batches that started, [1] is the release flag that batches wait on when a request
 * has the parameter `wait`. The parameter `crash` kills the Worker mid-batch.
 *
 * @module
 */

import {
  batch,
  type InferContext,
  type InferFunc,
  type InferRequest,
  type InferReturn,
  type NDArray,
  ndarray,
  type WorkerContext,
} from "../../mod.ts";

/** Doubles `x` into `y`; `who` names the instance (device, kind, id, index, model, version, attempt). */
export default function factory(ctx: WorkerContext): InferFunc {
  if (ctx.modelName === "FailsToLoad") throw new Error("cannot load weights");
  if (ctx.modelName === "NoRestart" && ctx.attempt > 0) throw new Error("no second start");
  const flags = new Int32Array(ctx.data as SharedArrayBuffer);
  const identity = [
    ctx.device,
    ctx.deviceKind,
    ctx.deviceId,
    ctx.instanceIndex,
    ctx.modelName,
    ctx.modelVersion,
    ctx.attempt,
  ].join("|");
  const infer = batch((inputs: Record<string, NDArray>) => {
    const x = inputs.x!;
    const values = x.data as Float32Array;
    const y = new Float32Array(values.length);
    for (let i = 0; i < values.length; i++) y[i] = 2 * values[i]!;
    const rows = x.shape[0]!;
    return {
      y: ndarray(y, x.shape),
      who: ndarray(Array.from({ length: rows }, () => identity), [rows, 1]),
    };
  });
  return (requests: InferRequest[], context: InferContext): InferReturn => {
    if (requests.some((r) => r.parameters.crash === true)) {
      // An uncaught error outside the call: the Worker dies mid-batch.
      setTimeout(() => {
        throw new Error("boom");
      }, 0);
      return new Promise<never>(() => {});
    }
    if (requests.some((r) => r.parameters.wait === true)) {
      Atomics.add(flags, 0, 1);
      Atomics.wait(flags, 1, 0);
    }
    return infer(requests, context);
  };
}
