/**
 * The plan on a GPU: the matrix products with cuBLAS SGEMM (a convolution as im2col + one
 * strided-batched SGEMM over the batch, a 1x1 convolution directly, a 1x1 convolution over 1x1
 * images — squeeze-and-excitation and the classifier — as one SGEMM over the whole batch), and
 * the rest with the kernels of `kernels.cu`, compiled with NVRTC when the backend loads and
 * launched through the driver API. All on the legacy default stream, which orders the copies,
 * SGEMMs and launches; the output copy waits for them all.
 *
 * It uses the CUDA context current on the calling thread (a Worker pinned to `cuda:N` has its
 * GPU's primary context current before the factory runs); elsewhere it makes the device's
 * primary context current itself.
 *
 * Over 500 lines for a reason: every SGEMM and launch is spelled out argument by argument, beside
 * the layout reasoning it follows; split up, the reasoning and the calls would drift apart.
 *
 * @module
 */

import {
  checkCublas,
  checkCuda,
  compileKernels,
  CUBLAS_OP_N,
  CUBLAS_OP_T,
  type Cuda,
  type CudaLibraryPaths,
  currentComputeCapability,
  openCuda,
} from "./cuda.ts";
import { type Activation, type ConvStep, im2colSize, isPointwise, type Plan } from "./plan.ts";

/** Where `kernels.cu` is. */
export const KERNELS_SOURCE: URL = new URL("./kernels.cu", import.meta.url);

/**
 * Each kernel's parameters, as `kernels.cu` declares them: `p` a device pointer, `i` an `int`,
 * `f` a `float`. A test compares this table with the source.
 */
export const KERNELS = {
  im2col: "ppiiiiiiiiiiii",
  bias_activation: "ppiiiiff",
  depthwise_conv: "ppppiiiiiiiiiiiiiff",
  add_tensors: "pppi",
  scale_channels: "pppii",
  global_average_pool: "ppii",
  max_pool: "ppiiiiiiiii",
  softmax: "ppii",
} as const;

type KernelName = keyof typeof KERNELS;

const THREADS_PER_BLOCK = 256;
const FLOAT_BYTES = 4;
/** Each weight and bias starts on a 256-byte boundary of the blob, as a cuMemAlloc buffer would. */
const ALIGN_FLOATS = 64;
/** Fills each kernel parameter's 8-byte slot before the value is written (see `#launch`). */
const SLOT_FILL = 0xa5;

const ACTIVATION_CODES = { none: 0, relu: 1, hardsigmoid: 2, hardswish: 3 } as const;

function activationArgs(activation: Activation): [number, number, number] {
  const code = ACTIVATION_CODES[activation.kind];
  return "alpha" in activation ? [code, activation.alpha, activation.beta] : [code, 0, 0];
}

function align(floats: number): number {
  return Math.ceil(floats / ALIGN_FLOATS) * ALIGN_FLOATS;
}

/** Options of {@linkcode GpuBackend.create}. */
export interface GpuBackendOptions {
  /** Where the CUDA libraries are, where not in the usual places. */
  libraries?: CudaLibraryPaths;
  /**
   * The device whose primary context is made current when none is current on this thread.
   *
   * @default {0}
   */
  device?: number;
  /**
   * The kernels' CUDA C source.
   *
   * @default {the contents of kernels.cu}
   */
  source?: string;
}

/** What the backend runs on, for logs and answers. */
export interface GpuBackendInfo {
  /** Where each library was found. */
  readonly libraries: Cuda["paths"];
  /** `sm_90` or `compute_90`: what NVRTC compiled the kernels for. */
  readonly target: string;
  /** NVRTC's version. */
  readonly nvrtcVersion: string;
  /** The number of kernels loaded. */
  readonly kernels: number;
  /** cuBLAS's version (`cublasGetVersion`: 130000 for 13.0.0; 0 when it cannot say). */
  readonly cublasVersion: number;
}

/**
 * Runs a plan on the current GPU.
 *
 * @example Classify on the GPU
 * ```ts ignore
 * using backend = GpuBackend.create(plan);
 * const probabilities = backend.run(input, 8); // [8, 2]
 * ```
 */
