/**
 * A server whose model `Hang` never answers, for `shutdown_test.ts` and `http_threads_test.ts`:
 * `deno run -A tests/_shutdown_server.ts <engine> <main|worker> [httpThreadCount]` (more than
 * one HTTP thread needs `--unstable-net`, and logs every request). It serves until a signal with
 * `exitTimeoutSecs: 2`, prints `running` when the callable starts and `served` once `serve()`
 * returned, and then simply ends: the process must exit on its own.
 *
 * @module
 */

import { Triton, workers } from "../mod.ts";
import type { EngineKind } from "../src/engine/engine.ts";

const [engine, kind, threads] = Deno.args as [EngineKind, "main" | "worker", string?];
const httpThreadCount = Number(threads ?? 1);
const hang = (): Promise<never> => {
  console.log("running");
  return new Promise<never>(() => {});
};
const triton = new Triton({
  engine,
  securityConfig: { restrictedEndpoints: [] },
  config: {
    httpPort: 0,
    grpcPort: 0,
    metricsPort: 0,
    httpAddress: "127.0.0.1",
    grpcAddress: "127.0.0.1",
    exitTimeoutSecs: 2,
    httpThreadCount,
    logVerbose: httpThreadCount > 1 ? 1 : 0,
  },
});
triton.bind({
  modelName: "Hang",
  inferFunc: kind === "worker"
    ? workers(new URL("./_workers/hang.ts", import.meta.url), { count: 1 })
    : hang,
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  config: { batching: false },
});
await triton.serve();
console.log("served");
