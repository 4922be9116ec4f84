/**
 * The layer of the linear_gpu example, `y = xW + b` with 20 inputs and 30 outputs, its weights
 * (the same seeded values in every instance, so every instance answers alike), and the CPU
 * computation the GPU instances fall back to and the test compares them with.
 *
 * @module
 */

/** Input features. */
export const IN_FEATURES = 20;
/** Output features. */
export const OUT_FEATURES = 30;

/** The layer's parameters: `weights` is `[IN_FEATURES, OUT_FEATURES]`, row-major. */
export interface LinearWeights {
  /** `W`, row-major `[IN_FEATURES, OUT_FEATURES]`. */
  readonly weights: Float32Array;
  /** `b`, `[OUT_FEATURES]`. */
  readonly bias: Float32Array;
}

/**
 * The weights: uniform in [-1/√in, 1/√in) like PyTorch's `nn.Linear`, from a fixed seed.
 *
 * @returns `W` and `b`.
 */
export function linearWeights(): LinearWeights {
  let state = 0x2545f491;
  const bound = 1 / Math.sqrt(IN_FEATURES);
  const next = (): number => {
    // xorshift32: the same numbers in every Worker.
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return ((state >>> 0) / 2 ** 32) * 2 * bound - bound;
  };
  return {
    weights: Float32Array.from({ length: IN_FEATURES * OUT_FEATURES }, next),
    bias: Float32Array.from({ length: OUT_FEATURES }, next),
  };
}

/**
 * `y = xW + b` on the CPU, accumulating in float64.
 *
 * @param layer `W` and `b`.
 * @param x Row-major `[rows, IN_FEATURES]`.
 * @param rows The batch size.
 * @returns Row-major `[rows, OUT_FEATURES]`.
 */
export function linearCpu(layer: LinearWeights, x: Float32Array, rows: number): Float32Array {
  const y = new Float32Array(rows * OUT_FEATURES);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < OUT_FEATURES; o++) {
      let sum = layer.bias[o]!;
      for (let i = 0; i < IN_FEATURES; i++) {
        sum += x[r * IN_FEATURES + i]! * layer.weights[i * OUT_FEATURES + o]!;
      }
      y[r * OUT_FEATURES + o] = sum;
    }
  }
  return y;
}