export class GpuBackend implements Disposable {
  /** Where it runs. */
  readonly info: GpuBackendInfo;
  readonly #cuda: Cuda;
  readonly #plan: Plan;
  readonly #module: Deno.PointerValue;
  readonly #functions: Map<KernelName, Deno.PointerValue>;
  readonly #cublas: Deno.PointerValue;
  readonly #retained: number | undefined;
  /** Every weight and bias, in one allocation. */
  readonly #weights: bigint;
  /** Float offsets of each conv step's weights and bias in `#weights`, by step index. */
  readonly #weightOffsets: Map<number, { weights: number; bias: number }>;
  /** The plan's buffers on the device, `#capacity` samples each. */
  #buffers: bigint[] = [];
  /** The im2col workspace, `#capacity` samples. */
  #col = 0n;
  #capacity = 0;
  readonly #alpha = new Float32Array([1]);
  readonly #beta = new Float32Array([0]);

  private constructor(
    cuda: Cuda,
    plan: Plan,
    parts: {
      module: Deno.PointerValue;
      functions: Map<KernelName, Deno.PointerValue>;
      cublas: Deno.PointerValue;
      retained: number | undefined;
      weights: bigint;
      weightOffsets: Map<number, { weights: number; bias: number }>;
      info: GpuBackendInfo;
    },
  ) {
    this.#cuda = cuda;
    this.#plan = plan;
    this.#module = parts.module;
    this.#functions = parts.functions;
    this.#cublas = parts.cublas;
    this.#retained = parts.retained;
    this.#weights = parts.weights;
    this.#weightOffsets = parts.weightOffsets;
    this.info = parts.info;
  }

  /**
   * Opens the libraries, compiles and loads the kernels, and uploads the weights.
   *
   * @param plan The plan.
   * @param options Libraries, device and kernel source.
   * @returns The backend.
   * @throws {Error} Naming what is missing (`no CUDA driver`, `no cuBLAS`, `no NVRTC`) or the
   *   call that failed.
   */
  static create(plan: Plan, options: GpuBackendOptions = {}): GpuBackend {
    const cuda = openCuda(options.libraries);
    const { driver } = cuda;
    checkCuda(driver, "cuInit", driver.cuInit(0));
    // A Worker pinned to a GPU has its context current already; elsewhere use the device's.
    const current = new BigUint64Array(1);
    checkCuda(driver, "cuCtxGetCurrent", driver.cuCtxGetCurrent(current));
    let retained: number | undefined;
    if (current[0] === 0n) {
      const device = options.device ?? 0;
      const handle = new Int32Array(1);
      checkCuda(driver, "cuDeviceGet", driver.cuDeviceGet(handle, device));
      const context = new BigUint64Array(1);
      checkCuda(
        driver,
        "cuDevicePrimaryCtxRetain",
        driver.cuDevicePrimaryCtxRetain(context, handle[0]!),
      );
      retained = handle[0]!;
      checkCuda(
        driver,
        "cuCtxSetCurrent",
        driver.cuCtxSetCurrent(Deno.UnsafePointer.create(context[0]!)),
      );
    }
    const source = options.source ?? Deno.readTextFileSync(KERNELS_SOURCE);
    const compiled = compileKernels(cuda.nvrtc, source, currentComputeCapability(driver));
    const moduleSlot = new BigUint64Array(1);
    checkCuda(driver, "cuModuleLoadData", driver.cuModuleLoadData(moduleSlot, compiled.image));
    const module = Deno.UnsafePointer.create(moduleSlot[0]!);
    const functions = new Map<KernelName, Deno.PointerValue>();
    for (const name of Object.keys(KERNELS) as KernelName[]) {
      const slot = new BigUint64Array(1);
      checkCuda(
        driver,
        `cuModuleGetFunction (${name})`,
        driver.cuModuleGetFunction(slot, module, new TextEncoder().encode(`${name}\0`)),
      );
      functions.set(name, Deno.UnsafePointer.create(slot[0]!));
    }
    const handleSlot = new BigUint64Array(1);
    checkCublas("cublasCreate", cuda.cublas.cublasCreate_v2(handleSlot));
    const cublas = Deno.UnsafePointer.create(handleSlot[0]!);
    const cublasVersion = new Int32Array(1);
    if (cuda.cublas.cublasGetVersion_v2 !== null) {
      checkCublas("cublasGetVersion", cuda.cublas.cublasGetVersion_v2(cublas, cublasVersion));
    }

    // One blob of weights and biases, each on a 256-byte boundary.
    const weightOffsets = new Map<number, { weights: number; bias: number }>();
    let floats = 0;
    plan.steps.forEach((step, index) => {
      if (step.op !== "conv") return;
      const weights = floats;
      floats += align(step.weights.length);
      weightOffsets.set(index, { weights, bias: floats });
      floats += align(step.bias.length);
    });
    const blob = new Float32Array(floats);
    plan.steps.forEach((step, index) => {
      if (step.op !== "conv") return;
      const at = weightOffsets.get(index)!;
      blob.set(step.weights, at.weights);
      blob.set(step.bias, at.bias);
    });
    const weightSlot = new BigUint64Array(1);
    checkCuda(
      driver,
      "cuMemAlloc (weights)",
      driver.cuMemAlloc_v2(weightSlot, BigInt(blob.byteLength)),
    );
    checkCuda(
      driver,
      "cuMemcpyHtoD (weights)",
      driver.cuMemcpyHtoD_v2(weightSlot[0]!, blob, BigInt(blob.byteLength)),
    );
    return new GpuBackend(cuda, plan, {
      module,
      functions,
      cublas,
      retained,
      weights: weightSlot[0]!,
      weightOffsets,
      info: {
        libraries: cuda.paths,
        target: compiled.target,
        nvrtcVersion: compiled.nvrtcVersion,
        kernels: functions.size,
        cublasVersion: cublasVersion[0]!,
      },
    });
  }

