/**
 * The AddSub model: `add = a + b` and `sub = a - b`, batched.
 *
 * @module
 */

import { batch, type InferFunc, type TensorsOf, type Triton, zip } from "../../mod.ts";

/** The inputs: two float32 vectors. */
export const INPUTS = [
  { name: "a", dtype: "float32", shape: [-1] },
  { name: "b", dtype: "float32", shape: [-1] },
] as const;

/** The outputs: their sum and difference. */
export const OUTPUTS = [
  { name: "add", dtype: "float32", shape: [-1] },
  { name: "sub", dtype: "float32", shape: [-1] },
] as const;

/** The type of a callable with these inputs and outputs. */
export type AddSubFunc = InferFunc<TensorsOf<typeof INPUTS>, TensorsOf<typeof OUTPUTS>>;

/** The batched AddSub callable: `add = a + b`, `sub = a - b` over float32 inputs. */
export const addSub: AddSubFunc = batch(({ a, b }) => ({
  add: zip(a, b, (x, y) => x + y),
  sub: zip(a, b, (x, y) => x - y),
}));

/** Options of {@linkcode bindAddSub}. */
export interface AddSubOptions {
  /**
   * How long the dynamic batcher waits for more requests to join a batch, in microseconds.
   *
   * @default {100}
   */
  maxQueueDelayMicroseconds?: number;
}

/**
 * Binds AddSub on a server.
 *
 * @param triton The server.
 * @param options The batcher's queue delay.
 * @returns A promise that settles when the model is loaded.
 */
export function bindAddSub(triton: Triton, options: AddSubOptions = {}): Promise<void> {
  const { maxQueueDelayMicroseconds = 100 } = options;
  return triton.bind({
    modelName: "AddSub",
    inferFunc: addSub,
    inputs: INPUTS,
    outputs: OUTPUTS,
    config: { maxBatchSize: 128, batcher: { maxQueueDelayMicroseconds } },
    strict: true,
  });
}
