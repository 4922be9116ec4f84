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
  type NDArray,
  ndarray,
  type Triton,
} from "../../mod.ts";

function values(tensor: NDArray | undefined): Float32Array {
  return tensor!.data as Float32Array;
}

/**
 * Binds AddSubOptional on a server.
 *
 * @param triton The server.
 * @returns A promise that settles when the model is loaded.
 */
export function bindAddSubOptional(triton: Triton): Promise<void> {
  const compute = firstValue(["w"], ({ a, b, t, w }) => {
    const offset = w === undefined ? 0 : values(w)[0]!;
    const x = values(a), y = values(b), z = values(t);
    return {
      add: ndarray(x.map((v, i) => v + y[i]! + z[i]! + offset), a!.shape),
      sub: ndarray(x.map((v, i) => v - y[i]! + z[i]! + offset), a!.shape),
    };
  });
  return triton.bind({
    modelName: "AddSubOptional",
    inferFunc: fillOptionals(
      { t: ndarray(new Float32Array([2]), [1]) },
      groupByKeys(batch(compute)),
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