  /**
   * Room for `batch` samples: one device allocation per buffer and one for the im2col workspace
   * (not one for all: the stand-in driver's guards then catch a step writing past its buffer).
   */
  #reserve(batch: number): void {
    if (batch <= this.#capacity) return;
    const { driver } = this.#cuda;
    this.#freeActivations();
    const capacity = Math.max(batch, 2 * this.#capacity);
    const allocate = (floats: number, what: string): bigint => {
      const slot = new BigUint64Array(1);
      checkCuda(
        driver,
        `cuMemAlloc (${what})`,
        driver.cuMemAlloc_v2(slot, BigInt(Math.max(1, floats) * FLOAT_BYTES)),
      );
      return slot[0]!;
    };
    this.#buffers = this.#plan.buffers.map((size, i) => allocate(size * capacity, `buffer ${i}`));
    this.#col = allocate(im2colSize(this.#plan) * capacity, "im2col workspace");
    this.#capacity = capacity;
  }

  /** Frees the activations; statuses are not checked (after a fault, frees fail too). */
  #freeActivations(): void {
    const { driver } = this.#cuda;
    for (const pointer of [...this.#buffers, this.#col]) {
      if (pointer !== 0n) driver.cuMemFree_v2(pointer);
    }
    this.#buffers = [];
    this.#col = 0n;
    this.#capacity = 0;
  }

  #buffer(index: number): bigint {
    return this.#buffers[index]!;
  }

