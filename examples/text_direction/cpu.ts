// deno-lint-ignore-file single-var-declarator -- the GEMM kernel's 4 x 4 block of sums reads as a
// grid, one row of the block per line.

/**
 * The plan on the CPU, in TypeScript: convolutions as matrix products (1x1 ones directly, the
 * others through im2col) with a register-blocked kernel, depthwise convolutions as direct loops,
 * and the small steps as plain loops. Sums are kept in float64 and stored as float32.
 *
 * @module
 */

import { type Activation, type ConvStep, isPointwise, type Plan, type Step } from "./plan.ts";

/** Per-step data prepared once: weights laid out for the kernels below. */
interface Prepared {
  step: Step;
  /** For a full convolution: the weights transposed to `[K, outChannels]`. */
  packed?: Float32Array;
}

/**
 * `C[m][n] = sum_k A[k][m] * B[k][n]`: `A` is `[K, M]` (the transposed weights, so four rows of
 * the product read four adjacent values), `B` is `[K, N]`, `C` is `[M, N]`, all row-major.
 * Blocks of 4 x 4 outputs keep 16 sums in registers while `k` runs.
 */
function gemm(
  m: number,
  n: number,
  k: number,
  a: Float32Array,
  b: Float32Array,
  bOffset: number,
  c: Float32Array,
  cOffset: number,
): void {
  const m4 = m - (m % 4);
  const n4 = n - (n % 4);
  for (let i = 0; i < m4; i += 4) {
    for (let j = 0; j < n4; j += 4) {
      let c00 = 0, c01 = 0, c02 = 0, c03 = 0;
      let c10 = 0, c11 = 0, c12 = 0, c13 = 0;
      let c20 = 0, c21 = 0, c22 = 0, c23 = 0;
      let c30 = 0, c31 = 0, c32 = 0, c33 = 0;
      let ap = i;
      let bp = bOffset + j;
      for (let p = 0; p < k; p++, ap += m, bp += n) {
        const a0 = a[ap]!, a1 = a[ap + 1]!, a2 = a[ap + 2]!, a3 = a[ap + 3]!;
        const b0 = b[bp]!, b1 = b[bp + 1]!, b2 = b[bp + 2]!, b3 = b[bp + 3]!;
        c00 += a0 * b0, c01 += a0 * b1, c02 += a0 * b2, c03 += a0 * b3;
        c10 += a1 * b0, c11 += a1 * b1, c12 += a1 * b2, c13 += a1 * b3;
        c20 += a2 * b0, c21 += a2 * b1, c22 += a2 * b2, c23 += a2 * b3;
        c30 += a3 * b0, c31 += a3 * b1, c32 += a3 * b2, c33 += a3 * b3;
      }
      let cp = cOffset + i * n + j;
      c[cp] = c00, c[cp + 1] = c01, c[cp + 2] = c02, c[cp + 3] = c03;
      cp += n;
      c[cp] = c10, c[cp + 1] = c11, c[cp + 2] = c12, c[cp + 3] = c13;
      cp += n;
      c[cp] = c20, c[cp + 1] = c21, c[cp + 2] = c22, c[cp + 3] = c23;
      cp += n;
      c[cp] = c30, c[cp + 1] = c31, c[cp + 2] = c32, c[cp + 3] = c33;
    }
  }
  // The edges: rows past the last block of 4 (all columns), then columns past it (block rows).
  for (let i = m4; i < m; i++) {
    for (let j = 0; j < n; j++) c[cOffset + i * n + j] = dot(a, i, m, b, bOffset + j, n, k);
  }
  for (let i = 0; i < m4; i++) {
    for (let j = n4; j < n; j++) c[cOffset + i * n + j] = dot(a, i, m, b, bOffset + j, n, k);
  }
}

function dot(
  a: Float32Array,
  ap: number,
  aStride: number,
  b: Float32Array,
  bp: number,
  bStride: number,
  k: number,
): number {
  let sum = 0;
  for (let p = 0; p < k; p++, ap += aStride, bp += bStride) sum += a[ap]! * b[bp]!;
  return sum;
}

