/*
 * DenoTriton's forwarding backend and front-end bridge for Triton's in-process core (Triton 2.51,
 * TRITONSERVER API 1.34, TRITONBACKEND API 1.19).
 *
 * One shared library plays two roles:
 *   - a Triton backend (`libtriton_denotriton.so`): `TRITONBACKEND_ModelInstanceExecute` runs on
 *     Triton's instance thread, parks the batch in a slot and blocks until the Deno side is done;
 *   - a bridge that Deno opens with `Deno.dlopen`: JS takes batches with `dt_next_batch` (declared
 *     nonblocking), reads inputs in place, writes outputs with `dt_output`, sends with `dt_send`
 *     and finishes with `dt_batch_done`. Client-side callbacks (allocator, response complete,
 *     request release) stay in C and push events onto one queue that JS drains with
 *     `dt_wait_events` (nonblocking). No JS ever runs on a Triton thread.
 *
 * The C ABI of the core is declared here by hand (opaque structs, prototypes we call).
 */

#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DT_EXPORT __attribute__((visibility("default")))

/* ---- Opaque core types ------------------------------------------------------------------ */

typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_Message TRITONSERVER_Message;
typedef struct TRITONSERVER_InferenceRequest TRITONSERVER_InferenceRequest;
typedef struct TRITONSERVER_InferenceResponse TRITONSERVER_InferenceResponse;
typedef struct TRITONSERVER_ResponseAllocator TRITONSERVER_ResponseAllocator;
typedef struct TRITONBACKEND_Backend TRITONBACKEND_Backend;
typedef struct TRITONBACKEND_Model TRITONBACKEND_Model;
typedef struct TRITONBACKEND_ModelInstance TRITONBACKEND_ModelInstance;
typedef struct TRITONBACKEND_Request TRITONBACKEND_Request;
typedef struct TRITONBACKEND_Response TRITONBACKEND_Response;
typedef struct TRITONBACKEND_ResponseFactory TRITONBACKEND_ResponseFactory;
typedef struct TRITONBACKEND_Input TRITONBACKEND_Input;
typedef struct TRITONBACKEND_Output TRITONBACKEND_Output;

/* Enum values of the 24.10 headers (all passed as 32-bit ints). */
enum {
  DT_CODE_UNKNOWN = 0,
  DT_CODE_INTERNAL = 1,
  DT_CODE_NOT_FOUND = 2,
  DT_CODE_INVALID_ARG = 3,
  DT_CODE_UNAVAILABLE = 4,
  DT_CODE_UNSUPPORTED = 5,
  DT_CODE_ALREADY_EXISTS = 6,
  DT_CODE_CANCELLED = 7,
};
enum { DT_MEM_CPU = 0, DT_MEM_CPU_PINNED = 1, DT_MEM_GPU = 2 };
enum { DT_PARAM_STRING = 0, DT_PARAM_INT = 1, DT_PARAM_BOOL = 2, DT_PARAM_DOUBLE = 3, DT_PARAM_BYTES = 4 };
enum { DT_RELEASE_ALL = 1 };
enum { DT_RESPONSE_FINAL = 1 };

/* ---- Core prototypes (TRITONSERVER_*) ------------------------------------------------------ */

extern TRITONSERVER_Error* TRITONSERVER_ErrorNew(int code, const char* msg);
extern void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error);
extern TRITONSERVER_Error* TRITONSERVER_InferenceResponseDelete(
    TRITONSERVER_InferenceResponse* response);
extern int TRITONSERVER_ErrorCode(TRITONSERVER_Error* error);
extern const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error);
extern TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(
    TRITONSERVER_Message* message, const char** base, size_t* byte_size);
extern TRITONSERVER_Error* TRITONSERVER_MessageDelete(TRITONSERVER_Message* message);

typedef TRITONSERVER_Error* (*dt_alloc_fn)(
    TRITONSERVER_ResponseAllocator* allocator, const char* tensor_name, size_t byte_size,
    int memory_type, int64_t memory_type_id, void* userp, void** buffer, void** buffer_userp,
    int* actual_memory_type, int64_t* actual_memory_type_id);
typedef TRITONSERVER_Error* (*dt_release_buffer_fn)(
    TRITONSERVER_ResponseAllocator* allocator, void* buffer, void* buffer_userp, size_t byte_size,
    int memory_type, int64_t memory_type_id);
typedef TRITONSERVER_Error* (*dt_start_fn)(TRITONSERVER_ResponseAllocator* allocator, void* userp);
typedef void (*dt_response_complete_fn)(
    TRITONSERVER_InferenceResponse* response, uint32_t flags, void* userp);
typedef void (*dt_request_release_fn)(
    TRITONSERVER_InferenceRequest* request, uint32_t flags, void* userp);

extern TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorNew(
    TRITONSERVER_ResponseAllocator** allocator, dt_alloc_fn alloc_fn,
    dt_release_buffer_fn release_fn, dt_start_fn start_fn);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetReleaseCallback(
    TRITONSERVER_InferenceRequest* request, dt_request_release_fn fn, void* userp);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetResponseCallback(
    TRITONSERVER_InferenceRequest* request, TRITONSERVER_ResponseAllocator* allocator,
    void* alloc_userp, dt_response_complete_fn fn, void* response_userp);
extern TRITONSERVER_Error* TRITONSERVER_InferenceResponseError(
    TRITONSERVER_InferenceResponse* response);
extern TRITONSERVER_Error* TRITONSERVER_InferenceResponseModel(
    TRITONSERVER_InferenceResponse* response, const char** model_name, int64_t* model_version);
extern TRITONSERVER_Error* TRITONSERVER_InferenceResponseId(
    TRITONSERVER_InferenceResponse* response, const char** request_id);
extern TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameterCount(
    TRITONSERVER_InferenceResponse* response, uint32_t* count);
extern TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameter(
    TRITONSERVER_InferenceResponse* response, uint32_t index, const char** name, int* type,
    const void** vvalue);
extern TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutputCount(
    TRITONSERVER_InferenceResponse* response, uint32_t* count);
extern TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutput(
    TRITONSERVER_InferenceResponse* response, uint32_t index, const char** name, int* datatype,
    const int64_t** shape, uint64_t* dim_count, const void** base, size_t* byte_size,
    int* memory_type, int64_t* memory_type_id, void** userp);

/* ---- Backend prototypes (TRITONBACKEND_*) -------------------------------------------------- */

extern TRITONSERVER_Error* TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor);
extern TRITONSERVER_Error* TRITONBACKEND_ModelName(TRITONBACKEND_Model* model, const char** name);
extern TRITONSERVER_Error* TRITONBACKEND_ModelVersion(TRITONBACKEND_Model* model, uint64_t* version);
extern TRITONSERVER_Error* TRITONBACKEND_ModelConfig(
    TRITONBACKEND_Model* model, uint32_t config_version, TRITONSERVER_Message** config);
