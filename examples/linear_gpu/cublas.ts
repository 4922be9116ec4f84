/**
 * `y = xW + b` on the GPU with cuBLAS `sgemm`, through Deno FFI: device memory through the CUDA
 * driver (`libcuda.so.1`), the product through cuBLAS. It runs on the GPU current on the calling
 * thread, which a Worker pinned to `cuda:N` has made current before its factory ran.
 *
 * cuBLAS 12 or 13 is looked for, in order, at `$CUBLAS_LIBRARY`, by the dynamic loader's search
 * (`libcublas.so.12`, `.13`), in the CUDA toolkits (`/usr/local/cuda`, `/usr/local/cuda-13.0`,
 * ...), and in Python environments that have NVIDIA's cuBLAS wheel: the search shared with the
 * text_direction example, in `examples/_gpu/libraries.ts`.
 *
 * @module
 */

import { CUBLAS_OP_N, CUBLAS_SGEMM_SYMBOLS } from "../_gpu/cublas.ts";
import { gpuLibraryCandidates, openGpuLibrary } from "../_gpu/libraries.ts";
import { IN_FEATURES, type LinearWeights, OUT_FEATURES } from "./linear.ts";

const DRIVER_SYMBOLS = {
  cuMemAlloc_v2: { parameters: ["buffer", "usize"], result: "i32" },
  cuMemFree_v2: { parameters: ["u64"], result: "i32" },
  cuMemcpyHtoD_v2: { parameters: ["u64", "buffer", "usize"], result: "i32" },
  cuMemcpyDtoH_v2: { parameters: ["buffer", "u64", "usize"], result: "i32" },
  cuMemcpyDtoD_v2: { parameters: ["u64", "u64", "usize"], result: "i32" },
} as const;

const FLOAT_BYTES = 4;

type Driver = Deno.DynamicLibrary<typeof DRIVER_SYMBOLS>["symbols"];
type Cublas = Deno.DynamicLibrary<typeof CUBLAS_SGEMM_SYMBOLS>["symbols"];

/**
 * Where cuBLAS may be, in the order tried (see `examples/_gpu/libraries.ts`).
 *
 * @returns Library names and paths.
 */
export function cublasCandidates(): string[] {
  return gpuLibraryCandidates("cublas");
}

function openCublas(): { symbols: Cublas; path: string } {
  // cuBLAS 12 and 13 both export cublasSgemm_v2 with this signature.
  const { library, path } = openGpuLibrary("cublas", CUBLAS_SGEMM_SYMBOLS);
  return { symbols: library.symbols, path };
}

function check(what: string, code: number): void {
  if (code !== 0) throw new Error(`${what} failed with status ${code}`);
}

/** The layer in device memory, and cuBLAS to run it. */
export class CublasLinear implements Disposable {
  /** The cuBLAS library that was opened. */
  readonly library: string;
  #driver: Driver;
  #cublas: Cublas;
  #handle: Deno.PointerValue;
  #weights = 0n;
  /** `b` repeated `#capacity` times: copied into `y` before `sgemm` adds `xW` to it. */
  #biasRows = 0n;
  #x = 0n;
  #y = 0n;
  #capacity = 0;
  #bias: Float32Array;

  /**
   * Opens cuBLAS and uploads the weights to the current GPU.
   *
   * @param layer `W` and `b`.
   * @throws {Error} When the driver or cuBLAS cannot be opened, or a CUDA call fails.
   */
  constructor(layer: LinearWeights) {
    this.#driver = Deno.dlopen("libcuda.so.1", DRIVER_SYMBOLS).symbols;
    const { symbols, path } = openCublas();
    this.#cublas = symbols;
    this.library = path;
    const slot = new BigUint64Array(1);
    check("cublasCreate", this.#cublas.cublasCreate_v2(slot));
    this.#handle = Deno.UnsafePointer.create(slot[0]!);
    this.#weights = this.#alloc(layer.weights.byteLength);
    check(
      "cuMemcpyHtoD",
      this.#driver.cuMemcpyHtoD_v2(this.#weights, layer.weights, BigInt(layer.weights.byteLength)),
    );
    this.#bias = layer.bias;
  }

  #alloc(bytes: number): bigint {
    const slot = new BigUint64Array(1);
    check("cuMemAlloc", this.#driver.cuMemAlloc_v2(slot, BigInt(bytes)));
    return slot[0]!;
  }

  #reserve(rows: number): void {
    if (rows <= this.#capacity) return;
    for (const pointer of [this.#x, this.#y, this.#biasRows]) {
      if (pointer !== 0n) this.#driver.cuMemFree_v2(pointer);
    }
    const capacity = Math.max(rows, 2 * this.#capacity);
    this.#x = this.#alloc(capacity * IN_FEATURES * FLOAT_BYTES);
    this.#y = this.#alloc(capacity * OUT_FEATURES * FLOAT_BYTES);
    this.#biasRows = this.#alloc(capacity * OUT_FEATURES * FLOAT_BYTES);
    const rowsOfBias = new Float32Array(capacity * OUT_FEATURES);
    for (let r = 0; r < capacity; r++) rowsOfBias.set(this.#bias, r * OUT_FEATURES);
    check(
      "cuMemcpyHtoD",
      this.#driver.cuMemcpyHtoD_v2(this.#biasRows, rowsOfBias, BigInt(rowsOfBias.byteLength)),
    );
    this.#capacity = capacity;
  }

  /**
   * `y = xW + b` for a batch.
   *
   * @param x Row-major `[rows, IN_FEATURES]`.
   * @param rows The batch size.
   * @returns Row-major `[rows, OUT_FEATURES]`.
   */
  forward(x: Float32Array, rows: number): Float32Array {
    this.#reserve(rows);
    const y = new Float32Array(rows * OUT_FEATURES);
    check(
      "cuMemcpyHtoD",
      this.#driver.cuMemcpyHtoD_v2(this.#x, x, BigInt(rows * IN_FEATURES * FLOAT_BYTES)),
    );
    check(
      "cuMemcpyDtoD",
      this.#driver.cuMemcpyDtoD_v2(this.#y, this.#biasRows, BigInt(y.byteLength)),
    );
    // cuBLAS is column-major: row-major y [rows, out] is yᵀ [out, rows] column-major, and
    // yᵀ = Wᵀ·xᵀ, where row-major W [in, out] is Wᵀ [out, in] and x [rows, in] is xᵀ [in, rows].
    check(
      "cublasSgemm",
      this.#cublas.cublasSgemm_v2(
        this.#handle,
        CUBLAS_OP_N,
        CUBLAS_OP_N,
        OUT_FEATURES,
        rows,
        IN_FEATURES,
        new Float32Array([1]),
        this.#weights,
        OUT_FEATURES,
        this.#x,
        IN_FEATURES,
        new Float32Array([1]),
        this.#y,
        OUT_FEATURES,
      ),
    );
    // Synchronous, and on the same (legacy default) stream as the sgemm, so it waits for it.
    check("cuMemcpyDtoH", this.#driver.cuMemcpyDtoH_v2(y, this.#y, BigInt(y.byteLength)));
    return y;
  }

  /** Frees the device memory and the cuBLAS handle. */
  [Symbol.dispose](): void {
    for (const pointer of [this.#x, this.#y, this.#biasRows, this.#weights]) {
      if (pointer !== 0n) this.#driver.cuMemFree_v2(pointer);
    }
    this.#cublas.cublasDestroy_v2(this.#handle);
  }
}
