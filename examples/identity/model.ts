/**
 * The Identity model: returns its inputs unchanged, a float64 tensor and a bytes tensor.
 *
 * @module
 */

import type { Triton } from "../../mod.ts";

/**
 * Binds Identity on a server.
 *
 * @param triton The server.
 * @returns A promise that settles when the model is loaded.
 */
export function bindIdentity(triton: Triton): Promise<void> {
  return triton.bind({
    modelName: "Identity",
    // Undecorated, as PyTriton's identity: every request goes back as its own result.
    inferFunc: (requests) => requests,
    inputs: [
      { name: "values", dtype: "float64", shape: [-1] },
      { name: "texts", dtype: "bytes", shape: [-1] },
    ],
    outputs: [
      { name: "values", dtype: "float64", shape: [-1] },
      { name: "texts", dtype: "bytes", shape: [-1] },
    ],
    config: { maxBatchSize: 16 },
    strict: true,
  });
}
