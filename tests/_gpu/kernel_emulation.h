// CUDA C kernels on the CPU, for the stand-in CUDA driver (cuda_stand_in_module.c): its
// cuModuleLoadData compiles the kernels' own source with a C++ compiler, this header included
// first, and each kernel's launcher runs every thread of the grid one after another on the
// calling thread.
//
// What it emulates: __global__ / __device__ functions, blockIdx, threadIdx, blockDim and gridDim
// (thread-locals set before each thread runs), and the driver's reading of kernelParams: each
// argument is read from its pointer with the size of the kernel's parameter type, as the driver
// does from the kernel's parameter layout. A pointer argument must point into device memory (the
// stand-in's allocations) or be null.
//
// What it does not: shared memory, __syncthreads(), warp functions, atomics, streams. Threads run
// in order, so a kernel that depends on two threads running at once is not tested here. It is a
// test tool, not a GPU.
#ifndef DENOTRITON_KERNEL_EMULATION_H
#define DENOTRITON_KERNEL_EMULATION_H

#include <math.h>
#include <stdio.h>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// __restrict__ is a GCC and Clang keyword as well.

struct dim3 {
  unsigned int x, y, z;
};
typedef dim3 uint3;

static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;

// Set by the driver after it loads the module: whether a pointer lies in device memory.
static int (*stand_in_is_device_pointer)(const void*) = nullptr;

extern "C" void stand_in_module_init(int (*is_device_pointer)(const void*)) {
  stand_in_is_device_pointer = is_device_pointer;
}

template <typename T>
static bool stand_in_argument_ok(const char*, int, const T&) {
  return true;
}

template <typename T>
static bool stand_in_argument_ok(const char* kernel, int index, T* const& pointer) {
  if (pointer == nullptr || stand_in_is_device_pointer == nullptr ||
      stand_in_is_device_pointer((const void*)pointer)) {
    return true;
  }
  fprintf(stderr, "stand-in CUDA driver: kernel %s, argument %d: %p is not in device memory\n",
          kernel, index, (const void*)pointer);
  return false;
}

template <typename... A, std::size_t... I>
static int stand_in_run(const char* kernel, void (*f)(A...), dim3 grid, dim3 block,
                        void** params, std::index_sequence<I...>) {
  std::tuple<std::remove_cv_t<A>...> args{*static_cast<std::remove_cv_t<A>*>(params[I])...};
  bool ok = true;
  ((ok = ok && stand_in_argument_ok(kernel, (int)I, std::get<I>(args))), ...);
  if (!ok) return 1;
  gridDim = grid;
  blockDim = block;
  for (unsigned int bz = 0; bz < grid.z; bz++) {
    for (unsigned int by = 0; by < grid.y; by++) {
      for (unsigned int bx = 0; bx < grid.x; bx++) {
        blockIdx = uint3{bx, by, bz};
        for (unsigned int tz = 0; tz < block.z; tz++) {
          for (unsigned int ty = 0; ty < block.y; ty++) {
            for (unsigned int tx = 0; tx < block.x; tx++) {
              threadIdx = uint3{tx, ty, tz};
              f(std::get<I>(args)...);
            }
          }
        }
      }
    }
  }
  return 0;
}

template <typename... A>
static int stand_in_launch(const char* kernel, void (*f)(A...), const unsigned int* dims,
                           void** params) {
  return stand_in_run(kernel, f, dim3{dims[0], dims[1], dims[2]}, dim3{dims[3], dims[4], dims[5]},
                      params, std::index_sequence_for<A...>{});
}

// The driver appends one of these per __global__ function it finds in the source;
// cuModuleGetFunction looks the launcher up by the kernel's name.
#define STAND_IN_LAUNCHER(name)                                                              \
  extern "C" int stand_in_launch_##name(const unsigned int* dims, void** params) {           \
    return stand_in_launch(#name, name, dims, params);                                       \
  }

#endif
