/**
 * DenoTriton in the peers benchmark: one of its models (`bench/peers/models.ts`), bound as the
 * PyTriton benchmark binds them, on either engine, with the library's defaults otherwise (HTTP
 * on the main thread, which the README recommends on two cores).
 *
 *     deno run -A bench/peers/denotriton/server.ts --engine builtin|triton --model add_sub \
 *       --http-port 8000 --grpc-port 8001 --metrics-port 8002
 *
 * @module
 */

import { batch, type NDArray, Triton, workers } from "../../../mod.ts";
import { addSub } from "../../../examples/add_sub/model.ts";
import { calibrate } from "../../denotriton/cpu_work.ts";
import { flag } from "../../args.ts";
import { MODELS } from "../models.ts";

const engine = flag("engine", "builtin");
if (engine !== "builtin" && engine !== "triton") {
  throw new Error(`Unknown engine '${engine}': expected builtin or triton`);
}
const model = flag("model", "identity_small");
if (!(MODELS as readonly string[]).includes(model)) throw new Error(`Unknown model '${model}'`);

const f32 = "float32" as const;
const x16 = [{ name: "x", dtype: f32, shape: [16] }];
const y16 = [{ name: "y", dtype: f32, shape: [16] }];
const identity = batch(({ x }: { x: NDArray<"float32"> }) => ({ y: x }));

await using triton = new Triton({
  engine,
  // perf_analyzer reads statistics, which DenoTriton restricts by default (tritonserver does not).
  securityConfig: { restrictedEndpoints: [] },
  config: {
    httpAddress: "127.0.0.1",
    httpPort: Number(flag("http-port", "8000")),
    grpcAddress: "127.0.0.1",
    grpcPort: Number(flag("grpc-port", "8001")),
    metricsPort: Number(flag("metrics-port", "8002")),
  },
});
let form = "main-thread callable";
switch (model) {
  case "identity_small":
    triton.bind({
      modelName: model,
      inferFunc: identity,
      inputs: x16,
      outputs: y16,
      config: { batching: false },
    });
    break;
  case "identity_large":
    triton.bind({
      modelName: model,
      inferFunc: identity,
      inputs: [{ name: "x", dtype: f32, shape: [1048576] }],
      outputs: [{ name: "y", dtype: f32, shape: [1048576] }],
      config: { batching: false },
    });
    break;
  case "add_sub":
    triton.bind({
      modelName: model,
      inferFunc: addSub,
      inputs: [{ name: "a", dtype: f32, shape: [16] }, { name: "b", dtype: f32, shape: [16] }],
      outputs: [{ name: "add", dtype: f32, shape: [16] }, { name: "sub", dtype: f32, shape: [16] }],
      config: { maxBatchSize: 32 },
    });
    break;
  case "fixed_5ms":
    triton.bind({
      modelName: model,
      // One instance: a device that takes 5 ms per call whatever the batch size.
      inferFunc: batch(async ({ x }) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        return { y: x! };
      }),
      inputs: x16,
      outputs: y16,
      config: { maxBatchSize: 32 },
    });
    break;
  case "cpu_2": {
    // Two Deno Workers, one per core; the main thread calibrates once for both.
    const rounds = calibrate();
    form = `2 Workers, ${rounds} rounds per sample`;
    triton.bind({
      modelName: model,
      inferFunc: workers(new URL("../../denotriton/cpu_work.ts", import.meta.url), {
        count: 2,
        data: { rounds },
      }),
      inputs: x16,
      outputs: y16,
      config: { maxBatchSize: 32 },
    });
    break;
  }
}
await triton.run();
console.log(`denotriton ready: engine ${triton.engineKind}, ${model}: ${form}`);
await triton.serve();
