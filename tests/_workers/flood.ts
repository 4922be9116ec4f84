/**
 * The Worker instance module of tests/_flood_server.ts: the decoupled `Flood` generator, counting
 * the steps it produced in `ctx.data` (a `SharedArrayBuffer` of one Int32) for the server to
 * report.
 *
 * @module
 */

import type { InferFunc, InferResult, WorkerContext } from "../../mod.ts";
import { floodSteps } from "../_flood_model.ts";

/** The generator, counting into the shared buffer. */
export default function factory(ctx: WorkerContext): InferFunc {
  const produced = new Int32Array(ctx.data as SharedArrayBuffer);
  // With --expose-gc (the server's flag reaches every isolate): the Worker has a heap of its own,
  // which the server's collections do not touch; collect here too, so that resident memory
  // follows what the Worker holds rather than its garbage.
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect !== undefined) Deno.unrefTimer(setInterval(collect, 500));
  return (requests): AsyncGenerator<InferResult[]> =>
    floodSteps(requests, () => Atomics.add(produced, 0, 1));
}
