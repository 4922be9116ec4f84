/*
 * The C ABI of DenoTriton's bridge, shared by its files (see ffi/README.md, "Who runs
 * what"): the core's types and the prototypes we call, declared by hand for Triton 2.51
 * (TRITONSERVER API 1.34, TRITONBACKEND API 1.19), and the helpers the files share.
 *
 *   - dt_backend.c: the Triton backend, run on Triton's model-load and instance threads, and the
 *     slot calls JS makes on the batch an instance thread parked;
 *   - dt_client.c: the client side: the allocator and the completion callbacks (any Triton
 *     thread), the event queues JS drains, and response descriptions;
 *   - dt_server.c: the calls that touch the core's process-wide state (creating and deleting a
 *     server, loading a model, the core's log file), serialized across the process;
 *   - dt_pack.c: the packed-description writer both describe their structures with;
 *   - dt_json.c: the one lookup in the core's model-config JSON.
 *
 * Only DT_EXPORT symbols leave the library (it is built with -fvisibility=hidden).
 */

#ifndef DT_ABI_H
#define DT_ABI_H

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
typedef struct TRITONSERVER_Server TRITONSERVER_Server;
typedef struct TRITONSERVER_ServerOptions TRITONSERVER_ServerOptions;
typedef struct TRITONSERVER_Parameter TRITONSERVER_Parameter;
typedef struct TRITONSERVER_InferenceTrace TRITONSERVER_InferenceTrace;
typedef struct TRITONBACKEND_Backend TRITONBACKEND_Backend;
typedef struct TRITONBACKEND_Model TRITONBACKEND_Model;
typedef struct TRITONBACKEND_ModelInstance TRITONBACKEND_ModelInstance;
typedef struct TRITONBACKEND_Request TRITONBACKEND_Request;
typedef struct TRITONBACKEND_Response TRITONBACKEND_Response;
typedef struct TRITONBACKEND_ResponseFactory TRITONBACKEND_ResponseFactory;
typedef struct TRITONBACKEND_Input TRITONBACKEND_Input;
typedef struct TRITONBACKEND_Output TRITONBACKEND_Output;
typedef struct TRITONBACKEND_State TRITONBACKEND_State;

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
enum { DT_SEQUENCE_START = 1, DT_SEQUENCE_END = 2 };
/* How packed descriptions carry a correlation ID: none, a uint64, or a string. */
enum { DT_CORRID_NONE = 0, DT_CORRID_UINT = 1, DT_CORRID_STRING = 2 };

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

extern TRITONSERVER_Error* TRITONSERVER_ServerOptionsNew(TRITONSERVER_ServerOptions** options);
extern TRITONSERVER_Error* TRITONSERVER_ServerOptionsDelete(TRITONSERVER_ServerOptions* options);
extern TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetLogFile(
    TRITONSERVER_ServerOptions* options, const char* file);
extern TRITONSERVER_Error* TRITONSERVER_ServerNew(
    TRITONSERVER_Server** server, TRITONSERVER_ServerOptions* options);
extern TRITONSERVER_Error* TRITONSERVER_ServerDelete(TRITONSERVER_Server* server);
extern TRITONSERVER_Error* TRITONSERVER_ServerLoadModelWithParameters(
    TRITONSERVER_Server* server, const char* model_name,
    const TRITONSERVER_Parameter** parameters, uint64_t parameter_count);

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
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestNew(
    TRITONSERVER_InferenceRequest** request, TRITONSERVER_Server* server, const char* model_name,
    int64_t model_version);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestDelete(
    TRITONSERVER_InferenceRequest* request);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetId(
    TRITONSERVER_InferenceRequest* request, const char* id);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetPriorityUInt64(
    TRITONSERVER_InferenceRequest* request, uint64_t priority);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(
    TRITONSERVER_InferenceRequest* request, uint64_t timeout_us);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetFlags(
    TRITONSERVER_InferenceRequest* request, uint32_t flags);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationId(
    TRITONSERVER_InferenceRequest* request, uint64_t correlation_id);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationIdString(
    TRITONSERVER_InferenceRequest* request, const char* correlation_id);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddInput(
    TRITONSERVER_InferenceRequest* request, const char* name, int datatype, const int64_t* shape,
    uint64_t dim_count);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputData(
    TRITONSERVER_InferenceRequest* request, const char* name, const void* base, size_t byte_size,
    int memory_type, int64_t memory_type_id);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddRequestedOutput(
    TRITONSERVER_InferenceRequest* request, const char* name);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetStringParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, const char* value);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetIntParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, int64_t value);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetBoolParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, bool value);
extern TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetDoubleParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, double value);
extern TRITONSERVER_Error* TRITONSERVER_ServerInferAsync(
    TRITONSERVER_Server* server, TRITONSERVER_InferenceRequest* request, void* trace);
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
extern TRITONSERVER_Error* TRITONBACKEND_RequestTrace(TRITONBACKEND_Request* request,
                                                      TRITONSERVER_InferenceTrace** trace);
extern TRITONSERVER_Error* TRITONBACKEND_RequestIsCancelled(
    TRITONBACKEND_Request* request, bool* is_cancelled);
extern TRITONSERVER_Error* TRITONBACKEND_RequestFlags(TRITONBACKEND_Request* request, uint32_t* flags);
extern TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationId(
    TRITONBACKEND_Request* request, uint64_t* id);