extern TRITONSERVER_Error* TRITONBACKEND_ModelSetState(TRITONBACKEND_Model* model, void* state);
extern TRITONSERVER_Error* TRITONBACKEND_ModelState(TRITONBACKEND_Model* model, void** state);
extern TRITONSERVER_Error* TRITONBACKEND_ModelInstanceModel(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Model** model);
extern TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSetState(
    TRITONBACKEND_ModelInstance* instance, void* state);
extern TRITONSERVER_Error* TRITONBACKEND_ModelInstanceState(
    TRITONBACKEND_ModelInstance* instance, void** state);
extern TRITONSERVER_Error* TRITONBACKEND_RequestId(TRITONBACKEND_Request* request, const char** id);
extern TRITONSERVER_Error* TRITONBACKEND_RequestIsCancelled(
    TRITONBACKEND_Request* request, bool* is_cancelled);
extern TRITONSERVER_Error* TRITONBACKEND_RequestParameterCount(
    TRITONBACKEND_Request* request, uint32_t* count);
extern TRITONSERVER_Error* TRITONBACKEND_RequestParameter(
    TRITONBACKEND_Request* request, uint32_t index, const char** key, int* type,
    const void** vvalue);
extern TRITONSERVER_Error* TRITONBACKEND_RequestInputCount(
    TRITONBACKEND_Request* request, uint32_t* count);
extern TRITONSERVER_Error* TRITONBACKEND_RequestInputByIndex(
    TRITONBACKEND_Request* request, uint32_t index, TRITONBACKEND_Input** input);
extern TRITONSERVER_Error* TRITONBACKEND_InputProperties(
    TRITONBACKEND_Input* input, const char** name, int* datatype, const int64_t** shape,
    uint32_t* dims_count, uint64_t* byte_size, uint32_t* buffer_count);
extern TRITONSERVER_Error* TRITONBACKEND_InputBuffer(
    TRITONBACKEND_Input* input, uint32_t index, const void** buffer, uint64_t* buffer_byte_size,
    int* memory_type, int64_t* memory_type_id);
extern TRITONSERVER_Error* TRITONBACKEND_RequestOutputCount(
    TRITONBACKEND_Request* request, uint32_t* count);
extern TRITONSERVER_Error* TRITONBACKEND_RequestOutputName(
    TRITONBACKEND_Request* request, uint32_t index, const char** name);
extern TRITONSERVER_Error* TRITONBACKEND_RequestRelease(
    TRITONBACKEND_Request* request, uint32_t release_flags);
extern TRITONSERVER_Error* TRITONBACKEND_ResponseNew(
    TRITONBACKEND_Response** response, TRITONBACKEND_Request* request);
extern TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryNew(
    TRITONBACKEND_ResponseFactory** factory, TRITONBACKEND_Request* request);
extern TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory* factory);
extern TRITONSERVER_Error* TRITONBACKEND_ResponseNewFromFactory(
    TRITONBACKEND_Response** response, TRITONBACKEND_ResponseFactory* factory);
extern TRITONSERVER_Error* TRITONBACKEND_ResponseFactorySendFlags(
    TRITONBACKEND_ResponseFactory* factory, uint32_t send_flags);
extern TRITONSERVER_Error* TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response* response);
extern TRITONSERVER_Error* TRITONBACKEND_ResponseOutput(
    TRITONBACKEND_Response* response, TRITONBACKEND_Output** output, const char* name,
    int datatype, const int64_t* shape, uint32_t dims_count);
extern TRITONSERVER_Error* TRITONBACKEND_OutputBuffer(
    TRITONBACKEND_Output* output, void** buffer, uint64_t buffer_byte_size, int* memory_type,
    int64_t* memory_type_id);
extern TRITONSERVER_Error* TRITONBACKEND_ResponseSend(
    TRITONBACKEND_Response* response, uint32_t send_flags, TRITONSERVER_Error* error);
extern TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, bool success,
    uint64_t exec_start_ns, uint64_t compute_start_ns, uint64_t compute_end_ns,
    uint64_t exec_end_ns);
extern TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, uint64_t batch_size, uint64_t exec_start_ns,
    uint64_t compute_start_ns, uint64_t compute_end_ns, uint64_t exec_end_ns);

/* ---- Small helpers ------------------------------------------------------------------------ */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void deadline_after(struct timespec* ts, int32_t timeout_ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += timeout_ms / 1000;
  ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec += 1;
    ts->tv_nsec -= 1000000000L;
  }
}

/* A growable NUL-terminated string, used to build JSON descriptions. */
typedef struct {
  char* data;
  size_t len;
  size_t cap;
} sbuf;

static void sb_reserve(sbuf* sb, size_t extra) {
  if (sb->len + extra + 1 <= sb->cap) return;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char* data = realloc(sb->data, cap);
  if (!data) abort();
  sb->data = data;
  sb->cap = cap;
}

static void sb_put(sbuf* sb, const char* s, size_t n) {
  sb_reserve(sb, n);
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = 0;
}

static void sb_str(sbuf* sb, const char* s) { sb_put(sb, s, strlen(s)); }

