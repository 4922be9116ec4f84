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
 *   (stand_in_memory_contains), else CUDA_ERROR_INVALID_VALUE / ILLEGAL_ADDRESS;
 * - each allocation is a POSIX shared-memory object of its own (GUARD bytes, the allocation, the
 *   guard after it), mapped MAP_SHARED, so that cuIpcGetMemHandle can name it and another process
 *   can map the same bytes (cuda_stand_in_ipc.c); the object is unlinked on free and, for what a
 *   process never freed, when it exits;
 * - every copy is counted by direction and bytes (stand_in_copy_counts), so a test can say how
 *   many copies a path made.
 *
 * Calls need cuInit and a current context, like the driver's. A test tool, not a GPU.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_stand_in.h"

#define GUARD 256
#define FILL 0xff
#define GUARD_FILL 0xfd

typedef struct Allocation {
  unsigned char* raw;   /* GUARD bytes, the allocation, GUARD or more bytes */
  size_t raw_size;
  CUdeviceptr base;
  size_t size;
  int device;
  /* The shared-memory object of an own allocation; "" for a mapping cuIpcOpenMemHandle made. */
  char name[STAND_IN_SHM_NAME];
  struct Allocation* next;
} Allocation;

static Allocation* allocations = NULL;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long next_object = 0;

/* Copies so far: {host to device, device to host, device to device} x {calls, bytes}. */
static unsigned long long copies[6];

static void count_copy(int direction, size_t bytes) {
  pthread_mutex_lock(&lock);
  copies[direction * 2] += 1;
  copies[direction * 2 + 1] += bytes;
  pthread_mutex_unlock(&lock);
}

/*
 * For tests: the copies made so far through the stand-in, as six counters: host-to-device calls
 * and bytes, device-to-host calls and bytes, device-to-device calls and bytes.
 */
void stand_in_copy_counts(unsigned long long out[6]) {
  pthread_mutex_lock(&lock);
  memcpy(out, copies, sizeof copies);
  pthread_mutex_unlock(&lock);
}

/* Objects of allocations the process never freed are unlinked when it exits. */
__attribute__((destructor)) static void unlink_leftovers(void) {
  pthread_mutex_lock(&lock);
  for (Allocation* a = allocations; a != NULL; a = a->next) {
    if (a->name[0] != 0) shm_unlink(a->name);
  }
  pthread_mutex_unlock(&lock);
}

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
  for (Allocation* a = allocations; a != NULL; a = a->next) count += a->name[0] != 0;
  pthread_mutex_unlock(&lock);
  return count;
}

/* For tests: how many IPC mappings of other processes' allocations are open here. */
size_t stand_in_ipc_open_count(void) {
  pthread_mutex_lock(&lock);
  size_t count = 0;
  for (Allocation* a = allocations; a != NULL; a = a->next) count += a->name[0] == 0;
  pthread_mutex_unlock(&lock);
  return count;
}

static void insert(Allocation* a) {
  pthread_mutex_lock(&lock);
  a->next = allocations;
  allocations = a;
  pthread_mutex_unlock(&lock);
}

/* Takes the allocation at `base` out of the list (own ones when `own`, else IPC mappings). */
static Allocation* take(CUdeviceptr base, int own) {
  pthread_mutex_lock(&lock);
  Allocation** link = &allocations;
  while (*link != NULL && ((*link)->base != base || ((*link)->name[0] != 0) != own)) {
    link = &(*link)->next;
  }
  Allocation* a = *link;
  if (a != NULL) *link = a->next;
  pthread_mutex_unlock(&lock);
  return a;
}

CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (pointer == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t raw_size = (GUARD + bytes + GUARD + GUARD - 1) / GUARD * GUARD;
  Allocation* a = calloc(1, sizeof(Allocation));
  if (a == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  snprintf(a->name, sizeof a->name, "/dt-stand-in-%d-%lu", (int)getpid(), next_object++);
  pthread_mutex_unlock(&lock);
  int fd = shm_open(a->name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  unsigned char* raw = MAP_FAILED;
  if (ftruncate(fd, (off_t)raw_size) == 0) {
    raw = mmap(NULL, raw_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (raw == MAP_FAILED) {
    shm_unlink(a->name);
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memset(raw, GUARD_FILL, raw_size);
  memset(raw + GUARD, FILL, bytes);
  a->raw = raw;
  a->raw_size = raw_size;
  a->base = (CUdeviceptr)(uintptr_t)(raw + GUARD);
  a->size = bytes;
  a->device = stand_in_current_device();
  insert(a);
  *pointer = a->base;
  return CUDA_SUCCESS;
}

int stand_in_memory_export(CUdeviceptr base, char name[STAND_IN_SHM_NAME], size_t* raw_size,
                           size_t* size, int* device) {
  pthread_mutex_lock(&lock);
  Allocation* a = allocations;
  while (a != NULL && !(a->base == base && a->name[0] != 0)) a = a->next;
  if (a != NULL) {
    memcpy(name, a->name, STAND_IN_SHM_NAME);
    *raw_size = a->raw_size;
    *size = a->size;
    *device = a->device;
  }
  pthread_mutex_unlock(&lock);
  return a != NULL;
}

CUresult stand_in_memory_adopt(void* raw, size_t raw_size, size_t size, int device,
                               CUdeviceptr* base) {
  Allocation* a = calloc(1, sizeof(Allocation));
  if (a == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  a->raw = raw;
  a->raw_size = raw_size;
  a->base = (CUdeviceptr)(uintptr_t)((unsigned char*)raw + GUARD);
  a->size = size;
  a->device = device;
  insert(a);
  *base = a->base;
  return CUDA_SUCCESS;
}

int stand_in_memory_release_adopted(CUdeviceptr base, void** raw, size_t* raw_size) {
  Allocation* a = take(base, 0);
  if (a == NULL) return 0;
  *raw = a->raw;
  *raw_size = a->raw_size;
  free(a);
  return 1;
}

int stand_in_memory_range(CUdeviceptr pointer, CUdeviceptr* base, size_t* size) {
  pthread_mutex_lock(&lock);
  Allocation* a = allocations;
  while (a != NULL && !(pointer >= a->base && pointer < a->base + a->size)) a = a->next;
  if (a != NULL) {
    *base = a->base;
    *size = a->size;
  }
  pthread_mutex_unlock(&lock);
  return a != NULL;
}

size_t stand_in_guard_bytes(void) { return GUARD; }

CUresult cuMemFree_v2(CUdeviceptr pointer) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  /* Only the process's own allocations: a mapping of another's is closed, not freed. */
  Allocation* a = take(pointer, 1);
  if (a == NULL) return CUDA_ERROR_INVALID_VALUE;
  int intact = guards_intact_locked(a);
  if (!intact) {
    fprintf(stderr, "stand-in CUDA driver: freed allocation of %zu bytes at 0x%llx was overrun\n",
            a->size, (unsigned long long)a->base);
  }
  munmap(a->raw, a->raw_size);
  shm_unlink(a->name);
  free(a);
  return intact ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_ADDRESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr destination, const void* source, size_t bytes) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (!stand_in_memory_contains(destination, bytes)) return CUDA_ERROR_INVALID_VALUE;
  memcpy((void*)(uintptr_t)destination, source, bytes);
  count_copy(0, bytes);
  return CUDA_SUCCESS;
}

/* The copy back to the host is where a real program learns of a kernel's fault. */
CUresult cuMemcpyDtoH_v2(void* destination, CUdeviceptr source, size_t bytes) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (!stand_in_memory_contains(source, bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (!stand_in_memory_guards_intact()) return CUDA_ERROR_ILLEGAL_ADDRESS;
  memcpy(destination, (const void*)(uintptr_t)source, bytes);
  count_copy(1, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr destination, CUdeviceptr source, size_t bytes) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (!stand_in_memory_contains(destination, bytes) || !stand_in_memory_contains(source, bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  memmove((void*)(uintptr_t)destination, (const void*)(uintptr_t)source, bytes);
  count_copy(2, bytes);
  return CUDA_SUCCESS;
}

/*
 * The address range of the allocation (or IPC mapping) `pointer` lies in; either out pointer
 * may be NULL, as with the driver.
 */
CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr pointer) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  CUdeviceptr found_base = 0;
  size_t found_size = 0;
  if (!stand_in_memory_range(pointer, &found_base, &found_size)) return CUDA_ERROR_NOT_FOUND;
  if (base != NULL) *base = found_base;
  if (size != NULL) *size = found_size;
  return CUDA_SUCCESS;
}
