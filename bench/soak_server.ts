/**
 * The server of the soak (`bench/soak.ts` starts it): AddSub for HTTP and gRPC unary calls, and
 * a decoupled Count for gRPC streams, on one engine, HTTP on `--http-threads` Workers.
 *
 *     deno run -A --unstable-net bench/soak_server.ts --engine builtin|triton --http-threads 2
 *
 * It prints `{"http": ..., "grpc": ...}` once it serves, and stops on SIGINT or SIGTERM.
 *
 * @module
 */

import {
  type BindOptions,
  type InferRequest,
  type InferResult,
  ndarray,
  type TensorsOf,
  Triton,
} from "../mod.ts";
import { addSub, INPUTS, OUTPUTS } from "../examples/add_sub/model.ts";
import { flag } from "./args.ts";

const engine = flag("engine", "builtin");
if (engine !== "builtin" && engine !== "triton") {
  throw new Error(`Unknown engine '${engine}': expected builtin or triton`);
}

const countInputs = [{ name: "n", dtype: "int32", shape: [1] }] as const;
const countOutputs = [{ name: "i", dtype: "int32", shape: [1] }] as const;
/** Count: `n` responses, `i` = 0 .. n-1, each after a turn of the event loop. */
async function* countUp(
  requests: InferRequest<TensorsOf<typeof countInputs>>[],
): AsyncGenerator<InferResult<TensorsOf<typeof countOutputs>>[]> {
  const n = requests[0]!.data.n.data[0]!;
  for (let i = 0; i < n; i++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    yield [{ i: ndarray(new Int32Array([i]), [1]) }];
  }
}
const count = {
  modelName: "Count",
  // An instance serves one stream at a time: four serve four.
  inferFunc: [countUp, countUp, countUp, countUp],
  inputs: countInputs,
  outputs: countOutputs,
  config: { batching: false, decoupled: true },
} satisfies BindOptions<typeof countInputs, typeof countOutputs>;

const triton = await Triton.start({
  engine,
  securityConfig: { restrictedEndpoints: [] },
  config: {
    httpAddress: "127.0.0.1",
    httpPort: 0,
    httpThreadCount: Number(flag("http-threads", "2")),
    grpcAddress: "127.0.0.1",
    grpcPort: 0,
    allowMetrics: false,
  },
  models: [
    {
      modelName: "AddSub",
      inferFunc: addSub,
      inputs: INPUTS,
      outputs: OUTPUTS,
      config: { maxBatchSize: 32, batcher: { maxQueueDelayMicroseconds: 100 } },
    } satisfies BindOptions<typeof INPUTS, typeof OUTPUTS>,
    count,
  ],
});
console.log(JSON.stringify({ http: triton.urls.http, grpc: triton.urls.grpc }));
await triton.serve();