static void sb_fmt(sbuf* sb, const char* fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_put(sb, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string literal; bytes >= 0x80 pass through (the core hands us UTF-8). */
static void sb_json(sbuf* sb, const char* s) {
  sb_put(sb, "\"", 1);
  for (const unsigned char* p = (const unsigned char*)(s ? s : ""); *p; ++p) {
    switch (*p) {
      case '"': sb_put(sb, "\\\"", 2); break;
      case '\\': sb_put(sb, "\\\\", 2); break;
      case '\n': sb_put(sb, "\\n", 2); break;
      case '\r': sb_put(sb, "\\r", 2); break;
      case '\t': sb_put(sb, "\\t", 2); break;
      default:
        if (*p < 0x20) sb_fmt(sb, "\\u%04x", *p);
        else sb_put(sb, (const char*)p, 1);
    }
  }
  sb_put(sb, "\"", 1);
}

/* A typed parameter value as JSON: {"t":"s|i|b|d","v":...}; doubles that JSON cannot hold go as strings. */
static void sb_param(sbuf* sb, int type, const void* value) {
  switch (type) {
    case DT_PARAM_STRING:
      sb_str(sb, "{\"t\":\"s\",\"v\":");
      sb_json(sb, (const char*)value);
      sb_str(sb, "}");
      break;
    case DT_PARAM_INT:
      sb_fmt(sb, "{\"t\":\"i\",\"v\":\"%" PRId64 "\"}", *(const int64_t*)value);
      break;
    case DT_PARAM_BOOL:
      sb_fmt(sb, "{\"t\":\"b\",\"v\":%s}", *(const bool*)value ? "true" : "false");
      break;
    case DT_PARAM_DOUBLE:
      sb_fmt(sb, "{\"t\":\"d\",\"v\":\"%.17g\"}", *(const double*)value);
      break;
    default:
      sb_str(sb, "null");
  }
}

static TRITONSERVER_Error* dt_error(int code, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return TRITONSERVER_ErrorNew(code, msg);
}

/* ---- Fault injection and sending ---------------------------------------------------------- */

/*
 * Fault injection for tests: Triton 2.51's core never refuses a send or hands over a batch the
 * bridge cannot describe, so the error paths for both are reached on purpose. Off unless a test
 * arms it with `dt_debug_fault`.
 */
enum { DT_FAULT_SEND = 1, DT_FAULT_DESCRIBE = 2 };
static pthread_mutex_t g_fault_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_fault_counts[3];

/** Arms `count` faults of kind `fault` (1: sends fail after the core took the response; 2: batch
 *  descriptions are malformed). Returns 0, or -1 for an unknown kind. */
DT_EXPORT int32_t dt_debug_fault(int32_t fault, uint32_t count) {
  if (fault != DT_FAULT_SEND && fault != DT_FAULT_DESCRIBE) return -1;
  pthread_mutex_lock(&g_fault_mu);
  g_fault_counts[fault] = count;
  pthread_mutex_unlock(&g_fault_mu);
  return 0;
}

static int take_fault(int fault) {
  pthread_mutex_lock(&g_fault_mu);
  int hit = g_fault_counts[fault] > 0;
  if (hit) --g_fault_counts[fault];
  pthread_mutex_unlock(&g_fault_mu);
  return hit;
}

/*
 * Sends a response. The core takes ownership of `response` whether or not the send succeeds (it
 * wraps the pointer in a unique_ptr before anything can fail), so the caller must never touch or
 * delete it afterwards, even when an error comes back.
 */
static TRITONSERVER_Error* send_response(TRITONBACKEND_Response* response, uint32_t flags,
                                         TRITONSERVER_Error* failure) {
  TRITONSERVER_Error* err = TRITONBACKEND_ResponseSend(response, flags, failure);
  if (!err && take_fault(DT_FAULT_SEND)) {
    err = dt_error(DT_CODE_INTERNAL, "Injected send failure (dt_debug_fault)");
  }
  return err;
}

/* ---- Channels and slots: the hand-off between Triton's instance threads and JS ------------- */

enum {
  SLOT_EMPTY = 0,     /* no Triton instance attached yet */
  SLOT_IDLE = 1,      /* attached, no batch */
  SLOT_READY = 2,     /* a batch waits for JS */
  SLOT_TAKEN = 3,     /* JS is running the batch */
  SLOT_DONE = 4,      /* JS finished; Execute returns */
  SLOT_FINALIZED = 5, /* instance finalized */
};

typedef struct dt_channel dt_channel;

typedef struct {
  dt_channel* channel;
  uint32_t index;
  int state;
  TRITONBACKEND_ModelInstance* instance;
  TRITONBACKEND_Request** requests;
  TRITONBACKEND_Response** responses;
  TRITONBACKEND_ResponseFactory** factories;
  uint8_t* failed;   /* an error was sent to the request */
  uint8_t* finished; /* the final response was sent */
  uint64_t* batch_sizes;
  uint32_t count;
  uint32_t capacity;
  uint64_t exec_start, compute_start, compute_end;
  sbuf description;
  void** scratch; /* concatenated multi-chunk inputs, freed when the batch is done */
  uint32_t scratch_count, scratch_capacity;
  char error[512];
  pthread_cond_t done_cv;
} dt_slot;

struct dt_channel {
  uint64_t id;
  int decoupled;
  int closed;
  int64_t max_batch_size;
  uint32_t slot_count;
  uint32_t attached;
  dt_slot* slots;
  pthread_cond_t js_cv;
  dt_channel* next;
};

/* One lock guards every channel and slot: the hand-offs are rare compared to the work in JS. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static dt_channel* g_channels = NULL;
static uint64_t g_next_channel = 1;

static dt_channel* find_channel_locked(uint64_t id) {
  for (dt_channel* c = g_channels; c; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

static dt_slot* find_slot_locked(uint64_t id, uint32_t index) {
  dt_channel* c = find_channel_locked(id);
  if (!c || index >= c->slot_count) return NULL;
  return &c->slots[index];
}

/** Opens a channel for one model load with `slot_count` instances; returns its id (> 0). */
DT_EXPORT uint64_t dt_channel_open(uint32_t slot_count, int32_t decoupled) {
  dt_channel* c = calloc(1, sizeof *c);
  if (!c) return 0;
  c->slots = calloc(slot_count ? slot_count : 1, sizeof *c->slots);
  if (!c->slots) {
    free(c);
    return 0;
  }
  c->slot_count = slot_count;
  c->decoupled = decoupled != 0;
  pthread_cond_init(&c->js_cv, NULL);
  for (uint32_t i = 0; i < slot_count; ++i) {
    c->slots[i].channel = c;
    c->slots[i].index = i;
    pthread_cond_init(&c->slots[i].done_cv, NULL);
  }
  pthread_mutex_lock(&g_mu);
  c->id = g_next_channel++;
  c->next = g_channels;
  g_channels = c;
  pthread_mutex_unlock(&g_mu);
  return c->id;
}

/**
 * Closes a channel: waiting JS calls return -1 and later batches are answered UNAVAILABLE by
 * Execute itself. The struct stays allocated because Triton may still hold instances of it.
 */
DT_EXPORT void dt_channel_close(uint64_t id) {
  pthread_mutex_lock(&g_mu);
  dt_channel* c = find_channel_locked(id);
  if (c) {
    c->closed = 1;
    pthread_cond_broadcast(&c->js_cv);
    for (uint32_t i = 0; i < c->slot_count; ++i) pthread_cond_broadcast(&c->slots[i].done_cv);
  }
  pthread_mutex_unlock(&g_mu);
}

/** How many instances Triton attached to the channel so far. */
DT_EXPORT uint32_t dt_channel_attached(uint64_t id) {
  pthread_mutex_lock(&g_mu);
  dt_channel* c = find_channel_locked(id);
  uint32_t n = c ? c->attached : 0;
  pthread_mutex_unlock(&g_mu);
  return n;
}

/**
 * Waits for the next batch of slot `index` (JS calls this as a nonblocking FFI call).
 * Returns the request count (> 0), 0 on timeout, -1 when the slot was finalized or the channel
 * closed, -2 for an unknown channel or slot.
 */
DT_EXPORT int32_t dt_next_batch(uint64_t id, uint32_t index, int32_t timeout_ms) {
  pthread_mutex_lock(&g_mu);
  dt_slot* s = find_slot_locked(id, index);
  if (!s) {
    pthread_mutex_unlock(&g_mu);
    return -2;
  }
  dt_channel* c = s->channel;
  struct timespec deadline;
  deadline_after(&deadline, timeout_ms);
  int32_t result = 0;
  for (;;) {
    if (s->state == SLOT_READY) {
      s->state = SLOT_TAKEN;
      s->compute_start = now_ns();
      result = (int32_t)s->count;
      break;
    }
    if (s->state == SLOT_FINALIZED || c->closed) {
      result = -1;
      break;
    }
    if (pthread_cond_timedwait(&c->js_cv, &g_mu, &deadline) == ETIMEDOUT) {
      result = 0;
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return result;
}

static void slot_reserve(dt_slot* s, uint32_t count) {
  if (count <= s->capacity) return;
  s->requests = realloc(s->requests, count * sizeof *s->requests);
  s->responses = realloc(s->responses, count * sizeof *s->responses);
  s->factories = realloc(s->factories, count * sizeof *s->factories);
  s->failed = realloc(s->failed, count);
  s->finished = realloc(s->finished, count);
  s->batch_sizes = realloc(s->batch_sizes, count * sizeof *s->batch_sizes);
  if (!s->requests || !s->responses || !s->factories || !s->failed || !s->finished ||
      !s->batch_sizes)
    abort();
  s->capacity = count;
}

static void* slot_scratch(dt_slot* s, size_t size) {
  if (s->scratch_count == s->scratch_capacity) {
    uint32_t cap = s->scratch_capacity ? s->scratch_capacity * 2 : 4;
    void** grown = realloc(s->scratch, cap * sizeof *grown);
    if (!grown) abort();
    s->scratch = grown;
    s->scratch_capacity = cap;
  }
  void* p = malloc(size ? size : 1);
  if (!p) abort();
  s->scratch[s->scratch_count++] = p;
  return p;
}

static void describe_request(dt_slot* s, uint32_t r, sbuf* sb) {
  TRITONBACKEND_Request* request = s->requests[r];
  const char* id = "";
  TRITONSERVER_Error* err = TRITONBACKEND_RequestId(request, &id);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    id = "";
  }
  bool cancelled = false;
  err = TRITONBACKEND_RequestIsCancelled(request, &cancelled);
  if (err) TRITONSERVER_ErrorDelete(err);
  sb_str(sb, "{\"id\":");
  sb_json(sb, id);
  sb_fmt(sb, ",\"cancelled\":%s,\"parameters\":{", cancelled ? "true" : "false");
  uint32_t n = 0;
  err = TRITONBACKEND_RequestParameterCount(request, &n);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    n = 0;
  }
  /* Entries that fail are skipped, so separators go by what was written, not by index. */
  uint32_t written = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const char* key = NULL;
    int type = 0;
    const void* value = NULL;
    err = TRITONBACKEND_RequestParameter(request, i, &key, &type, &value);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    if (written++) sb_str(sb, ",");
    sb_json(sb, key);
    sb_str(sb, ":");
    sb_param(sb, type, value);
  }
  sb_str(sb, "},\"inputs\":[");
  uint32_t inputs = 0;
  err = TRITONBACKEND_RequestInputCount(request, &inputs);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    inputs = 0;
  }
  s->batch_sizes[r] = 1;
  written = 0;
  for (uint32_t i = 0; i < inputs; ++i) {
    TRITONBACKEND_Input* input = NULL;
    const char* name = NULL;
    int datatype = 0;
    const int64_t* shape = NULL;
    uint32_t dims = 0, buffers = 0;
    uint64_t byte_size = 0;
    err = TRITONBACKEND_RequestInputByIndex(request, i, &input);
    if (!err) err = TRITONBACKEND_InputProperties(input, &name, &datatype, &shape, &dims,
                                                  &byte_size, &buffers);
    if (err) {
      snprintf(s->error, sizeof s->error, "%s", TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    if (i == 0 && s->channel->max_batch_size > 0 && dims > 0) s->batch_sizes[r] = (uint64_t)shape[0];
    /* One chunk is read in place; several are joined into scratch memory owned by the slot. */
    const void* base = NULL;
    int gpu = 0;
    if (buffers == 1) {
      uint64_t size = 0;
      int mem = DT_MEM_CPU;
      int64_t mem_id = 0;
      err = TRITONBACKEND_InputBuffer(input, 0, &base, &size, &mem, &mem_id);
      if (err) {
        TRITONSERVER_ErrorDelete(err);
        base = NULL;
      }
      gpu = mem == DT_MEM_GPU;
    } else if (buffers > 1) {
      char* joined = slot_scratch(s, byte_size);
      uint64_t offset = 0;
      for (uint32_t b = 0; b < buffers; ++b) {
        const void* chunk = NULL;
        uint64_t size = 0;
        int mem = DT_MEM_CPU;
        int64_t mem_id = 0;
        err = TRITONBACKEND_InputBuffer(input, b, &chunk, &size, &mem, &mem_id);
        if (err) {
          TRITONSERVER_ErrorDelete(err);
          break;
        }
        if (mem == DT_MEM_GPU) gpu = 1;
        if (offset + size > byte_size) break;
        if (!gpu) memcpy(joined + offset, chunk, size);
        offset += size;
      }
      base = joined;
    }
    if (written++) sb_str(sb, ",");
    sb_str(sb, "{\"name\":");
    sb_json(sb, name);
    sb_fmt(sb, ",\"datatype\":%d,\"shape\":[", datatype);
    for (uint32_t d = 0; d < dims; ++d) sb_fmt(sb, d ? ",%" PRId64 : "%" PRId64, shape[d]);
    sb_fmt(sb, "],\"ptr\":%" PRIuPTR ",\"size\":%" PRIu64 ",\"gpu\":%s}", (uintptr_t)base,
           byte_size, gpu ? "true" : "false");
  }
  sb_str(sb, "],\"outputs\":[");
  uint32_t outputs = 0;
  err = TRITONBACKEND_RequestOutputCount(request, &outputs);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    outputs = 0;
  }
  written = 0;
  for (uint32_t i = 0; i < outputs; ++i) {
    const char* name = NULL;
    err = TRITONBACKEND_RequestOutputName(request, i, &name);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    if (written++) sb_str(sb, ",");
    sb_json(sb, name);
  }
  sb_str(sb, "]}");
}

/**
 * Describes the batch JS took from a slot as JSON: `[{id, cancelled, parameters, inputs:
 * [{name, datatype, shape, ptr, size, gpu}], outputs: [names]}]`. The string and the input
 * memory stay valid until `dt_batch_done`.
 */
DT_EXPORT const char* dt_batch_describe(uint64_t id, uint32_t index) {
  pthread_mutex_lock(&g_mu);
  dt_slot* s = find_slot_locked(id, index);
  int ok = s && s->state == SLOT_TAKEN;
  pthread_mutex_unlock(&g_mu);
  if (!ok) return NULL;
  /* The slot is JS's until dt_batch_done; no lock needed for its batch fields. */
  s->description.len = 0;
  sbuf* sb = &s->description;
  sb_str(sb, "[");
  for (uint32_t r = 0; r < s->count; ++r) {
    if (r) sb_str(sb, ",");
    describe_request(s, r, sb);
  }
  sb_str(sb, "]");
  /* A test fault cuts the description short, as a corrupt one would be. */
  if (take_fault(DT_FAULT_DESCRIBE)) sb->data[sb->len / 2] = 0;
  return sb->data;
}

static dt_slot* taken_slot(uint64_t id, uint32_t index, uint32_t request) {
  pthread_mutex_lock(&g_mu);
  dt_slot* s = find_slot_locked(id, index);
  int ok = s && s->state == SLOT_TAKEN && request < s->count;
  pthread_mutex_unlock(&g_mu);
  return ok ? s : NULL;
}

static int slot_fail(dt_slot* s, TRITONSERVER_Error* err) {
  snprintf(s->error, sizeof s->error, "%s", TRITONSERVER_ErrorMessage(err));
  int code = TRITONSERVER_ErrorCode(err);
  TRITONSERVER_ErrorDelete(err);
  return code == 0 ? -100 : -code;
}

/* The open response of a request, created on first use (from its factory when decoupled). */
static TRITONSERVER_Error* open_response(dt_slot* s, uint32_t r, TRITONBACKEND_Response** out) {
  if (s->responses[r]) {
    *out = s->responses[r];
    return NULL;
  }
  TRITONSERVER_Error* err;
  if (s->channel->decoupled) {
    if (!s->factories[r]) {
      err = TRITONBACKEND_ResponseFactoryNew(&s->factories[r], s->requests[r]);
      if (err) return err;
    }
    err = TRITONBACKEND_ResponseNewFromFactory(&s->responses[r], s->factories[r]);
  } else {
    err = TRITONBACKEND_ResponseNew(&s->responses[r], s->requests[r]);
  }
  if (err) {
    s->responses[r] = NULL;
    return err;
  }
  *out = s->responses[r];
  return NULL;
}

/** The message of the last failed call on a slot. */
DT_EXPORT const char* dt_slot_error(uint64_t id, uint32_t index) {
  pthread_mutex_lock(&g_mu);
  dt_slot* s = find_slot_locked(id, index);
  pthread_mutex_unlock(&g_mu);
  return s ? s->error : "Unknown DenoTriton channel or slot";
}

/**
 * Adds output `name` to the open response of request `request` and returns its buffer (CPU
 * memory from the client's allocator) through `buffer_out`. Returns 0, or a negative Triton
 * error code (message in `dt_slot_error`); -100 for UNKNOWN, -99 for a bad slot.
 */
DT_EXPORT int32_t dt_output(uint64_t id, uint32_t index, uint32_t request, const char* name,
                            int32_t datatype, const int64_t* shape, uint32_t dims,
                            uint64_t byte_size, void** buffer_out) {
  dt_slot* s = taken_slot(id, index, request);
  if (!s) return -99;
  if (!s->compute_end) s->compute_end = now_ns();
  TRITONBACKEND_Response* response = NULL;
  TRITONSERVER_Error* err = open_response(s, request, &response);
  if (err) return slot_fail(s, err);
  TRITONBACKEND_Output* output = NULL;
  err = TRITONBACKEND_ResponseOutput(response, &output, name, datatype, shape, dims);
  if (err) return slot_fail(s, err);
  int mem = DT_MEM_CPU;
  int64_t mem_id = 0;
  void* buffer = NULL;
  err = TRITONBACKEND_OutputBuffer(output, &buffer, byte_size, &mem, &mem_id);
  if (err) return slot_fail(s, err);
  if (mem == DT_MEM_GPU) {
    snprintf(s->error, sizeof s->error,
             "Cannot write output '%s': the client allocated GPU memory", name);
    return -DT_CODE_UNSUPPORTED;
  }
  *buffer_out = buffer;
  return 0;
}

/**
 * Whether the core marked a request of the taken batch cancelled (its client went away): 1 yes,
 * 0 no, negative on error. Lets a decoupled stream stop while it runs, not only at batch start.
 */
DT_EXPORT int32_t dt_request_cancelled(uint64_t id, uint32_t index, uint32_t request) {
  dt_slot* s = taken_slot(id, index, request);
  if (!s) return -99;
  bool cancelled = false;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestIsCancelled(s->requests[request], &cancelled);
  if (err) return slot_fail(s, err);
  return cancelled ? 1 : 0;
}

/**
 * Sends the open response of a request (creating an empty one if none is open). `error_code`
 * < 0 sends success, otherwise an error with `message`. For decoupled models `final` marks the
 * last response; a final with no open response and no error sends the flags-only final.
 */
DT_EXPORT int32_t dt_send(uint64_t id, uint32_t index, uint32_t request, int32_t final,
                          int32_t error_code, const char* message) {
  dt_slot* s = taken_slot(id, index, request);
  if (!s) return -99;
  if (s->finished[request]) return 0;
  if (!s->compute_end) s->compute_end = now_ns();
  int decoupled = s->channel->decoupled;
  uint32_t flags = (!decoupled || final) ? DT_RESPONSE_FINAL : 0;
  TRITONSERVER_Error* err = NULL;
  if (decoupled && final && error_code < 0 && !s->responses[request]) {
    if (!s->factories[request]) {
      err = TRITONBACKEND_ResponseFactoryNew(&s->factories[request], s->requests[request]);
      if (err) return slot_fail(s, err);
    }
    err = TRITONBACKEND_ResponseFactorySendFlags(s->factories[request], DT_RESPONSE_FINAL);
    if (err) return slot_fail(s, err);
    s->finished[request] = 1;
    return 0;
  }
  TRITONBACKEND_Response* response = NULL;
  err = open_response(s, request, &response);
  if (err) return slot_fail(s, err);
  TRITONSERVER_Error* failure =
      error_code >= 0 ? TRITONSERVER_ErrorNew(error_code, message ? message : "") : NULL;
  err = send_response(response, flags, failure);
  s->responses[request] = NULL;
  if (failure) {
    TRITONSERVER_ErrorDelete(failure);
    s->failed[request] = 1;
  }
  if (flags & DT_RESPONSE_FINAL) s->finished[request] = 1;
  if (err) {
    /* The core owns the response even now: never delete it. A second final would not be
       delivered either, so the request counts as failed and finished. */
    s->failed[request] = 1;
    return slot_fail(s, err);
  }
  return 0;
}

static void finish_batch(dt_slot* s, int code, const char* message) {
  uint64_t exec_end = now_ns();
  if (!s->compute_start) s->compute_start = s->exec_start;
  if (!s->compute_end) s->compute_end = exec_end;
  uint64_t total = 0;
  for (uint32_t r = 0; r < s->count; ++r) {
    if (!s->finished[r]) {
      /* Unsent responses become errors: every request gets exactly one final. */
      TRITONBACKEND_Response* response = s->responses[r];
      TRITONSERVER_Error* err = NULL;
      if (!response && s->channel->decoupled) {
        if (!s->factories[r]) err = TRITONBACKEND_ResponseFactoryNew(&s->factories[r], s->requests[r]);
        if (!err) err = TRITONBACKEND_ResponseNewFromFactory(&response, s->factories[r]);
      } else if (!response) {
        err = TRITONBACKEND_ResponseNew(&response, s->requests[r]);
      }
      if (err) {
        TRITONSERVER_ErrorDelete(err);
      } else {
        TRITONSERVER_Error* failure = TRITONSERVER_ErrorNew(code, message);
        err = send_response(response, DT_RESPONSE_FINAL, failure);
        TRITONSERVER_ErrorDelete(failure);
        /* Sent or not, the response is the core's now. */
        if (err) TRITONSERVER_ErrorDelete(err);
      }
      s->responses[r] = NULL;
      s->failed[r] = 1;
    }
    if (s->factories[r]) {
      TRITONBACKEND_ResponseFactoryDelete(s->factories[r]);
      s->factories[r] = NULL;
    }
    total += s->batch_sizes[r];
    TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceReportStatistics(
        s->instance, s->requests[r], !s->failed[r], s->exec_start, s->compute_start,
        s->compute_end, exec_end);
    if (err) TRITONSERVER_ErrorDelete(err);
    err = TRITONBACKEND_RequestRelease(s->requests[r], DT_RELEASE_ALL);
    if (err) TRITONSERVER_ErrorDelete(err);
  }
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceReportBatchStatistics(
      s->instance, total, s->exec_start, s->compute_start, s->compute_end, exec_end);
  if (err) TRITONSERVER_ErrorDelete(err);
  for (uint32_t i = 0; i < s->scratch_count; ++i) free(s->scratch[i]);
  s->scratch_count = 0;
}

/**
 * Ends the batch of a slot like `dt_batch_done`, but the requests without a final response get
 * an error with `code` and `message` (JS could not run the batch at all).
 */
DT_EXPORT int32_t dt_batch_fail(uint64_t id, uint32_t index, int32_t code, const char* message) {
  pthread_mutex_lock(&g_mu);
  dt_slot* s = find_slot_locked(id, index);
  int ok = s && s->state == SLOT_TAKEN;
  pthread_mutex_unlock(&g_mu);
  if (!ok) return -99;
  finish_batch(s, code, message ? message : "");
  pthread_mutex_lock(&g_mu);
  s->state = SLOT_DONE;
  pthread_cond_broadcast(&s->done_cv);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

/**
 * Ends the batch of a slot: requests without a final response get an INTERNAL error,
 * statistics are reported, every request is released, and Execute returns.
 */
DT_EXPORT int32_t dt_batch_done(uint64_t id, uint32_t index) {
  return dt_batch_fail(id, index, DT_CODE_INTERNAL, "The model sent no response for this request");
}

/* ---- Backend entry points ------------------------------------------------------------------ */

DT_EXPORT TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  (void)backend;
  uint32_t major = 0, minor = 0;
  TRITONSERVER_Error* err = TRITONBACKEND_ApiVersion(&major, &minor);
  if (err) return err;
  if (major != 1 || minor < 19) {
    return dt_error(DT_CODE_UNSUPPORTED,
                    "DenoTriton backend needs TRITONBACKEND API 1.19 or later: got %u.%u", major,
                    minor);
  }
  return NULL;
}

/* Finds `"key"` in JSON text and returns the text right after the following ':' (or NULL). */
static const char* json_after_key(const char* json, size_t len, const char* key) {
  size_t klen = strlen(key);
  for (const char* p = json; p && (size_t)(p - json) + klen + 2 <= len; ++p) {
    p = memchr(p, '"', len - (size_t)(p - json));
    if (!p) return NULL;
    if ((size_t)(p - json) + klen + 2 <= len && strncmp(p + 1, key, klen) == 0 &&
        p[klen + 1] == '"') {
      const char* q = p + klen + 2;
      while ((size_t)(q - json) < len && (*q == ' ' || *q == ':')) ++q;
      return q;
    }
  }
  return NULL;
}

DT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  const char* name = "";
  TRITONBACKEND_ModelName(model, &name);
  TRITONSERVER_Message* message = NULL;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelConfig(model, 1, &message);
  if (err) return err;
  const char* json = NULL;
  size_t len = 0;
  err = TRITONSERVER_MessageSerializeToJson(message, &json, &len);
  if (err) {
    TRITONSERVER_MessageDelete(message);
    return err;
  }
  uint64_t channel_id = 0;
  int64_t max_batch_size = 0;
  /* parameters: {"denotriton_channel": {"string_value": "<id>"}} */
  const char* p = json_after_key(json, len, "denotriton_channel");
  if (p) p = json_after_key(p, len - (size_t)(p - json), "string_value");
  if (p && *p == '"') channel_id = strtoull(p + 1, NULL, 10);
  p = json_after_key(json, len, "max_batch_size");
  if (p) max_batch_size = strtoll(p, NULL, 10);
  TRITONSERVER_MessageDelete(message);
  pthread_mutex_lock(&g_mu);
  dt_channel* c = channel_id ? find_channel_locked(channel_id) : NULL;
  if (c) c->max_batch_size = max_batch_size;
  pthread_mutex_unlock(&g_mu);
  if (!c) {
    return dt_error(DT_CODE_INVALID_ARG,
                    "Cannot load model '%s': no DenoTriton consumer is registered for it "
                    "(config parameter denotriton_channel missing or unknown)",
                    name);
  }
  return TRITONBACKEND_ModelSetState(model, c);
}

