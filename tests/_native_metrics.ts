/**
 * For `native_engine_test.ts`: `deno run -A tests/_native_metrics.ts on|off` starts the Triton
 * core with its metrics on or off in a process of its own (the core's metrics are process-wide:
 * once on in a process, they stay on), runs one inference and prints the core's metrics text.
 *
 * @module
 */

import type { InferRequest } from "../src/callable/types.ts";
import { resolveModelConfig } from "../src/config/model_config.ts";
import { resolveTensorSpecs } from "../src/config/tensor_spec.ts";
import { NativeEngine } from "../src/engine/native/engine.ts";
import { findTritonInstall } from "../src/setup/install.ts";
import { MainThreadInstances } from "../src/instances/main_thread.ts";
import { ndarray } from "../src/tensor/ndarray.ts";

const install = await findTritonInstall();
if (install === undefined) throw new Error("The Triton core is not installed");
const engine = new NativeEngine({ install, exitTimeoutSecs: 5, metrics: Deno.args[0] === "on" });
await engine.start();
try {
  await engine.loadModel({
    name: "m",
    version: 1,
    strict: false,
    inputs: resolveTensorSpecs([{ name: "x", dtype: "float32", shape: [-1] }], "input"),
    outputs: resolveTensorSpecs([{ name: "y", dtype: "float32", shape: [-1] }], "output"),
    config: resolveModelConfig({}),
    instances: new MainThreadInstances([
      (requests: InferRequest[]) => requests.map((r) => ({ y: r.data.x! })),
    ]),
  });
  await engine.infer({
    modelName: "m",
    parameters: {},
    inputs: new Map([["x", ndarray(new Float32Array([1, 2]), [1, 2])]]),
  });
  console.log(engine.metrics());
} finally {
  await engine.stop();
}
