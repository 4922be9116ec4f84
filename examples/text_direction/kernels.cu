// The CUDA kernels of the text-direction classifier's GPU backend (gpu.ts), compiled when the
// backend loads with NVRTC for the GPU it runs on. The matrix products (convolutions after
// im2col, 1x1 convolutions, the classifier's MatMul) are cuBLAS SGEMMs; these kernels do the rest.
//
// Every kernel computes one output value per thread, indexed by blockIdx.x * blockDim.x +
// threadIdx.x, and returns past `total`. None uses shared memory or __syncthreads(): the tests run
// this same file on the CPU (tests/_gpu/kernel_emulation.h), one thread after another.
//
// Layouts are NCHW, samples packed one after the other. The parameter lists are mirrored in
// gpu.ts (KERNELS), which a test compares with this file.

#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_HARDSIGMOID 2
#define ACT_HARDSWISH 3

__device__ __forceinline__ float activate(float x, int act, float alpha, float beta) {
  if (act == ACT_RELU) return fmaxf(x, 0.0f);
  if (act == ACT_HARDSIGMOID) return fminf(fmaxf(alpha * x + beta, 0.0f), 1.0f);
  if (act == ACT_HARDSWISH) return x * fminf(fmaxf(alpha * x + beta, 0.0f), 1.0f);
  return x;
}

__device__ __forceinline__ int thread_index() {
  return (int)(blockIdx.x * blockDim.x + threadIdx.x);
}

// col[n][(c * kernel_h + ky) * kernel_w + kx][oy * out_w + ox]: the patches of each sample, as
// the right-hand matrix of the convolution's product W[out_c][c * kh * kw] x col[n].
extern "C" __global__ void im2col(const float* __restrict__ x, float* __restrict__ col,
                                  int channels, int in_h, int in_w, int kernel_h, int kernel_w,
                                  int stride_h, int stride_w, int pad_h, int pad_w, int out_h,
                                  int out_w, int total) {
  int i = thread_index();
  if (i >= total) return;
  int ox = i % out_w;
  int oy = (i / out_w) % out_h;
  int row = (i / (out_w * out_h)) % (channels * kernel_h * kernel_w);
  int n = i / (out_w * out_h * channels * kernel_h * kernel_w);
  int kx = row % kernel_w;
  int ky = (row / kernel_w) % kernel_h;
  int c = row / (kernel_w * kernel_h);
  int iy = oy * stride_h - pad_h + ky;
  int ix = ox * stride_w - pad_w + kx;
  bool inside = iy >= 0 && iy < in_h && ix >= 0 && ix < in_w;
  col[i] = inside ? x[((n * channels + c) * in_h + iy) * in_w + ix] : 0.0f;
}

// y[n][c][p] = activate(y[n][c][p] + bias[c]) in place, after a GEMM.
extern "C" __global__ void bias_activation(float* __restrict__ y, const float* __restrict__ bias,
                                           int channels, int pixels, int total, int act,
                                           float alpha, float beta) {
  int i = thread_index();
  if (i >= total) return;
  int c = (i / pixels) % channels;
  y[i] = activate(y[i] + bias[c], act, alpha, beta);
}

// A depthwise convolution (one filter per channel) with its bias and activation.
extern "C" __global__ void depthwise_conv(const float* __restrict__ x,
                                          const float* __restrict__ w,
                                          const float* __restrict__ bias, float* __restrict__ y,
                                          int channels, int in_h, int in_w, int out_h, int out_w,
                                          int kernel_h, int kernel_w, int stride_h, int stride_w,
                                          int pad_h, int pad_w, int total, int act, float alpha,
                                          float beta) {
  int i = thread_index();
  if (i >= total) return;
  int ox = i % out_w;
  int oy = (i / out_w) % out_h;
  int nc = i / (out_w * out_h);
  int c = nc % channels;
  const float* plane = x + (long long)nc * in_h * in_w;
  const float* filter = w + c * kernel_h * kernel_w;
  float sum = 0.0f;
  for (int ky = 0; ky < kernel_h; ky++) {
    int iy = oy * stride_h - pad_h + ky;
    if (iy < 0 || iy >= in_h) continue;
    for (int kx = 0; kx < kernel_w; kx++) {
      int ix = ox * stride_w - pad_w + kx;
      if (ix < 0 || ix >= in_w) continue;
      sum += plane[iy * in_w + ix] * filter[ky * kernel_w + kx];
    }
  }
  y[i] = activate(sum + bias[c], act, alpha, beta);
}

// y = a + b (a residual connection).
extern "C" __global__ void add_tensors(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ y, int total) {
  int i = thread_index();
  if (i >= total) return;
  y[i] = a[i] + b[i];
}

// y[n][c][p] = x[n][c][p] * s[n][c] (squeeze-and-excitation).
extern "C" __global__ void scale_channels(const float* __restrict__ x,
                                          const float* __restrict__ s, float* __restrict__ y,
                                          int pixels, int total) {
  int i = thread_index();
  if (i >= total) return;
  y[i] = x[i] * s[i / pixels];
}

// y[n][c] = mean of x[n][c][...]; total = samples * channels. One thread sums one plane (at most
// a few thousand values here), which keeps the kernel free of shared memory.
extern "C" __global__ void global_average_pool(const float* __restrict__ x,
                                               float* __restrict__ y, int pixels, int total) {
  int i = thread_index();
  if (i >= total) return;
  const float* plane = x + (long long)i * pixels;
  float sum = 0.0f;
  for (int p = 0; p < pixels; p++) sum += plane[p];
  y[i] = sum / (float)pixels;
}

// Max pooling without padding.
extern "C" __global__ void max_pool(const float* __restrict__ x, float* __restrict__ y, int in_h,
                                    int in_w, int out_h, int out_w, int kernel_h, int kernel_w,
                                    int stride_h, int stride_w, int total) {
  int i = thread_index();
  if (i >= total) return;
  int ox = i % out_w;
  int oy = (i / out_w) % out_h;
  int nc = i / (out_w * out_h);
  const float* plane = x + (long long)nc * in_h * in_w;
  float best = plane[oy * stride_h * in_w + ox * stride_w];
  for (int ky = 0; ky < kernel_h; ky++) {
    for (int kx = 0; kx < kernel_w; kx++) {
      best = fmaxf(best, plane[(oy * stride_h + ky) * in_w + ox * stride_w + kx]);
    }
  }
  y[i] = best;
}

// A softmax over each row of `classes` values; one thread per row.
extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ y,
                                   int classes, int total) {
  int i = thread_index();
  if (i >= total) return;
  const float* row = x + (long long)i * classes;
  float max = row[0];
  for (int c = 1; c < classes; c++) max = fmaxf(max, row[c]);
  float sum = 0.0f;
  for (int c = 0; c < classes; c++) sum += expf(row[c] - max);
  for (int c = 0; c < classes; c++) y[(long long)i * classes + c] = expf(row[c] - max) / sum;
}
