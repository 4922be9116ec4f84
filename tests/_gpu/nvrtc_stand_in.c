/*
 * A stand-in for NVRTC (`libnvrtc.so`) on hosts without a GPU: it checks the calls as NVRTC
 * would (one --gpu-architecture option naming an architecture it knows; a CUBIN only for a real
 * architecture sm_XY, PTX only for a virtual one compute_XY) and hands back, as the "compiled"
 * image, STAND_IN_IMAGE_MAGIC followed by the source, which the stand-in driver's
 * cuModuleLoadData compiles for the CPU. It compiles nothing itself: the tests compile the same
 * source with the real NVRTC where it is installed (it runs without a GPU).
 *
 * nvrtc.h's signatures, declared here by hand. A test tool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_stand_in.h"

enum {
  NVRTC_SUCCESS = 0,
  NVRTC_ERROR_OUT_OF_MEMORY = 1,
  NVRTC_ERROR_INVALID_INPUT = 3,
  NVRTC_ERROR_INVALID_PROGRAM = 4,
  NVRTC_ERROR_INVALID_OPTION = 5,
};

static const int ARCHS[] = {75, 80, 86, 87, 89, 90, 100, 120};
#define ARCH_COUNT ((int)(sizeof ARCHS / sizeof ARCHS[0]))

typedef struct {
  char* source;
  char* image;
  size_t image_size;
  int compiled;
  int real_arch;
  char log[256];
} Program;
typedef Program* nvrtcProgram;

const char* nvrtcGetErrorString(int result) {
  switch (result) {
    case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
    case NVRTC_ERROR_OUT_OF_MEMORY: return "NVRTC_ERROR_OUT_OF_MEMORY";
    case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
    case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    case NVRTC_ERROR_INVALID_OPTION: return "NVRTC_ERROR_INVALID_OPTION";
    default: return "NVRTC_ERROR unknown";
  }
}

int nvrtcVersion(int* major, int* minor) {
  if (major == NULL || minor == NULL) return NVRTC_ERROR_INVALID_INPUT;
  *major = 12;
  *minor = 8;
  return NVRTC_SUCCESS;
}

int nvrtcGetNumSupportedArchs(int* count) {
  if (count == NULL) return NVRTC_ERROR_INVALID_INPUT;
  *count = ARCH_COUNT;
  return NVRTC_SUCCESS;
}

int nvrtcGetSupportedArchs(int* archs) {
  if (archs == NULL) return NVRTC_ERROR_INVALID_INPUT;
  memcpy(archs, ARCHS, sizeof ARCHS);
  return NVRTC_SUCCESS;
}

int nvrtcCreateProgram(nvrtcProgram* program, const char* source, const char* name,
                       int header_count, const char* const* headers,
                       const char* const* include_names) {
  (void)name;
  (void)headers;
  (void)include_names;
  if (program == NULL || source == NULL || header_count != 0) return NVRTC_ERROR_INVALID_INPUT;
  Program* created = calloc(1, sizeof(Program));
  if (created == NULL) return NVRTC_ERROR_OUT_OF_MEMORY;
  created->source = strdup(source);
  if (created->source == NULL) {
    free(created);
    return NVRTC_ERROR_OUT_OF_MEMORY;
  }
  *program = created;
  return NVRTC_SUCCESS;
}

int nvrtcDestroyProgram(nvrtcProgram* program) {
  if (program == NULL || *program == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
  free((*program)->source);
  free((*program)->image);
  free(*program);
  *program = NULL;
  return NVRTC_SUCCESS;
}

static int known_arch(int arch) {
  for (int i = 0; i < ARCH_COUNT; i++) {
    if (ARCHS[i] == arch) return 1;
  }
  return 0;
}

int nvrtcCompileProgram(nvrtcProgram program, int option_count, const char* const* options) {
  if (program == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
  if (option_count < 0 || (option_count > 0 && options == NULL)) {
    return NVRTC_ERROR_INVALID_INPUT;
  }
  int archs = 0;
  for (int i = 0; i < option_count; i++) {
    const char* value = NULL;
    if (strncmp(options[i], "--gpu-architecture=", 19) == 0) value = options[i] + 19;
    else if (strncmp(options[i], "-arch=", 6) == 0) value = options[i] + 6;
    int arch = 0;
    char kind[16] = "";
    if (value == NULL || sscanf(value, "%15[a-z]_%d", kind, &arch) != 2 || !known_arch(arch) ||
        (strcmp(kind, "sm") != 0 && strcmp(kind, "compute") != 0)) {
      snprintf(program->log, sizeof program->log,
               "nvrtc stand-in: unrecognized option or architecture '%s'", options[i]);
      return NVRTC_ERROR_INVALID_OPTION;
    }
    program->real_arch = strcmp(kind, "sm") == 0;
    archs++;
  }
  if (archs != 1) {
    snprintf(program->log, sizeof program->log,
             "nvrtc stand-in: give exactly one --gpu-architecture (got %d)", archs);
    return NVRTC_ERROR_INVALID_OPTION;
  }
  size_t magic = strlen(STAND_IN_IMAGE_MAGIC);
  size_t length = strlen(program->source);
  free(program->image);
  program->image = malloc(magic + length + 1);
  if (program->image == NULL) return NVRTC_ERROR_OUT_OF_MEMORY;
  memcpy(program->image, STAND_IN_IMAGE_MAGIC, magic);
  memcpy(program->image + magic, program->source, length + 1);
  program->image_size = magic + length + 1;
  program->compiled = 1;
  return NVRTC_SUCCESS;
}

int nvrtcGetProgramLogSize(nvrtcProgram program, size_t* size) {
  if (program == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
  if (size == NULL) return NVRTC_ERROR_INVALID_INPUT;
  *size = strlen(program->log) + 1;
  return NVRTC_SUCCESS;
}

int nvrtcGetProgramLog(nvrtcProgram program, char* log) {
  if (program == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
  if (log == NULL) return NVRTC_ERROR_INVALID_INPUT;
  memcpy(log, program->log, strlen(program->log) + 1);
  return NVRTC_SUCCESS;
}

static int image_size(nvrtcProgram program, size_t* size, int real_arch) {
  if (program == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
  if (size == NULL || !program->compiled || program->real_arch != real_arch) {
    return NVRTC_ERROR_INVALID_INPUT;
  }
  *size = program->image_size;
  return NVRTC_SUCCESS;
}

static int image(nvrtcProgram program, char* out, int real_arch) {
  size_t size;
  int status = image_size(program, &size, real_arch);
  if (status != NVRTC_SUCCESS) return status;
  if (out == NULL) return NVRTC_ERROR_INVALID_INPUT;
  memcpy(out, program->image, size);
  return NVRTC_SUCCESS;
}

int nvrtcGetCUBINSize(nvrtcProgram program, size_t* size) { return image_size(program, size, 1); }
int nvrtcGetCUBIN(nvrtcProgram program, char* cubin) { return image(program, cubin, 1); }
int nvrtcGetPTXSize(nvrtcProgram program, size_t* size) { return image_size(program, size, 0); }
int nvrtcGetPTX(nvrtcProgram program, char* ptx) { return image(program, ptx, 0); }
