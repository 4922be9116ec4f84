/*
 * DenoTriton's forwarding backend (see dt_abi.h and ffi/README.md): the Triton side of the
 * bridge. `TRITONBACKEND_ModelInstanceExecute` runs on Triton's instance thread, parks the batch
 * in a slot of the load's channel, rings JS's doorbell and blocks until JS is done with it; JS
 * takes batches with `dt_take_batch`, reads inputs in place, writes outputs with `dt_output`,
 * sends with `dt_send` and finishes with `dt_batch_done`. Model and instance initialization run
 * on Triton's model-load threads. One lock guards every channel and slot.
 */

#include "dt_abi.h"

#include <sys/prctl.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- Fault injection and sending ---------------------------------------------------------- */

/*
 * Fault injection for tests: Triton 2.51's core never refuses a send or hands over a batch the
 * bridge cannot describe, so the error paths for both are reached on purpose. Off unless a test
 * arms it with `dt_debug_fault`. The counts are per thread: a test arms them on its isolate's
 * thread, where its engine's dt_send and dt_batch_read run, so the engines of other isolates in
 * the process (the files of `deno test --parallel`) never take its faults.
 */
enum { DT_FAULT_SEND = 1, DT_FAULT_DESCRIBE = 2 };
static _Thread_local uint32_t t_fault_counts[3];

/** Arms `count` faults of kind `fault` on the calling thread (1: sends fail after the core took
 *  the response; 2: batch descriptions are malformed). Returns 0, or -1 for an unknown kind. */
DT_EXPORT int32_t dt_debug_fault(int32_t fault, uint32_t count) {
  if (fault != DT_FAULT_SEND && fault != DT_FAULT_DESCRIBE) return -1;
  t_fault_counts[fault] = count;
  return 0;
}

