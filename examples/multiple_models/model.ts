/**
 * Two models on one server: Multiply2 and Multiply4.
 *
 * @module
 */

import { batch, type InferFunc, map, type NDArray, type Triton } from "../../mod.ts";

function multiplier(
  factor: number,
): InferFunc<{ x: NDArray<"float32"> }, { y: NDArray<"float32"> }> {
  return batch(({ x }) => ({ y: map(x, (v) => v * factor) }));
}

/**
 * Binds Multiply2 and Multiply4 on a server.
 *
 * @param triton The server.
 * @returns A promise that settles when both models are loaded.
 */
export async function bindMultipliers(triton: Triton): Promise<void> {
  for (const factor of [2, 4]) {
    await triton.bind({
      modelName: `Multiply${factor}`,
      inferFunc: multiplier(factor),
      inputs: [{ name: "x", dtype: "float32", shape: [1] }],
      outputs: [{ name: "y", dtype: "float32", shape: [1] }],
      config: { maxBatchSize: 8 },
    });
  }
}
