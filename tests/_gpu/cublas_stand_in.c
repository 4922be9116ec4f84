/*
 * A stand-in for cuBLAS (`libcublas.so`) on hosts without a GPU: handle creation and SGEMM,
 * plain and strided-batched, with cuBLAS's column-major semantics and argument checks
 * (cublas_api.h's signatures, declared here by hand). The matrices are in the stand-in driver's
 * device memory, which is host memory; this library is linked against that driver to check that
 * every matrix an SGEMM would touch lies inside one live allocation (a wrong leading dimension,
 * stride or buffer size fails with CUBLAS_STATUS_EXECUTION_FAILED and a line on stderr).
 *
 * As in cuBLAS, C is not read when beta is 0 (the stand-in's fresh memory is NaN).
 * A test tool: it checks how code calls cuBLAS, not cuBLAS.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_stand_in.h"

typedef struct {
  int magic;
} StandInHandle;
typedef StandInHandle* cublasHandle_t;

enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
};
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };

#define MAGIC 0x5eed

int cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == NULL) return CUBLAS_STATUS_INVALID_VALUE;
  /* cuBLAS works in the context current on the thread. */
  if (stand_in_require_context() != CUDA_SUCCESS) return CUBLAS_STATUS_NOT_INITIALIZED;
  StandInHandle* created = malloc(sizeof(StandInHandle));
  if (created == NULL) return CUBLAS_STATUS_ALLOC_FAILED;
  created->magic = MAGIC;
  *handle = created;
  return CUBLAS_STATUS_SUCCESS;
}

int cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == NULL || handle->magic != MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->magic = 0;
  free(handle);
  return CUBLAS_STATUS_SUCCESS;
}

int cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  if (handle == NULL || handle->magic != MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (version == NULL) return CUBLAS_STATUS_INVALID_VALUE;
  *version = 120800;
  return CUBLAS_STATUS_SUCCESS;
}

static int max1(int a) { return a > 1 ? a : 1; }

/* Floats spanned by a column-major rows x cols matrix with leading dimension ld. */
static size_t span(int rows, int cols, int ld) {
  if (rows == 0 || cols == 0) return 0;
  return (size_t)(cols - 1) * (size_t)ld + (size_t)rows;
}

static int inside(const char* what, const float* matrix, size_t floats, long long stride,
                  int batch) {
  size_t total = floats == 0 ? 0 : floats + (size_t)stride * (size_t)(batch - 1);
  if (total == 0 || stand_in_memory_contains((CUdeviceptr)(uintptr_t)matrix, total * 4)) {
    return 1;
  }
  fprintf(stderr,
          "stand-in cuBLAS: matrix %s (%zu floats from %p) is not inside one device allocation\n",
          what, total, (const void*)matrix);
  return 0;
}

static int gemm(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                const float* alpha, const float* a, int lda, long long stride_a, const float* b,
                int ldb, long long stride_b, const float* beta, float* c, int ldc,
                long long stride_c, int batch) {
  if (handle == NULL || handle->magic != MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T && transa != CUBLAS_OP_C) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T && transb != CUBLAS_OP_C) || m < 0 ||
      n < 0 || k < 0 || batch < 0 || alpha == NULL || beta == NULL) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  int a_rows = transa == CUBLAS_OP_N ? m : k;
  int a_cols = transa == CUBLAS_OP_N ? k : m;
  int b_rows = transb == CUBLAS_OP_N ? k : n;
  int b_cols = transb == CUBLAS_OP_N ? n : k;
  if (lda < max1(a_rows) || ldb < max1(b_rows) || ldc < max1(m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  if (stand_in_require_context() != CUDA_SUCCESS) return CUBLAS_STATUS_NOT_INITIALIZED;
  size_t a_floats = k == 0 ? 0 : span(a_rows, a_cols, lda);
  size_t b_floats = k == 0 ? 0 : span(b_rows, b_cols, ldb);
  if (!inside("A", a, a_floats, stride_a, batch) || !inside("B", b, b_floats, stride_b, batch) ||
      !inside("C", c, span(m, n, ldc), stride_c, batch)) {
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  for (int s = 0; s < batch; s++) {
    const float* as = a + (size_t)s * (size_t)stride_a;
    const float* bs = b + (size_t)s * (size_t)stride_b;
    float* cs = c + (size_t)s * (size_t)stride_c;
    for (int j = 0; j < n; j++) {
      for (int i = 0; i < m; i++) {
        double sum = 0;
        for (int p = 0; p < k; p++) {
          float av = transa == CUBLAS_OP_N ? as[i + (size_t)p * lda] : as[p + (size_t)i * lda];
          float bv = transb == CUBLAS_OP_N ? bs[p + (size_t)j * ldb] : bs[j + (size_t)p * ldb];
          sum += (double)av * bv;
        }
        float* out = &cs[i + (size_t)j * ldc];
        *out = (float)(*alpha * sum + (*beta == 0.0f ? 0.0 : (double)*beta * *out));
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

int cublasSgemm_v2(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                   const float* alpha, const float* a, int lda, const float* b, int ldb,
                   const float* beta, float* c, int ldc) {
  return gemm(handle, transa, transb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

int cublasSgemmStridedBatched(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                              const float* alpha, const float* a, int lda, long long stride_a,
                              const float* b, int ldb, long long stride_b, const float* beta,
                              float* c, int ldc, long long stride_c, int batch) {
  return gemm(handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
              ldc, stride_c, batch);
}