  #weight(offset: number): bigint {
    return this.#weights + BigInt(offset * FLOAT_BYTES);
  }

  /**
   * Launches a kernel with one thread per output value.
   *
   * Each parameter gets its own 8-byte slot, and `kernelParams` points at each slot. The driver
   * reads as many bytes as the kernel declares; the slots start filled with 0xa5 bytes, so a
   * 4-byte value the kernel reads as 8 bytes shows up as garbage (in the tests' CPU emulation as
   * on a GPU) instead of passing by luck with zero upper bytes.
   */
  #launch(name: KernelName, total: number, ...args: (bigint | number)[]): void {
    const signature = KERNELS[name];
    if (args.length !== signature.length) {
      throw new Error(`Kernel ${name} takes ${signature.length} arguments, not ${args.length}`);
    }
    const slots = new Uint8Array(8 * args.length).fill(SLOT_FILL);
    const view = new DataView(slots.buffer);
    args.forEach((arg, i) => {
      const kind = signature[i];
      if (kind === "p" && typeof arg === "bigint") view.setBigUint64(8 * i, arg, true);
      else if (kind === "i" && typeof arg === "number" && Number.isInteger(arg)) {
        view.setInt32(8 * i, arg, true);
      } else if (kind === "f" && typeof arg === "number") view.setFloat32(8 * i, arg, true);
      else throw new Error(`Kernel ${name}: argument ${i} (${arg}) is not of kind '${kind}'`);
    });
    const base = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(slots)));
    const params = BigUint64Array.from(args, (_, i) => base + BigInt(8 * i));
    const blocks = Math.ceil(total / THREADS_PER_BLOCK);
    checkCuda(
      this.#cuda.driver,
      `cuLaunchKernel (${name})`,
      this.#cuda.driver.cuLaunchKernel(
        this.#functions.get(name)!,
        blocks,
        1,
        1,
        THREADS_PER_BLOCK,
        1,
        1,
        0,
        null,
        params,
        null,
      ),
    );
  }

  /**
   * `Y = W · X` for each sample, row-major: `W` is `[m, k]`, `X` is `[k, n]` per sample, `Y` is
   * `[m, n]` per sample. cuBLAS is column-major: a row-major matrix is its transpose there, so it
   * computes `Yᵀ = Xᵀ · Wᵀ` (an `n x m` product) with the operands swapped and none transposed.
   */
  #gemmPerSample(
    batch: number,
    m: number,
    n: number,
    k: number,
    w: bigint,
    x: bigint,
    y: bigint,
  ): void {
    checkCublas(
      "cublasSgemmStridedBatched",
      this.#cuda.cublas.cublasSgemmStridedBatched(
        this.#cublas,
        CUBLAS_OP_N,
        CUBLAS_OP_N,
        n,
        m,
        k,
        this.#alpha,
        x,
        n,
        BigInt(k * n),
        w,
        k,
        0n,
        this.#beta,
        y,
        n,
        BigInt(m * n),
        batch,
      ),
    );
  }

  /**
   * A 1x1 convolution over 1x1 images for the whole batch: `Y[batch, out] = X[batch, in] · Wᵀ`
   * with `W` row-major `[out, in]`. Column-major, that is `Yᵀ[out, batch] = W[out, in] · Xᵀ`,
   * where the stored `W` reads as `Wᵀ` and so is transposed back (`CUBLAS_OP_T`).
   */
  #gemmBatch(batch: number, out: number, inp: number, w: bigint, x: bigint, y: bigint): void {
    checkCublas(
      "cublasSgemm",
      this.#cuda.cublas.cublasSgemm_v2(
        this.#cublas,
        CUBLAS_OP_T,
        CUBLAS_OP_N,
        out,
        batch,
        inp,
        this.#alpha,
        w,
        inp,
        x,
        inp,
        this.#beta,
        y,
        out,
      ),
    );
  }

  #conv(step: ConvStep, index: number, batch: number): void {
    const at = this.#weightOffsets.get(index)!;
    const w = this.#weight(at.weights);
    const bias = this.#weight(at.bias);
    const x = this.#buffer(step.input);
    const y = this.#buffer(step.output);
    const pixels = step.outHeight * step.outWidth;
    const total = batch * step.outChannels * pixels;
    const [act, alpha, beta] = activationArgs(step.activation);
    if (step.group !== 1) {
      this.#launch(
        "depthwise_conv",
        total,
        x,
        w,
        bias,
        y,
        step.outChannels,
        step.inHeight,
        step.inWidth,
        step.outHeight,
        step.outWidth,
        step.kernelHeight,
        step.kernelWidth,
        step.strideHeight,
        step.strideWidth,
        step.padHeight,
        step.padWidth,
        total,
        act,
        alpha,
        beta,
      );
      return;
    }
    const k = step.weights.length / step.outChannels;
    if (isPointwise(step) && pixels === 1) {
      this.#gemmBatch(batch, step.outChannels, k, w, x, y);
    } else if (isPointwise(step)) {
      this.#gemmPerSample(batch, step.outChannels, pixels, k, w, x, y);
    } else {
      const col = this.#col;
      const colTotal = batch * k * pixels;
      this.#launch(
        "im2col",
        colTotal,
        x,
        col,
        step.inChannels,
        step.inHeight,
        step.inWidth,
        step.kernelHeight,
        step.kernelWidth,
        step.strideHeight,
        step.strideWidth,
        step.padHeight,
        step.padWidth,
        step.outHeight,
        step.outWidth,
        colTotal,
      );
      this.#gemmPerSample(batch, step.outChannels, pixels, k, w, col, y);
    }
    this.#launch(
      "bias_activation",
      total,
      y,
      bias,
      step.outChannels,
      pixels,
      total,
      act,
      alpha,
      beta,
    );
  }

  /**
   * Runs a batch: the input to the device, every step, the output back.
   *
   * @param input `[batch, ...plan.input.shape]` float32.
   * @param batch The number of samples.
   * @returns `[batch, ...plan.output.shape]` float32.
   */
  run(input: Float32Array, batch: number): Float32Array {
    const plan = this.#plan;
    const inputSize = plan.input.shape.reduce((a, b) => a * b, 1);
    if (input.length !== batch * inputSize) {
      throw new RangeError(`Input has ${input.length} values, not ${batch} x ${inputSize}`);
    }
    this.#reserve(batch);
    const { driver } = this.#cuda;
    checkCuda(
      driver,
      "cuMemcpyHtoD (input)",
      driver.cuMemcpyHtoD_v2(this.#buffer(plan.input.buffer), input, BigInt(input.byteLength)),
    );
    plan.steps.forEach((step, index) => {
      switch (step.op) {
        case "conv":
          this.#conv(step, index, batch);
          break;
        case "add": {
          const total = batch * step.size;
          const [a, b, y] = [step.a, step.b, step.output].map((i) => this.#buffer(i));
          this.#launch("add_tensors", total, a!, b!, y!, total);
          break;
        }
        case "scale": {
          const total = batch * step.channels * step.pixels;
          const [x, s, y] = [step.input, step.scale, step.output].map((i) => this.#buffer(i));
          this.#launch("scale_channels", total, x!, s!, y!, step.pixels, total);
          break;
        }
        case "globalAveragePool": {
          const total = batch * step.channels;
          const [x, y] = [this.#buffer(step.input), this.#buffer(step.output)];
          this.#launch("global_average_pool", total, x, y, step.pixels, total);
          break;
        }
        case "maxPool": {
          const total = batch * step.channels * step.outHeight * step.outWidth;
          this.#launch(
            "max_pool",
            total,
            this.#buffer(step.input),
            this.#buffer(step.output),
            step.inHeight,
            step.inWidth,
            step.outHeight,
            step.outWidth,
            step.kernelHeight,
            step.kernelWidth,
            step.strideHeight,
            step.strideWidth,
            total,
          );
          break;
        }
        case "softmax":
          this.#launch(
            "softmax",
            batch,
            this.#buffer(step.input),
            this.#buffer(step.output),
            step.classes,
            batch,
          );
          break;
      }
    });
    const output = new Float32Array(batch * plan.output.shape.reduce((a, b) => a * b, 1));
    // Synchronous on the default stream: it waits for every launch and SGEMM above, and reports
    // a fault any of them hit.
    checkCuda(
      driver,
      "cuMemcpyDtoH (output)",
      driver.cuMemcpyDtoH_v2(output, this.#buffer(plan.output.buffer), BigInt(output.byteLength)),
    );
    return output;
  }

  /** Frees the device memory, the module and the cuBLAS handle. */
  [Symbol.dispose](): void {
    const { driver, cublas } = this.#cuda;
    this.#freeActivations();
    driver.cuMemFree_v2(this.#weights);
    cublas.cublasDestroy_v2(this.#cublas);
    driver.cuModuleUnload(this.#module);
    if (this.#retained !== undefined) driver.cuDevicePrimaryCtxRelease_v2(this.#retained);
  }
}