DT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  (void)model;
  return NULL;
}

DT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  TRITONBACKEND_Model* model = NULL;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err) return err;
  void* state = NULL;
  err = TRITONBACKEND_ModelState(model, &state);
  if (err) return err;
  dt_channel* c = state;
  pthread_mutex_lock(&g_mu);
  if (c->attached >= c->slot_count) {
    uint32_t n = c->slot_count;
    pthread_mutex_unlock(&g_mu);
    return dt_error(DT_CODE_INVALID_ARG,
                    "Cannot start model instance: the model has %u DenoTriton instances", n);
  }
  dt_slot* s = &c->slots[c->attached++];
  s->instance = instance;
  s->state = SLOT_IDLE;
  pthread_cond_broadcast(&c->js_cv);
  pthread_mutex_unlock(&g_mu);
  return TRITONBACKEND_ModelInstanceSetState(instance, s);
}

DT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) {
  void* state = NULL;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err) return err;
  dt_slot* s = state;
  if (!s) return NULL;
  pthread_mutex_lock(&g_mu);
  s->state = SLOT_FINALIZED;
  s->instance = NULL;
  pthread_cond_broadcast(&s->channel->js_cv);
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

#define DT_STOPPED "Server stopped before the request completed"

DT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  void* state = NULL;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err) return err;
  dt_slot* s = state;
  pthread_mutex_lock(&g_mu);
  /* The request array is Triton's and valid only during this call: copy the pointers. */
  slot_reserve(s, request_count);
  memcpy(s->requests, requests, request_count * sizeof *requests);
  memset(s->responses, 0, request_count * sizeof *s->responses);
  memset(s->factories, 0, request_count * sizeof *s->factories);
  memset(s->failed, 0, request_count);
  memset(s->finished, 0, request_count);
  for (uint32_t r = 0; r < request_count; ++r) s->batch_sizes[r] = 1;
  s->count = request_count;
  s->exec_start = now_ns();
  s->compute_start = 0;
  s->compute_end = 0;
  s->error[0] = 0;
  /* A closed channel means the server stops: the built-in engine's words for it. */
  if (s->channel->closed) {
    pthread_mutex_unlock(&g_mu);
    finish_batch(s, DT_CODE_UNAVAILABLE, DT_STOPPED);
    return NULL;
  }
  s->state = SLOT_READY;
  pthread_cond_broadcast(&s->channel->js_cv);
  /* Block until JS is done: with BLOCKING semantics Triton forms the next batch meanwhile. */
  while (s->state != SLOT_DONE) {
    if (s->channel->closed && s->state == SLOT_READY) {
      s->state = SLOT_TAKEN;
      pthread_mutex_unlock(&g_mu);
      finish_batch(s, DT_CODE_UNAVAILABLE, DT_STOPPED);
      pthread_mutex_lock(&g_mu);
      break;
    }
    pthread_cond_wait(&s->done_cv, &g_mu);
  }
  s->state = SLOT_IDLE;
  s->count = 0;
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

