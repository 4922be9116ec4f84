/**
 * One replica for `tests/replicas_test.ts`: serves `Echo` until SIGTERM/SIGINT, like a
 * container would (`Triton.serve()`, configured by `DENOTRITON_TRITON_CONFIG_*`).
 *
 * `Echo` returns its input `x` (INT64) as `y` and the replica's name (`REPLICA_NAME`) as
 * `replica`, after sleeping `delay_ms` (a request parameter, default 0): a stand-in for work, so
 * that requests are in flight when the replica is told to stop.
 *
 *     REPLICA_NAME=a deno run -A tests/_replica_server.ts
 *
 * @module
 */

import { type InferFunc, type NDArray, ndarray, Triton } from "../mod.ts";

const name = Deno.env.get("REPLICA_NAME") ?? "replica";

const echo: InferFunc<
  { x: NDArray<"int64"> },
  { y: NDArray<"int64">; replica: NDArray<"bytes"> }
> = async (requests) => {
  const delay = Math.max(...requests.map((request) => Number(request.parameters.delay_ms ?? 0)));
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  return requests.map((request) => ({ y: request.x, replica: ndarray([name], [1]) }));
};

await using triton = new Triton({ securityConfig: { restrictedEndpoints: [] } });
triton.bind({
  modelName: "Echo",
  // Four instances: a slow request does not hold up the others.
  inferFunc: [echo, echo, echo, echo],
  inputs: [{ name: "x", dtype: "int64", shape: [1] }],
  outputs: [
    { name: "y", dtype: "int64", shape: [1] },
    { name: "replica", dtype: "bytes", shape: [1] },
  ],
  config: { batching: false },
});
await triton.serve();
