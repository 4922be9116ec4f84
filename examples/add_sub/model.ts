/**
 * The AddSub model: `add = a + b` and `sub = a - b`, batched.
 *
 * @module
 */

import { batch, type InferFunc, ndarray, type Triton } from "../../mod.ts";

/** The batched AddSub callable: `add = a + b`, `sub = a - b` over float32 inputs. */
export const addSub: InferFunc = batch(({ a, b }) => {
  const x = a!.data as Float32Array;
  const y = b!.data as Float32Array;
  return {
    add: ndarray(x.map((v, i) => v + y[i]!), a!.shape),
    sub: ndarray(x.map((v, i) => v - y[i]!), a!.shape),
  };
});

/**
 * Binds AddSub on a server.
 *
 * @param triton The server.
 * @returns A promise that settles when the model is loaded.
 */
export function bindAddSub(triton: Triton): Promise<void> {
  return triton.bind({
    modelName: "AddSub",
    inferFunc: addSub,
    inputs: [
      { name: "a", dtype: "float32", shape: [-1] },
      { name: "b", dtype: "float32", shape: [-1] },
    ],
    outputs: [
      { name: "add", dtype: "float32", shape: [-1] },
      { name: "sub", dtype: "float32", shape: [-1] },
    ],
    config: { maxBatchSize: 128, batcher: { maxQueueDelayMicroseconds: 100 } },
    strict: true,
  });
}
