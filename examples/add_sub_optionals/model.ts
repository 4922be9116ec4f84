/**
 * AddSub with optional inputs: `t` defaults to 2 through `fillOptionals`, and `w` is a single
 * value per batch taken with `firstValue` (0 when absent):
 * `add = a + b + t + w`, `sub = a - b + t + w`.
 *
 * @module
 */

import {
  batch,
  fillOptionals,
  firstValue,
  groupByKeys,
  ndarray,
  type Triton,
  zip,
} from "../../mod.ts";

/**
 * Binds AddSubOptional on a server.
 *
 * @param triton The server.
 * @returns A promise that settles when the model is loaded.
 */
export function bindAddSubOptional(triton: Triton): Promise<void> {
  return triton.bind({
    modelName: "AddSubOptional",
    inferFunc: fillOptionals(
      { t: ndarray(new Float32Array([2]), [1]) },
      groupByKeys(batch(firstValue(["w"], ({ a, b, t, w }) => {
        const offset = w?.data[0] ?? 0;
        return {
          add: zip(zip(a, b, (x, y) => x + y), t, (x, z) => x + z + offset),
          sub: zip(zip(a, b, (x, y) => x - y), t, (x, z) => x + z + offset),
        };
      }))),
    ),
    inputs: [
      { name: "a", dtype: "float32", shape: [1] },
      { name: "b", dtype: "float32", shape: [1] },
      { name: "t", dtype: "float32", shape: [1], optional: true },
      { name: "w", dtype: "float32", shape: [1], optional: true },
    ],
    outputs: [
      { name: "add", dtype: "float32", shape: [1] },
      { name: "sub", dtype: "float32", shape: [1] },
    ],
    config: { maxBatchSize: 16 },
    strict: true,
  });
}
