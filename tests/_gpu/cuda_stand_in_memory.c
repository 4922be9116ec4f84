/*
 * The stand-in CUDA driver's device memory: host memory handed out as CUdeviceptr values, with
 * the checks a test wants and a GPU would not give so plainly:
 *
 * - every allocation is 256-byte aligned like cuMemAlloc's, and filled with 0xff bytes (a float
 *   NaN), so reading memory nothing wrote turns results into NaN instead of plausible zeros;
 * - GUARD bytes before and after each allocation hold 0xfd (not a NaN: a kernel that reads the
 *   guard and writes what it read back past a buffer must still change it) and are checked after
 *   every kernel launch and copy back to the host, and on free: a write past either end of a
 *   buffer fails the call with CUDA_ERROR_ILLEGAL_ADDRESS, naming the allocation on stderr;
 * - copies and kernel pointer arguments must lie inside a live allocation
 *   (stand_in_memory_contains), else CUDA_ERROR_INVALID_VALUE / ILLEGAL_ADDRESS.
 *
 * Calls need cuInit and a current context, like the driver's. A test tool, not a GPU.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_stand_in.h"

#define GUARD 256
#define FILL 0xff
#define GUARD_FILL 0xfd

typedef struct Allocation {
  unsigned char* raw;   /* GUARD bytes, the allocation, GUARD or more bytes */
  size_t raw_size;
  CUdeviceptr base;
  size_t size;
  struct Allocation* next;
} Allocation;

static Allocation* allocations = NULL;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static Allocation* find_locked(CUdeviceptr pointer, size_t bytes) {
  for (Allocation* a = allocations; a != NULL; a = a->next) {
    if (pointer >= a->base && pointer <= a->base + a->size && bytes <= a->base + a->size - pointer) {
      return a;
    }
  }
  return NULL;
}

static int guards_intact_locked(const Allocation* a) {
  const unsigned char* after = (const unsigned char*)(uintptr_t)(a->base + a->size);
  const unsigned char* end = a->raw + a->raw_size;
  for (const unsigned char* p = a->raw; p < a->raw + GUARD; p++) {
    if (*p != GUARD_FILL) return 0;
  }
  for (const unsigned char* p = after; p < end; p++) {
    if (*p != GUARD_FILL) return 0;
  }
  return 1;
}

int stand_in_memory_contains(CUdeviceptr pointer, size_t bytes) {
  pthread_mutex_lock(&lock);
  int found = find_locked(pointer, bytes) != NULL;
  pthread_mutex_unlock(&lock);
  return found;
}

int stand_in_memory_guards_intact(void) {
  pthread_mutex_lock(&lock);
  int intact = 1;
  for (Allocation* a = allocations; a != NULL && intact; a = a->next) {
    if (!guards_intact_locked(a)) {
      fprintf(stderr,
              "stand-in CUDA driver: something wrote past the allocation of %zu bytes at "
              "0x%llx\n",
              a->size, (unsigned long long)a->base);
      intact = 0;
    }
  }
  pthread_mutex_unlock(&lock);
  return intact;
}

/* For tests: how many allocations are live (what a backend did not free). */
size_t stand_in_memory_live_count(void) {
  pthread_mutex_lock(&lock);
  size_t count = 0;
  for (Allocation* a = allocations; a != NULL; a = a->next) count++;
  pthread_mutex_unlock(&lock);
  return count;
}

CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (pointer == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t raw_size = (GUARD + bytes + GUARD + GUARD - 1) / GUARD * GUARD;
  Allocation* a = malloc(sizeof(Allocation));
  unsigned char* raw = aligned_alloc(GUARD, raw_size);
  if (a == NULL || raw == NULL) {
    free(a);
    free(raw);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memset(raw, GUARD_FILL, raw_size);
  memset(raw + GUARD, FILL, bytes);
  a->raw = raw;
  a->raw_size = raw_size;
  a->base = (CUdeviceptr)(uintptr_t)(raw + GUARD);
  a->size = bytes;
  pthread_mutex_lock(&lock);
  a->next = allocations;
  allocations = a;
  pthread_mutex_unlock(&lock);
  *pointer = a->base;
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  pthread_mutex_lock(&lock);
  Allocation** link = &allocations;
  while (*link != NULL && (*link)->base != pointer) link = &(*link)->next;
  Allocation* a = *link;
  if (a == NULL) {
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  *link = a->next;
  int intact = guards_intact_locked(a);
  pthread_mutex_unlock(&lock);
  if (!intact) {
    fprintf(stderr, "stand-in CUDA driver: freed allocation of %zu bytes at 0x%llx was overrun\n",
            a->size, (unsigned long long)a->base);
  }
  free(a->raw);
  free(a);
  return intact ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_ADDRESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr destination, const void* source, size_t bytes) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (!stand_in_memory_contains(destination, bytes)) return CUDA_ERROR_INVALID_VALUE;
  memcpy((void*)(uintptr_t)destination, source, bytes);
  return CUDA_SUCCESS;
}

/* The copy back to the host is where a real program learns of a kernel's fault. */
CUresult cuMemcpyDtoH_v2(void* destination, CUdeviceptr source, size_t bytes) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (!stand_in_memory_contains(source, bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (!stand_in_memory_guards_intact()) return CUDA_ERROR_ILLEGAL_ADDRESS;
  memcpy(destination, (const void*)(uintptr_t)source, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr destination, CUdeviceptr source, size_t bytes) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (!stand_in_memory_contains(destination, bytes) || !stand_in_memory_contains(source, bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  memmove((void*)(uintptr_t)destination, (const void*)(uintptr_t)source, bytes);
  return CUDA_SUCCESS;
}
