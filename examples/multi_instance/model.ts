/**
 * The Linear model on two Worker instances, both pinned to `cuda:0` like PyTriton's
 * multi-instance examples (two instances share one GPU). On a host without GPUs they run on the
 * CPU, and the engine logs that once. The layer itself is TypeScript on the CPU either way;
 * `examples/linear_gpu` computes it on the GPU.
 *
 * @module
 */

import { type Triton, workers } from "../../mod.ts";
import { INPUTS, OUTPUTS } from "./linear_instance.ts";

/**
 * Binds Linear on a server.
 *
 * @param triton The server.
 * @returns A promise that settles when both Workers have loaded the model.
 */
export function bindLinear(triton: Triton): Promise<void> {
  return triton.bind({
    modelName: "Linear",
    inferFunc: workers(new URL("./linear_instance.ts", import.meta.url), {
      devices: ["cuda:0", "cuda:0"],
    }),
    inputs: INPUTS,
    outputs: OUTPUTS,
    config: { maxBatchSize: 16 },
  });
}