static int take_fault(int fault) {
  int hit = t_fault_counts[fault] > 0;
  if (hit) --t_fault_counts[fault];
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
  /* JS's doorbell (a thread-safe Deno callback): rung by an instance thread when it parks a
     batch, so JS wakes without a thread-pool wait per batch. */
  void (*notify)(uint32_t channel, uint32_t slot);
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
 * Each slot's doorbell is rung, so a consumer waiting for a batch sees the close at once; JS
 * calls this on the doorbell's own thread, where the ring runs synchronously.
 */
DT_EXPORT void dt_channel_close(uint64_t id) {
  pthread_mutex_lock(&g_mu);
  dt_channel* c = find_channel_locked(id);
  void (*notify)(uint32_t, uint32_t) = NULL;
  uint32_t slots = 0;
  if (c) {
    c->closed = 1;
    for (uint32_t i = 0; i < c->slot_count; ++i) pthread_cond_broadcast(&c->slots[i].done_cv);
    notify = c->notify;
    slots = c->slot_count;
  }
  pthread_mutex_unlock(&g_mu);
  for (uint32_t i = 0; notify && i < slots; ++i) notify((uint32_t)id, i);
}

/**
 * Sets the doorbell of a channel: `notify(channel, slot)` is called on the instance thread, with
 * no lock held, each time a batch is parked in a slot; that thread waits until it returns. It
 * must stay callable for as long as Triton may run the channel's instances.
 */
DT_EXPORT void dt_channel_notify(uint64_t id, void* notify) {
  pthread_mutex_lock(&g_mu);
  dt_channel* c = find_channel_locked(id);
  if (c) c->notify = (void (*)(uint32_t, uint32_t))notify;
  pthread_mutex_unlock(&g_mu);
}

/**
 * Takes the batch parked in slot `index`, without waiting (JS calls it once rung). Returns the
 * request count (> 0), 0 when none is parked, -1 when the slot was finalized or the channel
 * closed, -2 for an unknown channel or slot.
 */
DT_EXPORT int32_t dt_take_batch(uint64_t id, uint32_t index) {
  pthread_mutex_lock(&g_mu);
  dt_slot* s = find_slot_locked(id, index);
  int32_t result = -2;
  if (s) {
    if (s->state == SLOT_READY) {
      s->state = SLOT_TAKEN;
      s->compute_start = now_ns();
      result = (int32_t)s->count;
    } else if (s->state == SLOT_FINALIZED || s->channel->closed) {
      result = -1;
    } else {
      result = 0;
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

static void describe_request(dt_slot* s, uint32_t r, dt_out* o) {
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
  /* The request's trace id (0: not traced), by which JS finds the trace its front end started. */
  uint64_t trace_id = 0;
  TRITONSERVER_InferenceTrace* trace = NULL;
  err = TRITONBACKEND_RequestTrace(request, &trace);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
  } else if (trace) {
    err = TRITONSERVER_InferenceTraceId(trace, &trace_id);
    if (err) TRITONSERVER_ErrorDelete(err);
  }
  out_str(o, id);
  out_u32(o, cancelled ? 1 : 0);
  out_u64(o, trace_id);
  /* The sequence: its flags and correlation ID (a uint64, else a string). The sequence batcher's
     padding requests (direct strategy) have neither, and READY false among their inputs. */
  uint32_t flags = 0;
  err = TRITONBACKEND_RequestFlags(request, &flags);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    flags = 0;
  }
  out_u32(o, flags);
  uint64_t corrid = 0;
  err = TRITONBACKEND_RequestCorrelationId(request, &corrid);
  if (!err) {
    out_u32(o, DT_CORRID_UINT);
    out_u64(o, corrid);
  } else {
    TRITONSERVER_ErrorDelete(err);
    const char* corrid_string = NULL;
    err = TRITONBACKEND_RequestCorrelationIdString(request, &corrid_string);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      out_u32(o, DT_CORRID_NONE);
    } else {
      out_u32(o, DT_CORRID_STRING);
      out_str(o, corrid_string ? corrid_string : "");
    }
  }
  uint32_t n = 0;
  err = TRITONBACKEND_RequestParameterCount(request, &n);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    n = 0;
  }
  /* Entries that fail are skipped, so the counts go by what was written, not by index. */
  size_t count_at = o->len;
  uint32_t written = 0;
  out_u32(o, 0);
  for (uint32_t i = 0; i < n; ++i) {
    const char* key = NULL;
    int type = 0;
    const void* value = NULL;
    err = TRITONBACKEND_RequestParameter(request, i, &key, &type, &value);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    out_str(o, key);
    out_param(o, type, value);
    ++written;
  }
  out_patch_u32(o, count_at, written);
  uint32_t inputs = 0;
  err = TRITONBACKEND_RequestInputCount(request, &inputs);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    inputs = 0;
  }
  s->batch_sizes[r] = 1;
  count_at = o->len;
  written = 0;
  out_u32(o, 0);
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
    /* One chunk is read in place (in GPU memory too: a client's CUDA region reaches JS as that
       device memory); several host chunks are joined into scratch memory owned by the slot. */
    const void* base = NULL;
    int gpu = 0;
    int64_t device = 0;
    if (buffers == 1) {
      uint64_t size = 0;
      int mem = DT_MEM_GPU;
      int64_t mem_id = 0;
      err = TRITONBACKEND_InputBuffer(input, 0, &base, &size, &mem, &mem_id);
      if (err) {
        TRITONSERVER_ErrorDelete(err);
        base = NULL;
      }
      gpu = mem == DT_MEM_GPU;
      device = gpu ? mem_id : 0;
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
        /* Chunks in GPU memory are not joined here: JS refuses the input (gpu 2). */
        if (mem == DT_MEM_GPU) gpu = 2;
        if (offset + size > byte_size) break;
        if (!gpu) memcpy(joined + offset, chunk, size);
        offset += size;
      }
      base = joined;
    }
    out_str(o, name);
    out_u32(o, (uint32_t)datatype);
    out_u32(o, (uint32_t)gpu);
    out_u64(o, (uint64_t)device);
    out_u32(o, dims);
    for (uint32_t d = 0; d < dims; ++d) out_u64(o, (uint64_t)shape[d]);
    out_u64(o, (uint64_t)(uintptr_t)base);
    out_u64(o, byte_size);
    ++written;
  }
  out_patch_u32(o, count_at, written);
  uint32_t outputs = 0;
  err = TRITONBACKEND_RequestOutputCount(request, &outputs);
  if (err) {
    TRITONSERVER_ErrorDelete(err);
    outputs = 0;
  }
  count_at = o->len;
  written = 0;
  out_u32(o, 0);
  for (uint32_t i = 0; i < outputs; ++i) {
    const char* name = NULL;
    err = TRITONBACKEND_RequestOutputName(request, i, &name);
    if (err) {
      TRITONSERVER_ErrorDelete(err);
      continue;
    }
    out_str(o, name);
    ++written;
  }
  out_patch_u32(o, count_at, written);
}