extern TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationIdString(
    TRITONBACKEND_Request* request, const char** id);
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
extern TRITONSERVER_Error* TRITONBACKEND_StateNew(
    TRITONBACKEND_State** state, TRITONBACKEND_Request* request, const char* name, int datatype,
    const int64_t* shape, uint32_t dims_count);
extern TRITONSERVER_Error* TRITONBACKEND_StateBuffer(
    TRITONBACKEND_State* state, void** buffer, uint64_t buffer_byte_size, int* memory_type,
    int64_t* memory_type_id);
extern TRITONSERVER_Error* TRITONBACKEND_StateUpdate(TRITONBACKEND_State* state);
extern TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, bool success,
    uint64_t exec_start_ns, uint64_t compute_start_ns, uint64_t compute_end_ns,
    uint64_t exec_end_ns);
extern TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, uint64_t batch_size, uint64_t exec_start_ns,
    uint64_t compute_start_ns, uint64_t compute_end_ns, uint64_t exec_end_ns);

/* ---- Tracing (TRITONSERVER_InferenceTrace*, 24.10 headers) --------------------------------- */

/* Activities 0..6 are the timeline (REQUEST_START .. REQUEST_END), 7..9 the tensors. */
enum { DT_TRACE_TENSOR_QUEUE_INPUT = 7, DT_TRACE_TENSOR_BACKEND_OUTPUT = 9 };

typedef void (*dt_trace_activity_fn)(TRITONSERVER_InferenceTrace* trace, int32_t activity,
                                     uint64_t timestamp_ns, void* userp);
typedef void (*dt_trace_tensor_fn)(TRITONSERVER_InferenceTrace* trace, int32_t activity,
                                   const char* name, int32_t datatype, const void* base,
                                   size_t byte_size, const int64_t* shape, uint64_t dim_count,
                                   int32_t memory_type, int64_t memory_type_id, void* userp);
typedef void (*dt_trace_release_fn)(TRITONSERVER_InferenceTrace* trace, void* userp);

extern TRITONSERVER_Error* TRITONSERVER_InferenceTraceTensorNew(
    TRITONSERVER_InferenceTrace** trace, int32_t level, uint64_t parent_id,
    dt_trace_activity_fn activity_fn, dt_trace_tensor_fn tensor_activity_fn,
    dt_trace_release_fn release_fn, void* trace_userp);
extern TRITONSERVER_Error* TRITONSERVER_InferenceTraceDelete(TRITONSERVER_InferenceTrace* trace);
extern TRITONSERVER_Error* TRITONSERVER_InferenceTraceId(TRITONSERVER_InferenceTrace* trace,
                                                         uint64_t* id);

/* ---- Shared helpers ------------------------------------------------------------------------ */

/* An absolute CLOCK_REALTIME deadline `timeout_ms` from now, for pthread_cond_timedwait. */
static inline void deadline_after(struct timespec* ts, int32_t timeout_ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += timeout_ms / 1000;
  ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec += 1;
    ts->tv_nsec -= 1000000000L;
  }
}

/* A core error with a formatted message. */
static inline TRITONSERVER_Error* dt_error(int code, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return TRITONSERVER_ErrorNew(code, msg);
}

/* ---- Lent output memory (dt_backend.c offers, dt_client.c's allocator takes) ---------------- */

/*
 * JS memory offered as an output's buffer: `dt_output` sets it on its own thread around
 * `TRITONBACKEND_OutputBuffer`, which runs the client's allocator synchronously on that thread;
 * the allocator hands out `data` itself when the sizes match (and marks `taken`), so the result
 * is neither copied into the response nor out of it. JS keeps the memory until the response is
 * deleted (`dt_response_delete` reports it).
 */
typedef struct {
  const void* data;
  uint64_t size;
  int taken;
} dt_lend_offer;

extern _Thread_local dt_lend_offer dt_offer;

/*
 * Set while JS's thread runs dt_send or dt_batch_fail (dt_batch_done): the responses and
 * releases these complete may belong to requests another isolate submitted (an HTTP thread
 * sharing the core). Their events then wake that isolate's queue through JS (see
 * dt_events_signal in dt_client.c) instead of its nonblocking wait in C.
 */
extern _Thread_local int dt_signalling;

/* ---- Packed descriptions (dt_pack.c) ------------------------------------------------------- */

/*
 * A little-endian writer into a buffer JS provides: writes past `cap` are counted but dropped, so
 * a caller whose buffer was too small learns the size it needs from `len` and calls again.
 * Strings are a u32 byte length and the bytes; typed parameters a u32 kind (0 string, 1 int,
 * 2 bool, 3 double, 255 a type JS does not read) and the value (string, i64, u32, f64 bits).
 */
typedef struct {
  uint8_t* data;
  size_t len;
  size_t cap;
} dt_out;

void out_put(dt_out* o, const void* p, size_t n);
void out_u32(dt_out* o, uint32_t v);
void out_u64(dt_out* o, uint64_t v);
void out_str(dt_out* o, const char* s);
void out_param(dt_out* o, int type, const void* value);
/* Overwrites the u32 at `at` (a count known only once its entries are written). */
void out_patch_u32(dt_out* o, size_t at, uint32_t v);

/* ---- JSON lookup (dt_json.c) --------------------------------------------------------------- */

/* Finds `"key"` in JSON text and returns the text right after the following ':' (or NULL). */
const char* json_after_key(const char* json, size_t len, const char* key);

#endif
