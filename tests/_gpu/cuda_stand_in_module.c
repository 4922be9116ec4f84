/*
 * The stand-in CUDA driver's modules and kernel launches. cuModuleLoadData takes the image the
 * stand-in NVRTC made (STAND_IN_IMAGE_MAGIC, then the kernels' CUDA C source), compiles that
 * source for the CPU with STAND_IN_CXX and kernel_emulation.h, and loads the result; one launcher
 * per __global__ function found in the source lets cuLaunchKernel run a kernel's grid on the
 * calling thread, reading kernelParams the way the driver does. A real CUBIN or PTX is refused:
 * this runs no GPU code.
 *
 * Compiled modules are kept in STAND_IN_MODULE_DIR by a hash of their source, so a test process
 * compiles each source once. A test tool, not a GPU.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_stand_in.h"

#ifndef STAND_IN_CXX
#define STAND_IN_CXX "c++"
#endif
#ifndef STAND_IN_MODULE_DIR
#define STAND_IN_MODULE_DIR "/tmp"
#endif
#ifndef STAND_IN_EMULATION_HEADER
#error "STAND_IN_EMULATION_HEADER must name kernel_emulation.h"
#endif

typedef struct {
  void* library;
} StandInModule;
typedef StandInModule* CUmodule;

typedef int (*Launcher)(const unsigned int* dims, void** params);
typedef struct {
  Launcher launch;
} StandInFunction;
typedef StandInFunction* CUfunction;

static int is_device_pointer(const void* pointer) {
  return stand_in_memory_contains((CUdeviceptr)(uintptr_t)pointer, 0);
}

/* The source with comments blanked out, so names in comments are not taken for kernels. */
static char* without_comments(const char* source) {
  size_t length = strlen(source);
  char* out = malloc(length + 1);
  if (out == NULL) return NULL;
  memcpy(out, source, length + 1);
  for (size_t i = 0; i < length; i++) {
    if (out[i] == '/' && out[i + 1] == '/') {
      while (i < length && out[i] != '\n') out[i++] = ' ';
    } else if (out[i] == '/' && out[i + 1] == '*') {
      while (i < length && !(out[i] == '*' && out[i + 1] == '/')) out[i++] = ' ';
      if (i < length) out[i] = out[i + 1] = ' ';
    }
  }
  return out;
}