/* ---- Front-end bridge: allocator, completion callbacks and the event queue ----------------- */

enum { EVENT_RESPONSE = 1, EVENT_RELEASE = 2 };

typedef struct {
  uint64_t tag;
  uint64_t kind_flags; /* kind | flags << 8 */
  uint64_t pointer;
} dt_event;

/*
 * One queue per engine: several engines (several Triton objects, or parallel test workers) can
 * live in one process, and each must see only its own events. The queue id rides in the top 16
 * bits of every tag, so the callbacks route without a lookup table per request.
 */
typedef struct dt_queue {
  uint64_t id;
  pthread_cond_t cv;
  dt_event* events;
  size_t head, len, cap;
  int wake;
  int closed;
  int waiters;
  struct dt_queue* next;
} dt_queue;

#define DT_QUEUE_SHIFT 48

static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static dt_queue* q_list = NULL;
static uint64_t q_next_id = 1;

static dt_queue* find_queue_locked(uint64_t id) {
  for (dt_queue* q = q_list; q; q = q->next) {
    if (q->id == id) return q;
  }
  return NULL;
}

static void free_queue(dt_queue* q) {
  pthread_cond_destroy(&q->cv);
  free(q->events);
  free(q);
}

/** Opens an event queue and returns its id (0 when out of memory or ids). */
DT_EXPORT uint64_t dt_events_open(void) {
  dt_queue* q = calloc(1, sizeof *q);
  if (!q) return 0;
  pthread_cond_init(&q->cv, NULL);
  pthread_mutex_lock(&q_mu);
  if (q_next_id >= (1ull << (64 - DT_QUEUE_SHIFT))) {
    pthread_mutex_unlock(&q_mu);
    free_queue(q);
    return 0;
  }
  q->id = q_next_id++;
  q->next = q_list;
  q_list = q;
  pthread_mutex_unlock(&q_mu);
  return q->id;
}