/** Adds the bias and applies the activation to `[channels, pixels]` at `offset`. */
function biasActivation(
  y: Float32Array,
  offset: number,
  bias: Float32Array,
  pixels: number,
  activation: Activation,
): void {
  for (let c = 0; c < bias.length; c++) {
    const b = bias[c]!;
    const start = offset + c * pixels;
    const end = start + pixels;
    switch (activation.kind) {
      case "none":
        for (let i = start; i < end; i++) y[i] = y[i]! + b;
        break;
      case "relu":
        for (let i = start; i < end; i++) y[i] = Math.max(0, y[i]! + b);
        break;
      case "hardsigmoid": {
        const { alpha, beta } = activation;
        for (let i = start; i < end; i++) {
          y[i] = Math.max(0, Math.min(1, alpha * (y[i]! + b) + beta));
        }
        break;
      }
      case "hardswish": {
        const { alpha, beta } = activation;
        for (let i = start; i < end; i++) {
          const x = y[i]! + b;
          y[i] = x * Math.max(0, Math.min(1, alpha * x + beta));
        }
        break;
      }
    }
  }
}

/** `col[(c, ky, kx), (oy, ox)]` for one sample: the patches a full convolution multiplies. */
function im2col(step: ConvStep, x: Float32Array, xOffset: number, col: Float32Array): void {
  const { inChannels, inHeight, inWidth, outHeight, outWidth, kernelHeight, kernelWidth } = step;
  const pixels = outHeight * outWidth;
  let row = 0;
  for (let c = 0; c < inChannels; c++) {
    for (let ky = 0; ky < kernelHeight; ky++) {
      for (let kx = 0; kx < kernelWidth; kx++, row += pixels) {
        for (let oy = 0; oy < outHeight; oy++) {
          const iy = oy * step.strideHeight - step.padHeight + ky;
          const at = row + oy * outWidth;
          if (iy < 0 || iy >= inHeight) {
            col.fill(0, at, at + outWidth);
            continue;
          }
          const line = xOffset + (c * inHeight + iy) * inWidth;
          for (let ox = 0; ox < outWidth; ox++) {
            const ix = ox * step.strideWidth - step.padWidth + kx;
            col[at + ox] = ix < 0 || ix >= inWidth ? 0 : x[line + ix]!;
          }
        }
      }
    }
  }
}

/** One kernel row's taps at output column `ox`, skipping the columns outside the image. */
function bounded(
  x: Float32Array,
  row: number,
  weights: Float32Array,
  w: number,
  kernelWidth: number,
  left: number,
  inWidth: number,
): number {
  let sum = 0;
  for (let kx = Math.max(0, -left); kx < kernelWidth && left + kx < inWidth; kx++) {
    sum += weights[w + kx]! * x[row + left + kx]!;
  }
  return sum;
}

/**
 * A depthwise convolution, one kernel row at a time: each output row gets that kernel row's taps
 * added. Between the borders, where every tap is inside the image, the 3- and 5-wide rows of
 * this model (stride 1 across) are unrolled with their weights in locals.
 */
