/**
 * The Linear model on two Worker instances pinned to `cuda:0` and `cuda:1` (on a host without
 * GPUs they run as CPU instances; the Triton engine logs that).
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
      devices: ["cuda:0", "cuda:1"],
    }),
    inputs: INPUTS,
    outputs: OUTPUTS,
    config: { maxBatchSize: 16 },
  });
}
