/**
 * A new user's first run, for `first_run_test.ts`: `deno run -A tests/_first_run_server.ts
 * <engine> <logVerbose>` binds `Scale` (y = 2x), starts the server, calls it once over HTTP,
 * prints the answer and stops.
 *
 * @module
 */

import { ndarray, Triton } from "../mod.ts";
import type { EngineKind } from "../src/engine/engine.ts";

const [engine, verbose] = Deno.args as [EngineKind, string];
await using triton = new Triton({
  engine,
  config: {
    httpPort: 0,
    httpAddress: "127.0.0.1",
    allowGrpc: false,
    allowMetrics: false,
    logVerbose: Number(verbose),
  },
});
await triton.bind({
  modelName: "Scale",
  inferFunc: (requests) =>
    requests.map(({ data: { x } }) => ({
      y: ndarray((x!.data as Float32Array).map((v) => v * 2), x!.shape),
    })),
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  config: { maxBatchSize: 4 },
});
await triton.run();
const response = await fetch(`${triton.urls.http}/v2/models/Scale/infer`, {
  method: "POST",
  body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], data: [1, 2] }] }),
});
console.log(JSON.stringify((await response.json()).outputs[0].data));