function depthwise(
  step: ConvStep,
  x: Float32Array,
  xOffset: number,
  y: Float32Array,
  yOffset: number,
  sums: Float64Array,
): void {
  const { inHeight, inWidth, outHeight, outWidth, kernelHeight, kernelWidth, weights } = step;
  const { strideHeight: sh, strideWidth: sw, padHeight: ph, padWidth: pw } = step;
  const taps = kernelHeight * kernelWidth;
  const pixels = outHeight * outWidth;
  // Columns whose every tap is inside: 0 <= ox * sw - pw and ox * sw - pw + kw - 1 < inWidth.
  const innerStart = Math.min(outWidth, Math.ceil(pw / sw));
  const innerEnd = Math.max(
    innerStart,
    Math.min(outWidth, Math.floor((inWidth - kernelWidth + pw) / sw) + 1),
  );
  const unrolled = sw === 1 && (kernelWidth === 3 || kernelWidth === 5);
  for (let c = 0; c < step.outChannels; c++) {
    const plane = xOffset + c * inHeight * inWidth;
    sums.fill(0, 0, pixels);
    for (let ky = 0; ky < kernelHeight; ky++) {
      // Output rows oy with 0 <= oy * sh - ph + ky < inHeight.
      const oyStart = Math.max(0, Math.ceil((ph - ky) / sh));
      const oyEnd = Math.min(outHeight, Math.floor((inHeight - 1 + ph - ky) / sh) + 1);
      const w = c * taps + ky * kernelWidth;
      const w0 = weights[w]!;
      const w1 = weights[w + 1]!;
      const w2 = weights[w + 2]!;
      const w3 = kernelWidth === 5 ? weights[w + 3]! : 0;
      const w4 = kernelWidth === 5 ? weights[w + 4]! : 0;
      for (let oy = oyStart; oy < oyEnd; oy++) {
        const out = oy * outWidth;
        const row = plane + (oy * sh - ph + ky) * inWidth;
        let ox = 0;
        if (unrolled) {
          for (; ox < innerStart; ox++) {
            sums[out + ox]! += bounded(x, row, weights, w, kernelWidth, ox - pw, inWidth);
          }
          if (kernelWidth === 5) {
            for (let at = row + ox - pw; ox < innerEnd; ox++, at++) {
              sums[out + ox]! += w0 * x[at]! + w1 * x[at + 1]! + w2 * x[at + 2]! +
                w3 * x[at + 3]! + w4 * x[at + 4]!;
            }
          } else {
            for (let at = row + ox - pw; ox < innerEnd; ox++, at++) {
              sums[out + ox]! += w0 * x[at]! + w1 * x[at + 1]! + w2 * x[at + 2]!;
            }
          }
        }
        for (; ox < outWidth; ox++) {
          sums[out + ox]! += bounded(x, row, weights, w, kernelWidth, ox * sw - pw, inWidth);
        }
      }
    }
    y.set(sums.subarray(0, pixels), yOffset + c * pixels);
  }
}

/**
 * Runs a plan on the CPU.
 *
 * @example Classify a blank line
 * ```ts ignore
 * const backend = new CpuBackend(plan);
 * const probabilities = backend.run(new Float32Array(3 * 48 * 192), 1); // [1, 2]
 * ```
 */
export class CpuBackend {
  readonly #plan: Plan;
  readonly #prepared: Prepared[];
  #buffers: Float32Array[] = [];
  #col = new Float32Array(0);
  /** One output plane of a depthwise convolution, summed in float64. */
  #sums = new Float64Array(0);
  #capacity = 0;

