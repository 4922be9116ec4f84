/**
 * DenoTriton side of the benchmark: the same models as `bench/pytriton/server.py`.
 *
 *     deno run -A bench/denotriton/server.ts --engine builtin|triton \
 *       --http-port 8000 --grpc-port 8001 --metrics-port 8002
 *
 * @module
 */

import { batch, type InstanceProvider, type NDArray, Triton } from "../../mod.ts";
import * as denotriton from "../../mod.ts";
import { calibrate, cpuInfer } from "./cpu_work.ts";
import { addSub } from "../../examples/add_sub/model.ts";

function flag(name: string, fallback: string): string {
  const index = Deno.args.indexOf(`--${name}`);
  return index >= 0 && Deno.args[index + 1] !== undefined ? Deno.args[index + 1]! : fallback;
}

const engine = flag("engine", "builtin");
if (engine !== "builtin" && engine !== "triton") {
  throw new Error(`Unknown engine '${engine}': expected builtin or triton`);
}

const f32 = "float32" as const;
const x16 = [{ name: "x", dtype: f32, shape: [16] }];
const y16 = [{ name: "y", dtype: f32, shape: [16] }];
const identity = batch(({ x }: { x: NDArray<"float32"> }) => ({ y: x }));

await using triton = new Triton({
  engine,
  // perf_analyzer reads statistics, which are restricted by default (as in PyTriton 0.7.0, whose
  // script lifts the restriction too).
  securityConfig: { restrictedEndpoints: [] },
  config: {
    httpAddress: "127.0.0.1",
    httpPort: Number(flag("http-port", "8000")),
    grpcAddress: "127.0.0.1",
    grpcPort: Number(flag("grpc-port", "8001")),
    metricsPort: Number(flag("metrics-port", "8002")),
  },
});
triton.bind({
  modelName: "identity_small",
  inferFunc: identity,
  inputs: x16,
  outputs: y16,
  config: { batching: false },
});
triton.bind({
  modelName: "identity_large",
  inferFunc: identity,
  inputs: [{ name: "x", dtype: f32, shape: [1048576] }],
  outputs: [{ name: "y", dtype: f32, shape: [1048576] }],
  config: { batching: false },
});
// The shared-memory data path at 64 MiB per tensor (too big for the 64 MiB request limits).
triton.bind({
  modelName: "identity_huge",
  inferFunc: identity,
  inputs: [{ name: "x", dtype: f32, shape: [16777216] }],
  outputs: [{ name: "y", dtype: f32, shape: [16777216] }],
  config: { batching: false },
});
triton.bind({
  modelName: "add_sub",
  inferFunc: addSub,
  inputs: [{ name: "a", dtype: f32, shape: [16] }, { name: "b", dtype: f32, shape: [16] }],
  outputs: [{ name: "add", dtype: f32, shape: [16] }, { name: "sub", dtype: f32, shape: [16] }],
  config: { maxBatchSize: 32, batcher: { maxQueueDelayMicroseconds: 1000 } },
});
triton.bind({
  modelName: "fixed_5ms",
  inferFunc: batch(async ({ x }) => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { y: x! };
  }),
  inputs: x16,
  outputs: y16,
  config: { maxBatchSize: 32 },
});

// Workers when the library has them (each instance its own thread); else the list-of-callables
// form, whose instances share the main thread.
const ROUNDS = calibrate();
const workers = (denotriton as Record<string, unknown>)["workers"] as
  | ((module: URL, options: { count: number; data: unknown }) => InstanceProvider)
  | undefined;
const cpuForm = typeof workers === "function" ? "workers" : "callables";
for (const count of [1, 2]) {
  triton.bind({
    modelName: `cpu_${count}`,
    inferFunc: workers === undefined
      ? Array.from({ length: count }, () => cpuInfer(ROUNDS))
      : workers(new URL("./cpu_work.ts", import.meta.url), { count, data: { rounds: ROUNDS } }),
    inputs: x16,
    outputs: y16,
    config: { maxBatchSize: 32 },
  });
}
await triton.run();
console.log(`denotriton ready: engine ${triton.engineKind}, cpu ${cpuForm}, rounds ${ROUNDS}`);
await triton.serve();