/* "STAND_IN_LAUNCHER(name)\n" for every `__global__ void name(` in the source. */
static char* launchers_for(const char* source) {
  char* text = without_comments(source);
  if (text == NULL) return NULL;
  size_t capacity = 4096, used = 0;
  char* out = malloc(capacity);
  if (out == NULL) {
    free(text);
    return NULL;
  }
  out[0] = '\0';
  for (char* at = strstr(text, "__global__"); at != NULL; at = strstr(at, "__global__")) {
    at += strlen("__global__");
    while (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r') at++;
    if (strncmp(at, "void", 4) != 0) continue;
    at += 4;
    while (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r') at++;
    size_t name = 0;
    while (at[name] == '_' || (at[name] >= 'a' && at[name] <= 'z') ||
           (at[name] >= 'A' && at[name] <= 'Z') || (at[name] >= '0' && at[name] <= '9')) {
      name++;
    }
    if (name == 0) continue;
    if (used + name + 32 > capacity) {
      capacity = 2 * (used + name + 32);
      char* grown = realloc(out, capacity);
      if (grown == NULL) {
        free(out);
        free(text);
        return NULL;
      }
      out = grown;
    }
    used += (size_t)sprintf(out + used, "STAND_IN_LAUNCHER(%.*s)\n", (int)name, at);
  }
  free(text);
  return out;
}

static unsigned long long fnv1a(const char* text) {
  unsigned long long hash = 1469598103934665603ull;
  for (; *text != '\0'; text++) hash = (hash ^ (unsigned char)*text) * 1099511628211ull;
  return hash;
}

/* Compiles the source into `library` unless a module of the same source is there already. */
static int compile(const char* source, const char* library) {
  if (access(library, F_OK) == 0) return 0;
  char* launchers = launchers_for(source);
  if (launchers == NULL) return -1;
  /* Two threads (Workers) may compile the same source at once: each writes its own files and
   * the last rename wins, with the same result. */
  char path[600], partial[600], log[600], command[2600];
  unsigned long thread = (unsigned long)pthread_self();
  snprintf(path, sizeof path, "%s.%d.%lx.cpp", library, (int)getpid(), thread);
  snprintf(partial, sizeof partial, "%s.%d.%lx.tmp", library, (int)getpid(), thread);
  snprintf(log, sizeof log, "%s.%d.%lx.log", library, (int)getpid(), thread);
  FILE* file = fopen(path, "w");
  if (file == NULL) {
    free(launchers);
    return -1;
  }
  fprintf(file, "#include \"%s\"\n#line 1 \"kernels.cu\"\n%s\n%s", STAND_IN_EMULATION_HEADER,
          source, launchers);
  fclose(file);
  free(launchers);
  snprintf(command, sizeof command,
           "%s -std=c++17 -O2 -shared -fPIC -o '%s' '%s' > '%s' 2>&1 && mv '%s' '%s'",
           STAND_IN_CXX, partial, path, log, partial, library);
  int status = system(command);
  if (status != 0) {
    fprintf(stderr, "stand-in CUDA driver: cannot compile the module for the CPU:\n");
    FILE* errors = fopen(log, "r");
    if (errors != NULL) {
      char line[512];
      while (fgets(line, sizeof line, errors) != NULL) fputs(line, stderr);
      fclose(errors);
    }
    return -1;
  }
  return 0;
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (module == NULL || image == NULL) return CUDA_ERROR_INVALID_VALUE;
  const char* text = image;
  if (memcmp(text, "\x7f" "ELF", 4) == 0) {
    fprintf(stderr, "stand-in CUDA driver: a real CUBIN cannot run here\n");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (strncmp(text, STAND_IN_IMAGE_MAGIC, strlen(STAND_IN_IMAGE_MAGIC)) != 0) {
    fprintf(stderr, "stand-in CUDA driver: the image is not from the stand-in NVRTC\n");
    return CUDA_ERROR_INVALID_PTX;
  }
  const char* source = text + strlen(STAND_IN_IMAGE_MAGIC);
  char library[512];
  snprintf(library, sizeof library, "%s/module_%016llx.so", STAND_IN_MODULE_DIR, fnv1a(source));
  if (compile(source, library) != 0) return CUDA_ERROR_INVALID_PTX;
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    fprintf(stderr, "stand-in CUDA driver: %s\n", dlerror());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  void (*init)(int (*)(const void*)) = (void (*)(int (*)(const void*)))dlsym(
      handle, "stand_in_module_init");
  if (init != NULL) init(is_device_pointer);
  StandInModule* loaded = malloc(sizeof(StandInModule));
  if (loaded == NULL) {
    dlclose(handle);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  loaded->library = handle;
  *module = loaded;
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (module == NULL) return CUDA_ERROR_INVALID_HANDLE;
  dlclose(module->library);
  free(module);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (function == NULL || name == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (module == NULL) return CUDA_ERROR_INVALID_HANDLE;
  char symbol[300];
  snprintf(symbol, sizeof symbol, "stand_in_launch_%s", name);
  Launcher launch = (Launcher)dlsym(module->library, symbol);
  if (launch == NULL) return CUDA_ERROR_NOT_FOUND;
  /* Kept for the process: a CUfunction stays valid while its module is loaded. */
  StandInFunction* found = malloc(sizeof(StandInFunction));
  if (found == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  found->launch = launch;
  *function = found;
  return CUDA_SUCCESS;
}

/*
 * Checks what the driver checks (dimensions, block size), and refuses what the emulation cannot
 * do (dynamic shared memory, streams, `extra`); then runs the grid and checks that no buffer
 * was overrun.
 */
CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                        unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                        unsigned int block_z, unsigned int shared_bytes, void* stream,
                        void** params, void** extra) {
  CUresult status = stand_in_require_context();
  if (status != CUDA_SUCCESS) return status;
  if (function == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (grid_x == 0 || grid_y == 0 || grid_z == 0 || block_x == 0 || block_y == 0 ||
      block_z == 0 || grid_x > 2147483647u || grid_y > 65535 || grid_z > 65535 ||
      block_x > 1024 || block_y > 1024 || block_z > 64 ||
      (unsigned long long)block_x * block_y * block_z > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (shared_bytes != 0 || stream != NULL || extra != NULL || params == NULL) {
    fprintf(stderr,
            "stand-in CUDA driver: launches take kernelParams only, on the default stream, "
            "without shared memory\n");
    return CUDA_ERROR_INVALID_VALUE;
  }
  unsigned int dims[6] = {grid_x, grid_y, grid_z, block_x, block_y, block_z};
  if (function->launch(dims, params) != 0) return CUDA_ERROR_ILLEGAL_ADDRESS;
  return stand_in_memory_guards_intact() ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_ADDRESS;
}
