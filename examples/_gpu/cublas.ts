/**
 * The part of cuBLAS both GPU examples call through Deno FFI (`linear_gpu/cublas.ts` and
 * `text_direction/cuda.ts`): a handle's life and single-precision GEMM, with the signatures of
 * CUDA 12/13's `cublas_api.h` (cuBLAS 12 and 13 both export these names). Each example spreads
 * this table into the one it opens, adding what it alone needs.
 *
 * Device pointers travel as `u64`: a `CUdeviceptr` is an unsigned 64-bit integer.
 *
 * @module
 */

/** `cublasCreate_v2`, `cublasDestroy_v2` and `cublasSgemm_v2`. */
export const CUBLAS_SGEMM_SYMBOLS = {
  cublasCreate_v2: { parameters: ["buffer"], result: "i32" },
  cublasDestroy_v2: { parameters: ["pointer"], result: "i32" },
  cublasSgemm_v2: {
    parameters: [
      "pointer", // handle
      "i32", // transa
      "i32", // transb
      "i32", // m
      "i32", // n
      "i32", // k
      "buffer", // alpha (host)
      "u64", // A
      "i32", // lda
      "u64", // B
      "i32", // ldb
      "buffer", // beta (host)
      "u64", // C
      "i32", // ldc
    ],
    result: "i32",
  },
} as const;

/** `CUBLAS_OP_N`: the matrix as stored (column-major). */
export const CUBLAS_OP_N = 0;
/** `CUBLAS_OP_T`: the matrix transposed. */
export const CUBLAS_OP_T = 1;
