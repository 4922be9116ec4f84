// The server of tests/backpressure_test.ts, run as its own process so that the test can watch its
// memory: the decoupled model `Flood` yields `n` steps of `size` fresh bytes each, as fast as it
// is pulled, on the engine named by the first argument, on the main thread or (second argument
// `workers`) in a Worker. Prints `{"grpc": "<url>"}` once serving, then `produced <steps>`
// whenever the count changed, every 100 ms.

import { type BindOptions, Triton, workers } from "../mod.ts";
import { FLOOD, floodSteps } from "./_flood_model.ts";

const engine = Deno.args[0] === "triton" ? "triton" : "builtin";
const inWorkers = Deno.args[1] === "workers";
// Shared with the Worker, which counts there.
const counter = new Int32Array(new SharedArrayBuffer(4));

const triton = new Triton({
  engine,
  securityConfig: { restrictedEndpoints: [] },
  config: {
    httpPort: 0,
    grpcPort: 0,
    allowMetrics: false,
    httpAddress: "127.0.0.1",
    grpcAddress: "127.0.0.1",
  },
});
const flood: BindOptions = {
  ...FLOOD,
  inferFunc: inWorkers
    ? workers(new URL("./_workers/flood.ts", import.meta.url), { data: counter.buffer })
    : (requests) => floodSteps(requests, () => Atomics.add(counter, 0, 1)),
};
await triton.bind(flood);
await triton.run();
console.log(JSON.stringify({ grpc: triton.urls.grpc }));
let reported = -1;
setInterval(() => {
  const produced = Atomics.load(counter, 0);
  if (produced === reported) return;
  reported = produced;
  console.log(`produced ${produced}`);
}, 100);
// With --expose-gc (as the test runs it): collect twice a second, so that resident memory
// follows what the server holds rather than when the collector happens to run.
const collect = (globalThis as { gc?: () => void }).gc;
if (collect !== undefined) setInterval(collect, 500);
Deno.addSignalListener("SIGTERM", () => {
  triton.stop().finally(() => Deno.exit(0));
});