/**
 * Describes the batch JS took from a slot into `out` (`cap` bytes) and returns the size the
 * description needs (0 when the slot has no taken batch); when that is more than `cap`, the
 * caller calls again with a bigger buffer. Layout (little-endian, see dt_abi.h for strings and
 * parameters): u32 request count, then per request: id, u32 cancelled, u64 trace id (0: none), u32 sequence flags, the
 * correlation ID (u32 kind: 0 none, 1 a u64 follows, 2 a string follows), u32 parameter count and
 * the parameters (name, value), u32 input count and the inputs (name, u32 datatype, u32 in GPU
 * memory (2: in several GPU chunks, not described), i64 device, u32 dims, i64 shape[dims], u64
 * address, u64 byte size), u32 output count and the requested output names. The input memory
 * stays valid until `dt_batch_done`.
 */
DT_EXPORT uint64_t dt_batch_read(uint64_t id, uint32_t index, uint8_t* out, uint64_t cap) {
  pthread_mutex_lock(&g_mu);
  dt_slot* s = find_slot_locked(id, index);
  int ok = s && s->state == SLOT_TAKEN;
  pthread_mutex_unlock(&g_mu);
  if (!ok) return 0;
  /* The slot is JS's until dt_batch_done; no lock needed for its batch fields. A second call
     (the first buffer was too small) joins multi-chunk inputs again, into new scratch memory. */
  dt_out o = {out, 0, (size_t)cap};
  out_u32(&o, s->count);
  for (uint32_t r = 0; r < s->count; ++r) describe_request(s, r, &o);
  /* A test fault cuts the description short, as a corrupt one would be. */
  if (take_fault(DT_FAULT_DESCRIBE)) return o.len / 2;
  return o.len;
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
 * `dt_output` flags: the client's allocator may keep `data` as the output's buffer (LEND); the
 * result is in GPU memory at `device_data` on device `device_id`, and `data` is not read
 * (DEVICE); the tensor is the request's next implicit state (`sequence_batching.state`), not an
 * output (STATE).
 */
enum { DT_OUTPUT_LEND = 1, DT_OUTPUT_DEVICE = 2, DT_OUTPUT_STATE = 4 };
/** `dt_output` failed after the allocator took `data`: it stays lent until the response goes. */
enum { DT_OUTPUT_FAILED_LENT = -98 };
/** `dt_output` left the copy to the caller: into `out[0]`, memory type `out[1]`, id `out[2]`. */
enum { DT_OUTPUT_CALLER_COPIES = 2 };

/*
 * Writes the next implicit state of a request's sequence (Triton's `sequence_batching.state`):
 * the core keeps it on the sequence's slot and hands it to the sequence's next request as the
 * state's input. The state's memory is the core's (CPU), so the bytes are copied.
 */
static int32_t write_state(dt_slot* s, uint32_t request, const char* name, int32_t datatype,
                           const int64_t* shape, uint32_t dims, const void* data,
                           uint64_t byte_size) {
  TRITONBACKEND_State* state = NULL;
  TRITONSERVER_Error* err =
      TRITONBACKEND_StateNew(&state, s->requests[request], name, datatype, shape, dims);
  if (err) return slot_fail(s, err);
  void* buffer = NULL;
  int mem = DT_MEM_CPU;
  int64_t mem_id = 0;
  err = TRITONBACKEND_StateBuffer(state, &buffer, byte_size, &mem, &mem_id);
  if (err) return slot_fail(s, err);
  if (mem == DT_MEM_GPU) {
    snprintf(s->error, sizeof s->error,
             "Cannot write state '%s': the core gave GPU memory for it", name);
    return -DT_CODE_UNSUPPORTED;
  }
  if (byte_size > 0) memcpy(buffer, data, (size_t)byte_size);
  err = TRITONBACKEND_StateUpdate(state);
  if (err) return slot_fail(s, err);
  return 0;
}

/**
 * Adds output `name` to the open response of request `request`, takes its buffer from the
 * client's allocator and copies `byte_size` bytes of `data` into it. With DT_OUTPUT_LEND in
 * `flags`, the allocator may hand out `data` itself (JS keeps it alive until the response is
 * deleted): nothing is copied then. With DT_OUTPUT_DEVICE the result is device memory
 * (`device_data` on `device_id`, asked for as GPU memory on that device), and whenever the
 * result or the buffer is in GPU memory (a client's CUDA region) nothing is copied here: the
 * buffer's address, memory type and id go into `out[0..2]` and JS copies through the CUDA driver
 * (this library links no CUDA). With DT_OUTPUT_STATE (host memory only), the tensor becomes the
 * request's next implicit state instead (see write_state). Returns 1 when `data` became the
 * buffer, 0 when it was copied, DT_OUTPUT_CALLER_COPIES, or a negative Triton error code (message in `dt_slot_error`); -100 for
 * UNKNOWN, -99 for a bad slot, DT_OUTPUT_FAILED_LENT when the core failed after taking `data`.
 */
DT_EXPORT int32_t dt_output(uint64_t id, uint32_t index, uint32_t request, const char* name,
                            int32_t datatype, const int64_t* shape, uint32_t dims,
                            const void* data, uint64_t byte_size, uint32_t flags,
                            uint64_t device_data, int32_t device_id, uint64_t* out) {
  dt_slot* s = taken_slot(id, index, request);
  if (!s) return -99;
  if (!s->compute_end) s->compute_end = now_ns();
  if (flags & DT_OUTPUT_STATE) return write_state(s, request, name, datatype, shape, dims, data,
                                                  byte_size);
  TRITONBACKEND_Response* response = NULL;
  TRITONSERVER_Error* err = open_response(s, request, &response);
  if (err) return slot_fail(s, err);
  TRITONBACKEND_Output* output = NULL;
  err = TRITONBACKEND_ResponseOutput(response, &output, name, datatype, shape, dims);
  if (err) return slot_fail(s, err);
  int device = (flags & DT_OUTPUT_DEVICE) != 0;
  int mem = device ? DT_MEM_GPU : DT_MEM_CPU;
  int64_t mem_id = device ? device_id : 0;
  void* buffer = NULL;
  if (!device && (flags & DT_OUTPUT_LEND) && byte_size > 0) {
    dt_offer = (dt_lend_offer){data, byte_size, 0};
  }
  err = TRITONBACKEND_OutputBuffer(output, &buffer, byte_size, &mem, &mem_id);
  int taken = dt_offer.taken;
  dt_offer = (dt_lend_offer){NULL, 0, 0};
  if (err) {
    int32_t code = slot_fail(s, err);
    return taken ? DT_OUTPUT_FAILED_LENT : code;
  }
  if (device || mem == DT_MEM_GPU) {
    out[0] = (uint64_t)(uintptr_t)buffer;
    out[1] = (uint64_t)mem;
    out[2] = (uint64_t)mem_id;
    return DT_OUTPUT_CALLER_COPIES;
  }
  if (taken && buffer == data) return 1;
  if (byte_size > 0) memcpy(buffer, data, (size_t)byte_size);
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

static int32_t send_one(uint64_t id, uint32_t index, uint32_t request, int32_t final,
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

/**
 * Sends the open response of a request (creating an empty one if none is open). `error_code`
 * < 0 sends success, otherwise an error with `message`. For decoupled models `final` marks the
 * last response; a final with no open response and no error sends the flags-only final. The
 * wakes of other isolates' queues it completes are left to JS (dt_events_signals).
 */
DT_EXPORT int32_t dt_send(uint64_t id, uint32_t index, uint32_t request, int32_t final,
                          int32_t error_code, const char* message) {
  dt_signalling = 1;
  int32_t status = send_one(id, index, request, final, error_code, message);
  dt_signalling = 0;
  return status;
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
 * an error with `code` and `message` (JS could not run the batch at all). As in dt_send, the
 * wakes of other isolates' queues are left to JS.
 */
DT_EXPORT int32_t dt_batch_fail(uint64_t id, uint32_t index, int32_t code, const char* message) {
  pthread_mutex_lock(&g_mu);
  dt_slot* s = find_slot_locked(id, index);
  int ok = s && s->state == SLOT_TAKEN;
  pthread_mutex_unlock(&g_mu);
  if (!ok) return -99;
  dt_signalling = 1;
  finish_batch(s, code, message ? message : "");
  dt_signalling = 0;
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



DT_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  /* The core creates this model's dynamic-batcher and instance threads from this (model-load)
     thread right after this call, and threads inherit their timer slack. Linux's default slack
     (50 µs) lets the batcher's max_queue_delay wait end up to 50 µs late on every batch it
     waits for; 1 ns keeps the delay what the config says. */
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
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
  void (*notify)(uint32_t, uint32_t) = s->channel->notify;
  if (notify) {
    /* Rung without the lock: the doorbell runs on JS's thread, which takes it. */
    pthread_mutex_unlock(&g_mu);
    notify((uint32_t)s->channel->id, s->index);
    pthread_mutex_lock(&g_mu);
  }
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
