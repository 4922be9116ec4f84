/*
 * The client side of DenoTriton's bridge (see dt_abi.h and ffi/README.md): building and
 * submitting a request in one call (`dt_infer`); the response allocator and the
 * response-complete and request-release callbacks, which run on any Triton thread (or on JS's
 * thread inside dt_send, dt_batch_done and ServerInferAsync) and only push events onto an
 * engine's queue; the queues JS drains with `dt_poll_events` (its own events) and
 * `dt_wait_events` (nonblocking, for events of Triton's threads); and packed response
 * descriptions.
 * No JS ever runs on a Triton thread.
 */

#include "dt_abi.h"

#include <sys/stat.h>

/* ---- Event queues ------------------------------------------------------------------------ */

/*
 * A traced request's events carry the same tag: an activity (flags: the activity, pointer: its
 * timestamp in ns), a tensor (pointer: a malloc'd blob, see on_trace_tensor; JS frees it with
 * dt_free), and the end of its trace (the core released it; the bridge deleted it).
 */
enum {
  EVENT_RESPONSE = 1,
  EVENT_RELEASE = 2,
  EVENT_TRACE_ACTIVITY = 3,
  EVENT_TRACE_TENSOR = 4,
  EVENT_TRACE_END = 5
};

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
  /* The thread that opened the queue (the engine's JS thread): events it pushes itself, from
     inside its own synchronous calls (dt_send, dt_batch_done, ServerInferAsync on a cache hit),
     wake no waiter, because JS drains them with dt_poll_events as soon as the call returns. */
  pthread_t owner;
  /* Non-zero once the owner asked to be woken through JS (dt_events_signal): the token JS's
     thread hands back, after its bridge call, to the isolate that waits for it. */
  uint32_t signal;
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
  q->owner = pthread_self();
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
  if (kind == EVENT_TRACE_TENSOR) free(pointer);
}

/*
 * Wakes deferred by JS's thread inside dt_send and dt_batch_fail: the tokens of the queues it
 * pushed to that asked for it, taken with dt_events_signals right after the call. Each such
 * wake through C costs three thread hand-offs (this thread wakes the owner's waiting pool
 * thread, which wakes the owner's event loop, which starts the next wait on a pool thread);
 * through JS, one (an `Atomics.notify` the owner's event loop is waiting for). When the list is
 * full the wake goes through C as before, so none is lost.
 */
_Thread_local int dt_signalling = 0;
#define DT_SIGNALS 64
static _Thread_local uint32_t t_signals[DT_SIGNALS];
static _Thread_local int32_t t_signal_count = 0;

static int defer_signal(uint32_t token) {
  for (int32_t i = 0; i < t_signal_count; ++i)
    if (t_signals[i] == token) return 1;
  if (t_signal_count == DT_SIGNALS) return 0;
  t_signals[t_signal_count++] = token;
  return 1;
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
  if (!pthread_equal(pthread_self(), q->owner) &&
      !(q->signal && dt_signalling && defer_signal(q->signal))) {
    pthread_cond_broadcast(&q->cv);
  }
  pthread_mutex_unlock(&q_mu);
}

/* Moves up to `max` events of `q` into `out` (triples of u64); the caller holds q_mu. */
static int32_t take_events_locked(dt_queue* q, uint64_t* out, int32_t max) {
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
  return n;
}

/**
 * Waits up to `timeout_ms` until queue `id` holds events, and returns how many it holds (0 on
 * timeout or wake, -1 for an unknown or closed queue). It takes none: JS then takes them with
 * `dt_poll_events` on its own thread, so events are dispatched in the order they were pushed even
 * when JS also takes its own events right after its calls. JS calls this as a nonblocking FFI
 * call.
 */
DT_EXPORT int32_t dt_wait_events(uint64_t id, int32_t timeout_ms) {
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
  int32_t n = q->len > INT32_MAX ? INT32_MAX : (int32_t)q->len;
  pthread_mutex_unlock(&q_mu);
  return n;
}

/**
 * Takes up to `max` queued events of queue `id` into `out`, as triples of u64 (tag, kind | flags
 * << 8, pointer), without waiting. Returns how many, or -1 for an unknown or closed queue. JS
 * calls it synchronously, right after its own calls that may have completed requests and when
 * `dt_wait_events` saw events.
 */
