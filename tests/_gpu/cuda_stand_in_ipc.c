/*
 * The stand-in CUDA driver's IPC handles, so that two processes (a test client and the server)
 * share device memory as CUDA IPC lets them: each stand-in allocation is a POSIX shared-memory
 * object of its own (cuda_stand_in_memory.c), and a CUipcMemHandle (64 bytes, opaque to its
 * users as the driver's is) names that object:
 *
 *   bytes  0..3   "DTSI"
 *   bytes  4..7   the allocation's device (int32)
 *   bytes  8..15  the allocation's size (uint64)
 *   bytes 16..23  the object's size: GUARD bytes, the allocation, the guard after it (uint64)
 *   bytes 24..63  the object's name ("/dt-stand-in-<pid>-<n>", NUL-terminated)
 *
 * cuIpcOpenMemHandle maps the object in the calling process and makes the mapping an allocation
 * there (copies and kernels may use it, cuMemGetAddressRange finds it); cuIpcCloseMemHandle
 * unmaps it. As with the driver, a process cannot open its own handles (CUDA_ERROR_INVALID_CONTEXT),
 * a handle that names nothing (or was freed by its exporter) is CUDA_ERROR_INVALID_VALUE, and
 * cuMemFree of an opened mapping fails. A test tool, not a GPU.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda_stand_in.h"

#define HANDLE_BYTES 64
#define NAME_AT 24

typedef struct {
  unsigned char reserved[HANDLE_BYTES];
} CUipcMemHandle;

/* cuIpcMemLazyEnablePeerAccess, the one flag the driver knows. */
#define LAZY_ENABLE_PEER_ACCESS 1

CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr pointer) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (handle == NULL) return CUDA_ERROR_INVALID_VALUE;
  char name[STAND_IN_SHM_NAME];
  size_t raw_size = 0, size = 0;
  int device = 0;
  if (!stand_in_memory_export(pointer, name, &raw_size, &size, &device)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  memset(handle->reserved, 0, HANDLE_BYTES);
  memcpy(handle->reserved, "DTSI", 4);
  int32_t device32 = device;
  uint64_t size64 = size, raw64 = raw_size;
  memcpy(handle->reserved + 4, &device32, 4);
  memcpy(handle->reserved + 8, &size64, 8);
  memcpy(handle->reserved + 16, &raw64, 8);
  memcpy(handle->reserved + NAME_AT, name, STAND_IN_SHM_NAME);
  return CUDA_SUCCESS;
}

/* The handle passed by value, as cuda.h declares it (a 64-byte struct). */
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pointer, CUipcMemHandle handle, unsigned int flags) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (pointer == NULL || (flags & ~LAZY_ENABLE_PEER_ACCESS) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (memcmp(handle.reserved, "DTSI", 4) != 0) return CUDA_ERROR_INVALID_VALUE;
  char name[STAND_IN_SHM_NAME];
  memcpy(name, handle.reserved + NAME_AT, STAND_IN_SHM_NAME);
  if (memchr(name, 0, STAND_IN_SHM_NAME) == NULL) return CUDA_ERROR_INVALID_VALUE;
  int exporter = -1;
  if (sscanf(name, "/dt-stand-in-%d-", &exporter) != 1) return CUDA_ERROR_INVALID_VALUE;
  if (exporter == (int)getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  int32_t device = 0;
  uint64_t size = 0, raw_size = 0;
  memcpy(&device, handle.reserved + 4, 4);
  memcpy(&size, handle.reserved + 8, 8);
  memcpy(&raw_size, handle.reserved + 16, 8);
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != raw_size ||
      raw_size < size + 2 * stand_in_guard_bytes()) {
    close(fd);
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* raw = mmap(NULL, raw_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (raw == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  status = stand_in_memory_adopt(raw, raw_size, size, device, pointer);
  if (status != CUDA_SUCCESS) munmap(raw, raw_size);
  return status;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr pointer) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  void* raw = NULL;
  size_t raw_size = 0;
  if (!stand_in_memory_release_adopted(pointer, &raw, &raw_size)) return CUDA_ERROR_INVALID_VALUE;
  munmap(raw, raw_size);
  return CUDA_SUCCESS;
}