/** Closes a queue; a wait still in flight returns and the last waiter frees it. */
DT_EXPORT void dt_events_close(uint64_t id) {
  pthread_mutex_lock(&q_mu);
  dt_queue** link = &q_list;
  while (*link && (*link)->id != id) link = &(*link)->next;
  dt_queue* q = *link;
  if (q) {
    *link = q->next;
    q->closed = 1;
    pthread_cond_broadcast(&q->cv);
    if (q->waiters == 0) free_queue(q);
  }
  pthread_mutex_unlock(&q_mu);
}

static void drop_orphan(uint64_t kind, void* pointer) {
  /* Nobody will read this event: its engine is gone. Free what Triton handed over. */
  if (kind == EVENT_RESPONSE && pointer) {
    TRITONSERVER_Error* err = TRITONSERVER_InferenceResponseDelete(pointer);
    if (err) TRITONSERVER_ErrorDelete(err);
  }
}

static void push_event(uint64_t tag, uint64_t kind, uint32_t flags, void* pointer) {
  pthread_mutex_lock(&q_mu);
  dt_queue* q = find_queue_locked(tag >> DT_QUEUE_SHIFT);
  if (!q) {
    pthread_mutex_unlock(&q_mu);
    drop_orphan(kind, pointer);
    return;
  }
  if (q->len == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 64;
    dt_event* grown = malloc(cap * sizeof *grown);
    if (!grown) abort();
    for (size_t i = 0; i < q->len; ++i) grown[i] = q->events[(q->head + i) % q->cap];
    free(q->events);
    q->events = grown;
    q->cap = cap;
    q->head = 0;
  }
  q->events[(q->head + q->len) % q->cap] =
      (dt_event){tag, kind | ((uint64_t)flags << 8), (uint64_t)(uintptr_t)pointer};
  ++q->len;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q_mu);
}

