/**
 * The server of `tests/gpu_cuda_shm_check.sh`: serves, on ephemeral loopback ports, until stdin
 * closes or SIGTERM, and prints `READY http=<host:port> grpc=<host:port>` once it serves.
 *
 * - `Identity` (FP32 [-1] → [-1]): a callable pinned to the GPU whose specs say `deviceTensor`:
 *   an input in a client's CUDA region reaches it as a `DeviceTensor` and it returns it, so the
 *   round trip into another CUDA region is one device-to-device copy and no host copy;
 * - `Double` (FP32 [-1] → [-1]): a host callable (y = 2x): one device-to-host copy in, one
 *   host-to-device copy out;
 * - `CopyCounts` (INT32 [1] → BYTES [1]): JSON of this process's `deviceCopyCounts()` (every
 *   copy DenoTriton made through the CUDA driver: instances here run on the main thread, so they
 *   share the counters) and what `Identity` got last (`DeviceTensor float32 [n] cuda:0` or
 *   `host`).
 *
 *     deno run -A tests/_gpu/cuda_shm_server.ts --engine builtin|triton [--device cuda:0]
 *       [--driver <CUDA driver library>]
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  type BindOptions,
  deviceCopyCounts,
  discoverGpus,
  type InferCallable,
  isDeviceTensor,
  ndarray,
  Triton,
} from "../../mod.ts";
import { MainThreadInstances } from "../../src/instances/main_thread.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    engine: { type: "string", default: "builtin" },
    device: { type: "string", default: "cuda:0" },
    driver: { type: "string" },
  },
});
const engine = values.engine;
if (engine !== "builtin" && engine !== "triton") {
  console.error(`--engine must be builtin or triton, got '${engine}'`);
  Deno.exit(2);
}
const gpus = discoverGpus(values.driver === undefined ? {} : { driverLibrary: values.driver });
if (values.device.startsWith("cuda:") && gpus.devices.length === 0) {
  console.error(`No GPU for ${values.device}: ${gpus.reason}`);
  Deno.exit(3);
}

let identityGot = "nothing yet";
const identity: InferCallable = (requests) =>
  requests.map((request) => {
    const x = request.data.x!;
    identityGot = isDeviceTensor(x)
      ? `DeviceTensor ${x.dtype} [${x.shape}] ${x.deviceName}`
      : `host ${x.dtype} [${x.shape}]`;
    return { y: x };
  });
const double: InferCallable = (requests) =>
  requests.map((request) => {
    const x = request.data.x!;
    if (isDeviceTensor(x)) throw new Error("Double got a device tensor");
    return { y: ndarray((x.data as Float32Array).map((v) => v * 2), x.shape) };
  });
const counts: InferCallable = (requests) =>
  requests.map(() => ({
    counts: ndarray([JSON.stringify({ ...deviceCopyCounts(), identityGot })], [1]),
  }));

const fp32 = { dtype: "float32", shape: [-1] } as const;
const models: BindOptions[] = [
  {
    modelName: "Identity",
    inferFunc: new MainThreadInstances([identity], { devices: [values.device] }),
    inputs: [{ name: "x", ...fp32, deviceTensor: true }],
    outputs: [{ name: "y", ...fp32, deviceTensor: true }],
    config: { batching: false },
  },
  {
    modelName: "Double",
    inferFunc: new MainThreadInstances([double]),
    inputs: [{ name: "x", ...fp32 }],
    outputs: [{ name: "y", ...fp32 }],
    config: { batching: false },
  },
  {
    modelName: "CopyCounts",
    inferFunc: new MainThreadInstances([counts]),
    inputs: [{ name: "x", dtype: "int32", shape: [1] }],
    outputs: [{ name: "counts", dtype: "bytes", shape: [1] }],
    config: { batching: false },
  },
];

const triton = new Triton({
  engine,
  gpus,
  securityConfig: { restrictedEndpoints: [] },
  config: {
    httpPort: 0,
    grpcPort: 0,
    metricsPort: 0,
    httpAddress: "127.0.0.1",
    grpcAddress: "127.0.0.1",
  },
});
for (const model of models) await triton.bind(model);
await triton.run();
const strip = (url: string | undefined) => url?.replace(/^\w+:\/\//, "");
console.log(`READY http=${strip(triton.urls.http)} grpc=${strip(triton.urls.grpc)}`);

const stopped = Promise.withResolvers<void>();
Deno.addSignalListener("SIGTERM", () => stopped.resolve());
(async () => {
  // stdin closing (the script ended) stops the server too.
  for await (const _ of Deno.stdin.readable) { /* ignore input */ }
  stopped.resolve();
})();
await stopped.promise;
await triton.stop();
Deno.exit(0);