DT_EXPORT int32_t dt_poll_events(uint64_t id, uint64_t* out, int32_t max) {
  pthread_mutex_lock(&q_mu);
  dt_queue* q = find_queue_locked(id);
  int32_t n = q ? take_events_locked(q, out, max) : -1;
  pthread_mutex_unlock(&q_mu);
  return n;
}

/**
 * Asks that events JS's thread pushes onto queue `id` from inside dt_send and dt_batch_fail
 * (another isolate's batches completing this queue's requests) not wake `dt_wait_events`, but
 * be reported by that thread's dt_events_signals as `token` (non-zero), for JS to wake this
 * queue's isolate itself. Events from Triton's threads still wake the wait.
 */
DT_EXPORT void dt_events_signal(uint64_t id, uint32_t token) {
  pthread_mutex_lock(&q_mu);
  dt_queue* q = find_queue_locked(id);
  if (q) q->signal = token;
  pthread_mutex_unlock(&q_mu);
}

/**
 * Takes up to `max` tokens of the queues this thread's dt_send and dt_batch_fail pushed events
 * onto since the last call (each once) and returns how many; JS wakes their isolates.
 */
DT_EXPORT int32_t dt_events_signals(uint32_t* out, int32_t max) {
  int32_t n = t_signal_count < max ? t_signal_count : max;
  memcpy(out, t_signals, (size_t)n * sizeof *out);
  memmove(t_signals, t_signals + n, (size_t)(t_signal_count - n) * sizeof *t_signals);
  t_signal_count -= n;
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

/* An output buffer in caller memory (see bound_output, below the reader). */
typedef struct {
  void* address;
  uint64_t size;
  /* Where it is: host memory (DT_MEM_CPU, a system region) or a GPU's (DT_MEM_GPU with the
     device, a client's CUDA region the server mapped). */
  int memory_type;
  int64_t memory_id;
  /* The descriptor of the object the buffer is mapped from (-1: none), the size that object must
     have for the buffer to be backed, and the error's message when it has less. */
  int64_t fd;
  uint64_t minimum_size;
  const char* refusal;
} dt_bound;

/* Whether `table` binds output `name` to caller memory, and where. */
static int bound_output(const uint8_t* table, const char* name, dt_bound* bound);

/* The buffer_userp of bound outputs: their memory is the caller's, never freed here. */
static char g_caller_memory;
/* The buffer_userp of outputs in memory JS lent (dt_offer): reported by dt_response_delete. */
static char g_lent_memory;

_Thread_local dt_lend_offer dt_offer;

/* While dt_response_delete runs on this thread: where the release callback reports lent
   buffers. */
static _Thread_local struct {
  uint64_t* out;
  int32_t max;
  int32_t count;
} t_released;

static TRITONSERVER_Error* alloc_cpu(TRITONSERVER_ResponseAllocator* allocator,
                                     const char* tensor_name, size_t byte_size, int memory_type,
                                     int64_t memory_type_id, void* userp, void** buffer,
                                     void** buffer_userp, int* actual_memory_type,
                                     int64_t* actual_memory_type_id) {
  (void)allocator;
  (void)memory_type;
  (void)memory_type_id;
  *buffer_userp = NULL;
  *actual_memory_type = DT_MEM_CPU;
  *actual_memory_type_id = 0;
  dt_bound bound;
  if (userp && bound_output(userp, tensor_name, &bound)) {
    /* The client's region, whichever memory it is in: a CUDA region is handed out as GPU
       memory, and the backend copies into it on the device (no host copy). */
    *actual_memory_type = bound.memory_type;
    *actual_memory_type_id = bound.memory_id;
    /* Triton's words (its HTTP and gRPC allocators) for a region too small. */
    if (byte_size > bound.size) {
      return dt_error(DT_CODE_INTERNAL,
                      "shared memory size specified with the request for output '%s' (%llu "
                      "bytes) should be at least %zu bytes to hold the results",
                      tensor_name, (unsigned long long)bound.size, byte_size);
    }
    /* A client's object may have shrunk since the request was decoded, and the core writes
       here as soon as this returns: a page past the object's end would raise SIGBUS. */
    struct stat st;
    if (bound.fd >= 0 && byte_size > 0 &&
        (fstat((int)bound.fd, &st) != 0 || st.st_size < 0 ||
         (uint64_t)st.st_size < bound.minimum_size)) {
      return TRITONSERVER_ErrorNew(DT_CODE_INVALID_ARG, bound.refusal);
    }
    *buffer = byte_size == 0 ? NULL : bound.address;
    *buffer_userp = &g_caller_memory;
    return NULL;
  }
  if (byte_size == 0) {
    *buffer = NULL;
    return NULL;
  }
  if (dt_offer.data && !dt_offer.taken && dt_offer.size == byte_size) {
    dt_offer.taken = 1;
    *buffer = (void*)dt_offer.data;
    *buffer_userp = &g_lent_memory;
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
  (void)byte_size;
  (void)memory_type;
  (void)memory_type_id;
  if (buffer_userp == &g_lent_memory) {
    /* Released elsewhere (no dt_response_delete on this thread): JS keeps the memory, a leak
       rather than a read of freed memory. */
    if (t_released.out && t_released.count < t_released.max) {
      t_released.out[t_released.count++] = (uint64_t)(uintptr_t)buffer;
    }
    return NULL;
  }
  if (buffer_userp != &g_caller_memory) free(buffer);
  return NULL;
}

/**
 * Deletes a response and writes the addresses of the lent buffers it released (see dt_offer)
 * into `released` (room for `max`): JS may let go of that memory now. Returns their count, or
 * -1 when the core refused the delete (its error is deleted here).
 */
DT_EXPORT int32_t dt_response_delete(TRITONSERVER_InferenceResponse* response, uint64_t* released,
                                     int32_t max) {
  t_released.out = released;
  t_released.max = max;
  t_released.count = 0;
  TRITONSERVER_Error* err = TRITONSERVER_InferenceResponseDelete(response);
  int32_t count = t_released.count;
  t_released.out = NULL;
  t_released.max = 0;
  t_released.count = 0;
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    return -1;
  }
  return count;
}

static void on_response(TRITONSERVER_InferenceResponse* response, uint32_t flags, void* userp) {
  push_event((uint64_t)(uintptr_t)userp, EVENT_RESPONSE, flags, response);
}

static void on_release(TRITONSERVER_InferenceRequest* request, uint32_t flags, void* userp) {
  push_event((uint64_t)(uintptr_t)userp, EVENT_RELEASE, flags, request);
}

/* ---- Trace callbacks: any Triton thread; they only push events ----------------------------- */

static void on_trace_activity(TRITONSERVER_InferenceTrace* trace, int32_t activity,
                              uint64_t timestamp_ns, void* userp) {
  (void)trace;
  /* The timeline only (custom activities of other backends are not ours to name). */
  if (activity < 0 || activity > 6) return;
  push_event((uint64_t)(uintptr_t)userp, EVENT_TRACE_ACTIVITY, (uint32_t)activity,
             (void*)(uintptr_t)timestamp_ns);
}

/*
 * A tensor the core shows the trace (level TENSORS), copied into one blob, since its memory is
 * the core's only during the call: u32 activity, u32 datatype, u32 dims, i64 shape[dims], u32
 * name length, the name, u64 byte size, the bytes (none for GPU memory, which the bridge does
 * not read). JS reads it and frees it with dt_free.
 */
static void on_trace_tensor(TRITONSERVER_InferenceTrace* trace, int32_t activity, const char* name,
                            int32_t datatype, const void* base, size_t byte_size,
                            const int64_t* shape, uint64_t dim_count, int32_t memory_type,
                            int64_t memory_type_id, void* userp) {
  (void)trace;
  (void)memory_type_id;
  if (activity < DT_TRACE_TENSOR_QUEUE_INPUT || activity > DT_TRACE_TENSOR_BACKEND_OUTPUT) return;
  if (dim_count > 64) return;
  size_t bytes = memory_type == DT_MEM_GPU || !base ? 0 : byte_size;
  size_t name_length = strlen(name);
  size_t size = 12 + 8 * dim_count + 4 + name_length + 8 + bytes;
  uint8_t* blob = malloc(size);
  if (!blob) return;
  dt_out o = {blob, 0, size};
  out_u32(&o, (uint32_t)activity);
  out_u32(&o, (uint32_t)datatype);
  out_u32(&o, (uint32_t)dim_count);
  for (uint64_t d = 0; d < dim_count; ++d) out_u64(&o, (uint64_t)shape[d]);
  out_str(&o, name);
  out_u64(&o, bytes);
  out_put(&o, base, bytes);
  push_event((uint64_t)(uintptr_t)userp, EVENT_TRACE_TENSOR, 0, blob);
}

/* The core is done with the trace (after REQUEST_END): ours to delete, then JS writes it. */
static void on_trace_release(TRITONSERVER_InferenceTrace* trace, void* userp) {
  TRITONSERVER_Error* err = TRITONSERVER_InferenceTraceDelete(trace);
  if (err) TRITONSERVER_ErrorDelete(err);
  push_event((uint64_t)(uintptr_t)userp, EVENT_TRACE_END, 0, NULL);
}

/** Frees what the bridge handed JS (a trace tensor's blob). */
DT_EXPORT void dt_free(void* pointer) { free(pointer); }

/** CLOCK_MONOTONIC in ns: the clock of the core's trace timestamps (steady_clock). */
DT_EXPORT uint64_t dt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pthread_once_t g_allocator_once = PTHREAD_ONCE_INIT;
static TRITONSERVER_ResponseAllocator* g_allocator = NULL;
static TRITONSERVER_Error* g_allocator_error = NULL;

static void make_allocator(void) {
  g_allocator_error = TRITONSERVER_ResponseAllocatorNew(&g_allocator, alloc_cpu, release_cpu, NULL);
}

/**
 * Routes a request's responses and release to the event queue under `tag` (the userp of both
 * callbacks), with the CPU allocator and `bound_outputs` (NULL or a table of caller-owned output
 * buffers, see bound_output). Returns NULL or an error the caller deletes.
 */
static TRITONSERVER_Error* dt_request_bind(TRITONSERVER_InferenceRequest* request, uint64_t tag,
                                           const uint8_t* bound_outputs) {
  pthread_once(&g_allocator_once, make_allocator);
  if (!g_allocator) {
    return dt_error(DT_CODE_INTERNAL, "Cannot create the response allocator: %s",
                    g_allocator_error ? TRITONSERVER_ErrorMessage(g_allocator_error) : "unknown");
  }
  void* userp = (void*)(uintptr_t)tag;
  TRITONSERVER_Error* err = TRITONSERVER_InferenceRequestSetReleaseCallback(request, on_release, userp);
  if (err) return err;
  return TRITONSERVER_InferenceRequestSetResponseCallback(request, g_allocator,
                                                          (void*)bound_outputs, on_response, userp);
}

/* ---- Building and submitting a request in one call --------------------------------------- */

typedef struct {
  const uint8_t* at;
  const uint8_t* end;
  int bad;
} dt_reader;

static uint32_t rd_u32(dt_reader* r) {
  uint32_t v = 0;
  if (r->end - r->at < 4) {
    r->bad = 1;
    return 0;
  }
  memcpy(&v, r->at, 4);
  r->at += 4;
  return v;
}

static uint64_t rd_u64(dt_reader* r) {
  uint64_t v = 0;
  if (r->end - r->at < 8) {
    r->bad = 1;
    return 0;
  }
  memcpy(&v, r->at, 8);
  r->at += 8;
  return v;
}

/* A string: u32 length, the bytes, then a NUL the writer adds (not counted). */
static const char* rd_str(dt_reader* r) {
  uint32_t len = rd_u32(r);
  if (r->bad || (uint64_t)(r->end - r->at) < (uint64_t)len + 1 || r->at[len] != 0) {
    r->bad = 1;
    return "";
  }
  const char* s = (const char*)r->at;
  r->at += len + 1;
  return s;
}

/*
 * Output buffers the caller already has (a client's shared-memory region), handed to `dt_infer`
 * as a table in the caller's memory that outlives the request's last response: u64 table length
 * in bytes, u32 count, then per output its name (a string as above), u64 address, u64 byte size,
 * u32 memory type (DT_MEM_CPU, or DT_MEM_GPU for a CUDA region) and i64 memory type id (the
 * device), and its guard: i64 descriptor of the object the buffer is mapped from (-1: none), u64
 * size that object must have, and the refusal (a string). The allocator hands out that memory
 * for those outputs, so the backend's copy of the result is its only write, and the response is
 * read where it lies.
 */
static int bound_output(const uint8_t* table, const char* name, dt_bound* bound) {
  uint64_t length = 0;
  memcpy(&length, table, 8);
  dt_reader r = {table + 8, table + length, 0};
  uint32_t count = rd_u32(&r);
  for (uint32_t i = 0; i < count && !r.bad; ++i) {
    const char* output = rd_str(&r);
    uint64_t at = rd_u64(&r);
    uint64_t bytes = rd_u64(&r);
    int memory_type = (int)rd_u32(&r);
    int64_t memory_id = (int64_t)rd_u64(&r);
    int64_t fd = (int64_t)rd_u64(&r);
    uint64_t minimum_size = rd_u64(&r);
    const char* refusal = rd_str(&r);
    if (!r.bad && strcmp(output, name) == 0) {
      *bound = (dt_bound){(void*)(uintptr_t)at, bytes,   memory_type, memory_id,
                          fd,                    minimum_size, refusal};
      return 1;
    }
  }
  return 0;
}

enum { DT_REQ_STRING = 0, DT_REQ_INT = 1, DT_REQ_BOOL = 2, DT_REQ_DOUBLE = 3 };

static TRITONSERVER_Error* build_request(TRITONSERVER_InferenceRequest* request, dt_reader* r) {
  TRITONSERVER_Error* err = NULL;
  const char* id = rd_str(r);
  uint64_t priority = rd_u64(r);
  uint64_t timeout_us = rd_u64(r);
  /* The sequence: START/END flags and the correlation ID (none, a uint64 or a string). */
  uint32_t flags = rd_u32(r);
  uint32_t corrid_kind = rd_u32(r);
  uint64_t corrid = 0;
  const char* corrid_string = "";
  if (corrid_kind == DT_CORRID_UINT) corrid = rd_u64(r);
  else if (corrid_kind == DT_CORRID_STRING) corrid_string = rd_str(r);
  else if (corrid_kind != DT_CORRID_NONE) r->bad = 1;
  uint32_t inputs = rd_u32(r), outputs = rd_u32(r), params = rd_u32(r);
  if (r->bad) return NULL;
  if (*id) {
    err = TRITONSERVER_InferenceRequestSetId(request, id);
    if (err) return err;
  }
  if (flags) {
    err = TRITONSERVER_InferenceRequestSetFlags(request, flags);
    if (err) return err;
  }
  if (corrid_kind == DT_CORRID_UINT) {
    err = TRITONSERVER_InferenceRequestSetCorrelationId(request, corrid);
    if (err) return err;
  } else if (corrid_kind == DT_CORRID_STRING) {
    err = TRITONSERVER_InferenceRequestSetCorrelationIdString(request, corrid_string);
    if (err) return err;
  }
  for (uint32_t i = 0; i < inputs && !r->bad; ++i) {
    const char* name = rd_str(r);
    int32_t datatype = (int32_t)rd_u32(r);
    uint32_t dims = rd_u32(r);
    int64_t shape[64];
    if (dims > 64) {
      r->bad = 1;
      break;
    }
    for (uint32_t d = 0; d < dims; ++d) shape[d] = (int64_t)rd_u64(r);
    const void* data = (const void*)(uintptr_t)rd_u64(r);
    uint64_t size = rd_u64(r);
    /* DT_MEM_CPU, or DT_MEM_GPU with the device for an input in a client's CUDA region: the core
       hands the backend that device memory as it is. */
    int memory_type = (int)rd_u32(r);
    int64_t memory_id = (int64_t)rd_u64(r);
    if (r->bad) break;
    err = TRITONSERVER_InferenceRequestAddInput(request, name, datatype, shape, dims);
    if (!err) {
      err = TRITONSERVER_InferenceRequestAppendInputData(request, name, size ? data : NULL,
                                                          (size_t)size, memory_type, memory_id);
    }
    if (err) return err;
  }
  for (uint32_t i = 0; i < outputs && !r->bad; ++i) {
    const char* name = rd_str(r);
    if (r->bad) break;
    err = TRITONSERVER_InferenceRequestAddRequestedOutput(request, name);
    if (err) return err;
  }
  for (uint32_t i = 0; i < params && !r->bad; ++i) {
    const char* key = rd_str(r);
    uint32_t type = rd_u32(r);
    if (type == DT_REQ_STRING) {
      const char* value = rd_str(r);
      if (!r->bad) err = TRITONSERVER_InferenceRequestSetStringParameter(request, key, value);
    } else if (type == DT_REQ_INT) {
      int64_t value = (int64_t)rd_u64(r);
      if (!r->bad) err = TRITONSERVER_InferenceRequestSetIntParameter(request, key, value);
    } else if (type == DT_REQ_BOOL) {
      uint32_t value = rd_u32(r);
      if (!r->bad) err = TRITONSERVER_InferenceRequestSetBoolParameter(request, key, value != 0);
    } else if (type == DT_REQ_DOUBLE) {
      uint64_t bits = rd_u64(r);
      double value;
      memcpy(&value, &bits, sizeof value);
      if (!r->bad) err = TRITONSERVER_InferenceRequestSetDoubleParameter(request, key, value);
    } else {
      r->bad = 1;
    }
    if (err) return err;
  }
  if (!r->bad && priority > 0) {
    err = TRITONSERVER_InferenceRequestSetPriorityUInt64(request, priority);
    if (err) return err;
  }
  if (!r->bad && timeout_us > 0) {
    err = TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(request, timeout_us);
    if (err) return err;
  }
  return NULL;
}

/**
 * Builds a request from the packed description `packed` (`length` bytes; the layout is written
 * by src/engine/native/request.ts: model name, version, id, priority, timeout, the sequence flags
 * (u32) and correlation ID (u32 kind: 0 none, 1 a u64 follows, 2 a string follows), then the inputs
 * with their data addresses, the requested outputs, the typed parameters and the address of the
 * table of bound output buffers, which must outlive the last response), routes its events to the
 * queue under `tag` and submits it. The description ends with a u32 trace level (0: not traced;
 * else the core's level bits): a traced request gets a trace whose activities, tensors and end
 * arrive as events under `tag`, and `out[2]` holds the trace's id. On success `out[0]` holds the
 * request (the caller deletes it after its release event) and `out[1]` how many events the queue
 * holds now (a cache hit completes inside ServerInferAsync, on the caller's thread, so the caller
 * drains only when that is not 0); on failure nothing is left to clean up and the error comes
 * back (the caller deletes it). Input data is not copied: it must stay valid until the release
 * event.
 */
DT_EXPORT TRITONSERVER_Error* dt_infer(TRITONSERVER_Server* server, const uint8_t* packed,
                                       uint64_t length, uint64_t tag, uint64_t* out) {
  out[0] = 0;
  out[1] = 0;
  out[2] = 0;
  dt_reader r = {packed, packed + length, 0};
  const char* model = rd_str(&r);
  int64_t version = (int64_t)rd_u64(&r);
  if (r.bad) return dt_error(DT_CODE_INTERNAL, "Cannot build a request: its description is malformed");
  TRITONSERVER_InferenceRequest* request = NULL;
  TRITONSERVER_Error* err = TRITONSERVER_InferenceRequestNew(&request, server, model, version);
  if (err) return err;
  err = build_request(request, &r);
  /* Last: the address of the table of bound output buffers (0: none; see bound_output). */
  const uint8_t* bound_outputs = err ? NULL : (const uint8_t*)(uintptr_t)rd_u64(&r);
  uint32_t trace_level = err ? 0 : rd_u32(&r);
  if (!err && r.bad) {
    err = dt_error(DT_CODE_INTERNAL, "Cannot build a request: its description is malformed");
  }
  if (!err) err = dt_request_bind(request, tag, bound_outputs);
  TRITONSERVER_InferenceTrace* trace = NULL;
  if (!err && trace_level != 0) {
    /* A trace that cannot be made leaves the request untraced rather than failing it. */
    TRITONSERVER_Error* failed = TRITONSERVER_InferenceTraceTensorNew(
        &trace, (int32_t)trace_level, 0, on_trace_activity, on_trace_tensor, on_trace_release,
        (void*)(uintptr_t)tag);
    if (failed) {
      TRITONSERVER_ErrorDelete(failed);
      trace = NULL;
    } else {
      failed = TRITONSERVER_InferenceTraceId(trace, &out[2]);
      if (failed) TRITONSERVER_ErrorDelete(failed);
    }
  }
  /* The core takes the trace whatever happens: on a failure it is released with the request. */
  if (!err) err = TRITONSERVER_ServerInferAsync(server, request, trace);
  if (err) {
    TRITONSERVER_Error* ignored = TRITONSERVER_InferenceRequestDelete(request);
    if (ignored) TRITONSERVER_ErrorDelete(ignored);
    return err;
  }
  out[0] = (uint64_t)(uintptr_t)request;
  pthread_mutex_lock(&q_mu);
  dt_queue* q = find_queue_locked(tag >> DT_QUEUE_SHIFT);
  out[1] = q ? q->len : 0;
  pthread_mutex_unlock(&q_mu);
  return NULL;
}

/**
 * Describes a response into `out` (`cap` bytes) and returns the size the description needs; when
 * that is more than `cap`, nothing usable was written and the caller calls again with a bigger
 * buffer. Layout (little-endian, see dt_abi.h for strings and parameters): i32 error code (-1:
 * none), error message, model, i64 version, id, u32 parameter count and the parameters (name,
 * value), u32 output count and the outputs (name, u32 datatype, u32 in GPU memory, i64 memory type
 * id, u32 dims, i64 shape[dims], u64 address, u64 byte size). Output addresses stay valid until
 * `TRITONSERVER_InferenceResponseDelete`.
 */
DT_EXPORT uint64_t dt_response_read(TRITONSERVER_InferenceResponse* response, uint8_t* out,
                                    uint64_t cap) {
  dt_out o = {out, 0, (size_t)cap};
  TRITONSERVER_Error* failure = TRITONSERVER_InferenceResponseError(response);
  out_u32(&o, failure ? (uint32_t)TRITONSERVER_ErrorCode(failure) : UINT32_MAX);
  out_str(&o, failure ? TRITONSERVER_ErrorMessage(failure) : "");
  const char* model = "";
  int64_t version = -1;
  TRITONSERVER_Error* err = TRITONSERVER_InferenceResponseModel(response, &model, &version);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    model = "";
  }
  out_str(&o, model);
  out_u64(&o, (uint64_t)version);
  const char* id = "";
  err = TRITONSERVER_InferenceResponseId(response, &id);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    id = "";
  }
  out_str(&o, id);
  uint32_t n = 0;
  err = TRITONSERVER_InferenceResponseParameterCount(response, &n);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    n = 0;
  }
  /* Entries that fail are skipped, so the counts go by what was written. */
  size_t count_at = o.len;
  uint32_t written = 0;
  out_u32(&o, 0);
  for (uint32_t i = 0; i < n; ++i) {
    const char* name = NULL;
    int type = 0;
    const void* value = NULL;
    err = TRITONSERVER_InferenceResponseParameter(response, i, &name, &type, &value);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    out_str(&o, name);
    out_param(&o, type, value);
    ++written;
  }
  out_patch_u32(&o, count_at, written);
  n = 0;
  if (!failure) {
    err = TRITONSERVER_InferenceResponseOutputCount(response, &n);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      n = 0;
    }
  }
  count_at = o.len;
  written = 0;
  out_u32(&o, 0);
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
    out_str(&o, name);
    out_u32(&o, (uint32_t)datatype);
    out_u32(&o, mem == DT_MEM_GPU ? 1 : 0);
    out_u64(&o, (uint64_t)mem_id);
    out_u32(&o, (uint32_t)dims);
    for (uint64_t d = 0; d < dims; ++d) out_u64(&o, (uint64_t)shape[d]);
    out_u64(&o, (uint64_t)(uintptr_t)base);
    out_u64(&o, (uint64_t)size);
    ++written;
  }
  out_patch_u32(&o, count_at, written);
  return o.len;
}

/** The bridge's own version, checked by the TypeScript side. */
DT_EXPORT uint32_t dt_bridge_version(void) { return 9; }