/**
 * Waits up to `timeout_ms` for events of queue `id` and copies up to `max` of them into `out`
 * as triples of u64 (tag, kind | flags << 8, pointer). Returns how many (0 on timeout or wake,
 * -1 for an unknown or closed queue). JS calls this as a nonblocking FFI call.
 */
DT_EXPORT int32_t dt_wait_events(uint64_t id, uint64_t* out, int32_t max, int32_t timeout_ms) {
  struct timespec deadline;
  deadline_after(&deadline, timeout_ms);
  pthread_mutex_lock(&q_mu);
  dt_queue* q = find_queue_locked(id);
  if (!q) {
    pthread_mutex_unlock(&q_mu);
    return -1;
  }
  ++q->waiters;
  while (q->len == 0 && !q->wake && !q->closed) {
    if (pthread_cond_timedwait(&q->cv, &q_mu, &deadline) == ETIMEDOUT) break;
  }
  --q->waiters;
  if (q->closed) {
    if (q->waiters == 0) free_queue(q);
    pthread_mutex_unlock(&q_mu);
    return -1;
  }
  q->wake = 0;
  int32_t n = 0;
  while (q->len > 0 && n < max) {
    dt_event e = q->events[q->head];
    q->head = (q->head + 1) % q->cap;
    --q->len;
    out[n * 3] = e.tag;
    out[n * 3 + 1] = e.kind_flags;
    out[n * 3 + 2] = e.pointer;
    ++n;
  }
  pthread_mutex_unlock(&q_mu);
  return n;
}

