/*
 * What the parts of the stand-in CUDA driver share (cuda_stand_in.c: devices and contexts;
 * cuda_stand_in_memory.c: device memory; cuda_stand_in_module.c: modules and launches;
 * cuda_stand_in_ipc.c: CUDA IPC handles between processes), and what the stand-in cuBLAS and
 * NVRTC use of it. A new part (CUDA IPC, say) goes in a file of its own
 * beside these and declares here what the others may call.
 *
 * All of it is a test tool: host memory stands in for device memory and kernels run on the CPU.
 * It checks DenoTriton's FFI marshalling and plumbing; nothing here says the real driver path
 * works.
 */
#ifndef DENOTRITON_CUDA_STAND_IN_H
#define DENOTRITON_CUDA_STAND_IN_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

/* The CUresult values the stand-in returns (cuda.h's numbers). */
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_MAP_FAILED = 205,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
};

/*
 * The first line of every "compiled" image the stand-in NVRTC hands out: the kernels' CUDA C
 * source follows, which the stand-in driver's cuModuleLoadData compiles for the CPU.
 */
#define STAND_IN_IMAGE_MAGIC "// DenoTriton stand-in NVRTC image: CUDA C for the stand-in driver\n"

/* cuda_stand_in.c: CUDA_SUCCESS when cuInit ran and a context is current on this thread. */
CUresult stand_in_require_context(void);

/* cuda_stand_in.c: the device of the context current on this thread, -1 for none. */
int stand_in_current_device(void);

/* How long a device allocation's shared-memory object name may be, its NUL included. */
#define STAND_IN_SHM_NAME 40

/*
 * cuda_stand_in_memory.c, for IPC: what names the allocation starting at `base` (its object, the
 * object's size, the allocation's size and device); 0 when `base` starts no own allocation.
 */
int stand_in_memory_export(CUdeviceptr base, char name[STAND_IN_SHM_NAME], size_t* raw_size,
                           size_t* size, int* device);

/* cuda_stand_in_memory.c: makes a mapping of another process's object an allocation here. */
CUresult stand_in_memory_adopt(void* raw, size_t raw_size, size_t size, int device,
                               CUdeviceptr* base);

/* cuda_stand_in_memory.c: forgets an adopted mapping, handing back what to unmap; 0 if none. */
int stand_in_memory_release_adopted(CUdeviceptr base, void** raw, size_t* raw_size);

/* cuda_stand_in_memory.c: the allocation `pointer` lies in; 0 when it lies in none. */
int stand_in_memory_range(CUdeviceptr pointer, CUdeviceptr* base, size_t* size);

/* cuda_stand_in_memory.c: the guard bytes before each allocation in its object. */
size_t stand_in_guard_bytes(void);

/* cuda_stand_in_memory.c: whether [pointer, pointer + bytes) lies inside one live allocation. */
int stand_in_memory_contains(CUdeviceptr pointer, size_t bytes);

/*
 * cuda_stand_in_memory.c: whether the guard bytes around every live allocation are untouched (a
 * write past either end of a buffer changes them); prints the first broken one to stderr.
 */
int stand_in_memory_guards_intact(void);

#endif