  /**
   * Prepares the weights.
   *
   * @param plan The plan.
   */
  constructor(plan: Plan) {
    this.#plan = plan;
    this.#prepared = plan.steps.map((step) => {
      if (step.op !== "conv" || step.group !== 1) return { step };
      const k = step.weights.length / step.outChannels;
      const packed = new Float32Array(step.weights.length);
      for (let o = 0; o < step.outChannels; o++) {
        for (let p = 0; p < k; p++) packed[p * step.outChannels + o] = step.weights[o * k + p]!;
      }
      return { step, packed };
    });
  }

  #reserve(batch: number): void {
    if (batch <= this.#capacity) return;
    this.#buffers = this.#plan.buffers.map((size) => new Float32Array(size * batch));
    let col = 0;
    for (const step of this.#plan.steps) {
      if (step.op === "conv" && step.group === 1 && !isPointwise(step)) {
        col = Math.max(
          col,
          step.weights.length / step.outChannels * step.outHeight * step.outWidth,
        );
      }
    }
    this.#col = new Float32Array(col);
    let plane = 0;
    for (const step of this.#plan.steps) {
      if (step.op === "conv") plane = Math.max(plane, step.outHeight * step.outWidth);
    }
    this.#sums = new Float64Array(plane);
    this.#capacity = batch;
  }

  /**
   * Runs a batch.
   *
   * @param input `[batch, ...plan.input.shape]` float32.
   * @param batch The number of samples.
   * @returns `[batch, ...plan.output.shape]` float32.
   */
  run(input: Float32Array, batch: number): Float32Array {
    const sizes = this.#plan.buffers;
    if (input.length !== batch * sizes[this.#plan.input.buffer]!) {
      throw new RangeError(
        `Input has ${input.length} values, not ${batch} x ${sizes[this.#plan.input.buffer]}`,
      );
    }
    this.#reserve(batch);
    const buffers = this.#buffers;
    buffers[this.#plan.input.buffer]!.set(input);
    for (const { step, packed } of this.#prepared) {
      switch (step.op) {
        case "conv": {
          const x = buffers[step.input]!;
          const y = buffers[step.output]!;
          const pixels = step.outHeight * step.outWidth;
          const k = step.weights.length / step.outChannels;
          for (let n = 0; n < batch; n++) {
            const xOffset = n * step.inChannels * step.inHeight * step.inWidth;
            const yOffset = n * step.outChannels * pixels;
            if (step.group !== 1) depthwise(step, x, xOffset, y, yOffset, this.#sums);
            else if (isPointwise(step)) {
              gemm(step.outChannels, pixels, k, packed!, x, xOffset, y, yOffset);
            } else {
              im2col(step, x, xOffset, this.#col);
              gemm(step.outChannels, pixels, k, packed!, this.#col, 0, y, yOffset);
            }
            biasActivation(y, yOffset, step.bias, pixels, step.activation);
          }
          break;
        }
        case "add": {
          const [a, b, y] = [buffers[step.a]!, buffers[step.b]!, buffers[step.output]!];
          for (let i = 0; i < batch * step.size; i++) y[i] = a[i]! + b[i]!;
          break;
        }
        case "scale": {
          const [x, s, y] = [buffers[step.input]!, buffers[step.scale]!, buffers[step.output]!];
          for (let nc = 0; nc < batch * step.channels; nc++) {
            const factor = s[nc]!;
            for (let i = nc * step.pixels; i < (nc + 1) * step.pixels; i++) y[i] = x[i]! * factor;
          }
          break;
        }
        case "globalAveragePool": {
          const [x, y] = [buffers[step.input]!, buffers[step.output]!];
          for (let nc = 0; nc < batch * step.channels; nc++) {
            let sum = 0;
            for (let i = nc * step.pixels; i < (nc + 1) * step.pixels; i++) sum += x[i]!;
            y[nc] = sum / step.pixels;
          }
          break;
        }
        case "maxPool": {
          const [x, y] = [buffers[step.input]!, buffers[step.output]!];
          const { inHeight, inWidth, outHeight, outWidth } = step;
          for (let nc = 0; nc < batch * step.channels; nc++) {
            for (let oy = 0; oy < outHeight; oy++) {
              for (let ox = 0; ox < outWidth; ox++) {
                let best = -Infinity;
                for (let ky = 0; ky < step.kernelHeight; ky++) {
                  const line = (nc * inHeight + oy * step.strideHeight + ky) * inWidth;
                  for (let kx = 0; kx < step.kernelWidth; kx++) {
                    best = Math.max(best, x[line + ox * step.strideWidth + kx]!);
                  }
                }
                y[(nc * outHeight + oy) * outWidth + ox] = best;
              }
            }
          }
          break;
        }
        case "softmax": {
          const [x, y] = [buffers[step.input]!, buffers[step.output]!];
          for (let n = 0; n < batch; n++) {
            const row = n * step.classes;
            let max = -Infinity;
            for (let c = 0; c < step.classes; c++) max = Math.max(max, x[row + c]!);
            let sum = 0;
            for (let c = 0; c < step.classes; c++) sum += Math.exp(x[row + c]! - max);
            for (let c = 0; c < step.classes; c++) y[row + c] = Math.exp(x[row + c]! - max) / sum;
          }
          break;
        }
      }
    }
    const output = buffers[this.#plan.output.buffer]!;
    return output.slice(0, batch * this.#plan.output.shape.reduce((a, b) => a * b, 1));
  }
}
