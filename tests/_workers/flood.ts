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
  return (requests): AsyncGenerator<InferResult[]> =>
    floodSteps(requests, () => Atomics.add(produced, 0, 1));
}
