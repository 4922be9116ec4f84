/**
 * PyTriton's multi-instance Linear, for real: two Worker instances on `cuda:0` (one GPU shared,
 * as in PyTriton's multi-instance examples), each computing `y = xW + b` with cuBLAS on the GPU
 * (CPU where there is none).
 *
 * @module
 */

import { type Triton, workers } from "../../mod.ts";
import { INPUTS, OUTPUTS } from "./linear_instance.ts";

/**
 * Binds LinearGpu on a server.
 *
 * @param triton The server.
 * @param devices One instance per device.
 * @returns A promise that settles when every Worker has loaded the model.
 */
export function bindLinearGpu(
  triton: Triton,
  devices: readonly string[] = ["cuda:0", "cuda:0"],
): Promise<void> {
  return triton.bind({
    modelName: "LinearGpu",
    inferFunc: workers(new URL("./linear_instance.ts", import.meta.url), { devices }),
    inputs: INPUTS,
    outputs: OUTPUTS,
    config: { maxBatchSize: 64 },
  });
}
