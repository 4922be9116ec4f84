/*
 * A stand-in for the CUDA driver (`libcuda.so.1`) for tests on hosts without a GPU: the few
 * driver API entry points DenoTriton and its GPU examples call, with the signatures of CUDA 12's
 * `cuda.h` (declared here by hand), describing STAND_IN_GPUS fake devices. Compiled with
 * -DSTAND_IN_INIT_ERROR=N, cuInit fails with N like a host whose driver finds no device. The
 * current context is per-thread like the driver's, so a test can check which device a thread
 * made current.
 *
 * This file: initialisation, devices and contexts. Device memory is in cuda_stand_in_memory.c,
 * modules and kernel launches in cuda_stand_in_module.c, IPC handles in cuda_stand_in_ipc.c;
 * cuda_stand_in.h is what they share.
 *
 * It checks DenoTriton's FFI marshalling and plumbing; it is not a GPU, and nothing here says
 * the real driver path works.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_stand_in.h"

#ifndef STAND_IN_GPUS
#define STAND_IN_GPUS 2
#endif
#ifndef STAND_IN_INIT_ERROR
#define STAND_IN_INIT_ERROR 0
#endif

typedef int CUdevice;
typedef struct { int device; } StandInContext;
typedef StandInContext* CUcontext;

static StandInContext contexts[STAND_IN_GPUS];
static int initialized = 0;
static __thread int current = -1;

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return 1; /* CUDA_ERROR_INVALID_VALUE */
  if (STAND_IN_INIT_ERROR != 0) return STAND_IN_INIT_ERROR;
  initialized = 1;
  return 0;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case 0: *name = "CUDA_SUCCESS"; return 0;
    case 1: *name = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *name = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    case 2: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 200: *name = "CUDA_ERROR_INVALID_IMAGE"; return 0;
    case 201: *name = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
    case 205: *name = "CUDA_ERROR_MAP_FAILED"; return 0;
    case 218: *name = "CUDA_ERROR_INVALID_PTX"; return 0;
    case 400: *name = "CUDA_ERROR_INVALID_HANDLE"; return 0;
    case 500: *name = "CUDA_ERROR_NOT_FOUND"; return 0;
    case 700: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; return 0;
    default: *name = NULL; return 1;
  }
}

CUresult cuDriverGetVersion(int* version) {
  *version = 12080;
  return 0;
}

CUresult cuDeviceGetCount(int* count) {
  if (!initialized) return 3;
  *count = STAND_IN_GPUS;
  return 0;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!initialized) return 3;
  if (ordinal < 0 || ordinal >= STAND_IN_GPUS) return 101;
  *device = ordinal;
  return 0;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (!initialized) return 3;
  if (device < 0 || device >= STAND_IN_GPUS) return 101;
  snprintf(name, (size_t)length, "Stand-in GPU %d", device);
  return 0;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  if (!initialized) return 3;
  if (device < 0 || device >= STAND_IN_GPUS) return 101;
  *bytes = (size_t)(device + 1) * 16 * 1024 * 1024 * 1024ull;
  return 0;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  if (!initialized) return 3;
  if (device < 0 || device >= STAND_IN_GPUS) return 101;
  if (attribute == 75) *value = 9;      /* COMPUTE_CAPABILITY_MAJOR */
  else if (attribute == 76) *value = 0; /* COMPUTE_CAPABILITY_MINOR */
  else return 1;
  return 0;
}

CUresult cuDeviceGetUuid(unsigned char uuid[16], CUdevice device) {
  if (!initialized) return 3;
  if (device < 0 || device >= STAND_IN_GPUS) return 101;
  for (int i = 0; i < 16; ++i) uuid[i] = (unsigned char)(i * 16 + device);
  return 0;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (!initialized) return 3;
  if (device < 0 || device >= STAND_IN_GPUS) return 101;
  contexts[device].device = device;
  *context = &contexts[device];
  return 0;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (!initialized) return 3;
  current = context == NULL ? -1 : context->device;
  return 0;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  if (!initialized) return 3;
  if (current < 0) return 201;
  *device = current;
  return 0;
}

/* Contexts pushed over the current one, per thread, as cuCtxPushCurrent keeps them. */
#define STAND_IN_STACK 8
static __thread int pushed[STAND_IN_STACK];
static __thread int depth = 0;

CUresult cuCtxPushCurrent_v2(CUcontext context) {
  if (!initialized) return 3;
  if (context == NULL) return 1;
  if (depth == STAND_IN_STACK) return 2; /* the stand-in's limit, not the driver's */
  pushed[depth++] = current;
  current = context->device;
  return 0;
}

CUresult cuCtxPopCurrent_v2(CUcontext* context) {
  if (!initialized) return 3;
  if (current < 0) return 201;
  if (context != NULL) *context = &contexts[current];
  current = depth > 0 ? pushed[--depth] : -1;
  return 0;
}

int stand_in_current_device(void) { return current; }

CUresult cuCtxGetCurrent(CUcontext* context) {
  if (!initialized) return 3;
  *context = current < 0 ? NULL : &contexts[current];
  return 0;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  if (!initialized) return 3;
  if (device < 0 || device >= STAND_IN_GPUS) return 101;
  return 0;
}

/* Kernels and copies run to completion when called: there is nothing to wait for. */
CUresult cuCtxSynchronize(void) {
  return stand_in_require_context();
}

CUresult stand_in_require_context(void) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return current < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
