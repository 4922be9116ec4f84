// The server of tests/backpressure_test.ts, run as its own process so that the test can watch its
// memory: the decoupled model `Flood` yields `n` steps of `size` fresh bytes each, as fast as it
// is pulled, on the engine named by the first argument. Prints `{"grpc": "<url>"}` once serving,
// then `produced <steps>` whenever the count changed, every 100 ms.

import { type BindOptions, type InferResult, ndarray, Triton } from "../mod.ts";

const engine = Deno.args[0] === "triton" ? "triton" : "builtin";
let produced = 0;

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
  modelName: "Flood",
  inferFunc: async function* (requests): AsyncGenerator<InferResult[]> {
    const [request] = requests;
    const n = Number(request!.data.n!.data[0]);
    const size = Number(request!.data.size!.data[0]);
    for (let i = 0; i < n; i++) {
      if (request!.signal.aborted) return;
      // Fresh bytes per step, as a real generator makes them.
      yield [{ chunk: ndarray(new Uint8Array(size).fill(i & 0xff), [size]) }];
      produced++;
    }
  },
  inputs: [{ name: "n", dtype: "int32", shape: [1] }, { name: "size", dtype: "int32", shape: [1] }],
  outputs: [{ name: "chunk", dtype: "uint8", shape: [-1] }],
  config: { decoupled: true, batching: false },
};
await triton.bind(flood);
await triton.run();
console.log(JSON.stringify({ grpc: triton.urls.grpc }));
let reported = -1;
setInterval(() => {
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