/** Makes a waiting `dt_wait_events` on queue `id` return now. */
DT_EXPORT void dt_wake_events(uint64_t id) {
  pthread_mutex_lock(&q_mu);
  dt_queue* q = find_queue_locked(id);
  if (q) {
    q->wake = 1;
    pthread_cond_broadcast(&q->cv);
  }
  pthread_mutex_unlock(&q_mu);
}

static TRITONSERVER_Error* alloc_cpu(TRITONSERVER_ResponseAllocator* allocator,
                                     const char* tensor_name, size_t byte_size, int memory_type,
                                     int64_t memory_type_id, void* userp, void** buffer,
                                     void** buffer_userp, int* actual_memory_type,
                                     int64_t* actual_memory_type_id) {
  (void)allocator;
  (void)memory_type;
  (void)memory_type_id;
  (void)userp;
  *buffer_userp = NULL;
  *actual_memory_type = DT_MEM_CPU;
  *actual_memory_type_id = 0;
  if (byte_size == 0) {
    *buffer = NULL;
    return NULL;
  }
  *buffer = malloc(byte_size);
  if (!*buffer) {
    return dt_error(DT_CODE_INTERNAL, "Cannot allocate %zu bytes for output '%s'", byte_size,
                    tensor_name);
  }
  return NULL;
}

static TRITONSERVER_Error* release_cpu(TRITONSERVER_ResponseAllocator* allocator, void* buffer,
                                       void* buffer_userp, size_t byte_size, int memory_type,
                                       int64_t memory_type_id) {
  (void)allocator;
  (void)buffer_userp;
  (void)byte_size;
  (void)memory_type;
  (void)memory_type_id;
  free(buffer);
  return NULL;
}

static void on_response(TRITONSERVER_InferenceResponse* response, uint32_t flags, void* userp) {
  push_event((uint64_t)(uintptr_t)userp, EVENT_RESPONSE, flags, response);
}

static void on_release(TRITONSERVER_InferenceRequest* request, uint32_t flags, void* userp) {
  push_event((uint64_t)(uintptr_t)userp, EVENT_RELEASE, flags, request);
}

static pthread_once_t g_allocator_once = PTHREAD_ONCE_INIT;
static TRITONSERVER_ResponseAllocator* g_allocator = NULL;
static TRITONSERVER_Error* g_allocator_error = NULL;

static void make_allocator(void) {
  g_allocator_error = TRITONSERVER_ResponseAllocatorNew(&g_allocator, alloc_cpu, release_cpu, NULL);
}

/**
 * Routes a request's responses and release to the event queue under `tag` (the userp of both
 * callbacks), with the CPU allocator. Returns NULL or an error the caller deletes.
 */
DT_EXPORT TRITONSERVER_Error* dt_request_bind(TRITONSERVER_InferenceRequest* request, uint64_t tag) {
  pthread_once(&g_allocator_once, make_allocator);
  if (!g_allocator) {
    return dt_error(DT_CODE_INTERNAL, "Cannot create the response allocator: %s",
                    g_allocator_error ? TRITONSERVER_ErrorMessage(g_allocator_error) : "unknown");
  }
  void* userp = (void*)(uintptr_t)tag;
  TRITONSERVER_Error* err = TRITONSERVER_InferenceRequestSetReleaseCallback(request, on_release, userp);
  if (err) return err;
  return TRITONSERVER_InferenceRequestSetResponseCallback(request, g_allocator, NULL, on_response,
                                                          userp);
}

/**
 * Describes a response as malloc'd JSON (free with `dt_free`): `{error: {code, message} | null,
 * model, version, id, parameters, outputs: [{name, datatype, shape, ptr, size, gpu}]}`. Output
 * pointers stay valid until `TRITONSERVER_InferenceResponseDelete`.
 */
DT_EXPORT char* dt_response_describe(TRITONSERVER_InferenceResponse* response) {
  sbuf sb = {0};
  TRITONSERVER_Error* failure = TRITONSERVER_InferenceResponseError(response);
  sb_str(&sb, "{\"error\":");
  if (failure) {
    sb_fmt(&sb, "{\"code\":%d,\"message\":", TRITONSERVER_ErrorCode(failure));
    sb_json(&sb, TRITONSERVER_ErrorMessage(failure));
    sb_str(&sb, "}");
  } else {
    sb_str(&sb, "null");
  }
  const char* model = "";
  int64_t version = -1;
  TRITONSERVER_Error* err = TRITONSERVER_InferenceResponseModel(response, &model, &version);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    model = "";
  }
  sb_str(&sb, ",\"model\":");
  sb_json(&sb, model);
  sb_fmt(&sb, ",\"version\":%" PRId64 ",\"id\":", version);
  const char* id = "";
  err = TRITONSERVER_InferenceResponseId(response, &id);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    id = "";
  }
  sb_json(&sb, id);
  sb_str(&sb, ",\"parameters\":{");
  uint32_t n = 0;
  err = TRITONSERVER_InferenceResponseParameterCount(response, &n);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    n = 0;
  }
  /* Entries that fail are skipped, so separators go by what was written. */
  uint32_t written = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const char* name = NULL;
    int type = 0;
    const void* value = NULL;
    err = TRITONSERVER_InferenceResponseParameter(response, i, &name, &type, &value);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    if (written++) sb_str(&sb, ",");
    sb_json(&sb, name);
    sb_str(&sb, ":");
    sb_param(&sb, type, value);
  }
  sb_str(&sb, "},\"outputs\":[");
  n = 0;
  if (!failure) {
    err = TRITONSERVER_InferenceResponseOutputCount(response, &n);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      n = 0;
    }
  }
  written = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const char* name = NULL;
    int datatype = 0;
    const int64_t* shape = NULL;
    uint64_t dims = 0;
    const void* base = NULL;
    size_t size = 0;
    int mem = 0;
    int64_t mem_id = 0;
    void* userp = NULL;
    err = TRITONSERVER_InferenceResponseOutput(response, i, &name, &datatype, &shape, &dims, &base,
                                               &size, &mem, &mem_id, &userp);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    if (written++) sb_str(&sb, ",");
    sb_str(&sb, "{\"name\":");
    sb_json(&sb, name);
    sb_fmt(&sb, ",\"datatype\":%d,\"shape\":[", datatype);
    for (uint64_t d = 0; d < dims; ++d) sb_fmt(&sb, d ? ",%" PRId64 : "%" PRId64, shape[d]);
    sb_fmt(&sb, "],\"ptr\":%" PRIuPTR ",\"size\":%zu,\"gpu\":%s}", (uintptr_t)base, size,
           mem == DT_MEM_GPU ? "true" : "false");
  }
  sb_str(&sb, "]}");
  return sb.data;
}

/** Frees memory returned by `dt_response_describe`. */
DT_EXPORT void dt_free(void* pointer) { free(pointer); }

/** The bridge's own version, checked by the TypeScript side. */
DT_EXPORT uint32_t dt_bridge_version(void) { return 2; }
