/*
 * The client side of DenoTriton's bridge (see dt_abi.h and ffi/README.md): the response
 * allocator and the response-complete and request-release callbacks, which run on any Triton
 * thread (or inside ServerInferAsync on a cache hit) and only push events onto an engine's
 * queue; the queues JS drains with `dt_wait_events` (nonblocking); and response descriptions.
 * No JS ever runs on a Triton thread.
 */

#include "dt_abi.h"

/* ---- Event queues ------------------------------------------------------------------------ */

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

