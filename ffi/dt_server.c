/*
 * The calls that touch the Triton core's process-wide state (see dt_abi.h and ffi/README.md,
 * "Several engines in one process"). Several engines live in one process: two `Triton` objects,
 * a notebook's servers, or the files of `deno test --parallel`, each in an isolate of its own on
 * a thread of its own. JS module state is per isolate; this library is loaded once per process,
 * so what must be serialized across all of them is serialized here.
 *
 * - Creating and deleting servers, and loading models, hold one lock. Triton 2.51 keeps
 *   process-wide singletons that `TRITONSERVER_ServerNew` and `TRITONSERVER_ServerDelete` set
 *   and reset without a lock of their own: `PinnedMemoryManager::Create` assigns its instance,
 *   allocates the pinned pool (cudaHostAlloc, long on a GPU host) and then adds the pool to the
 *   instance, while any server's destructor runs `PinnedMemoryManager::Reset()`; a delete in
 *   that window leaves the create writing through a null instance (a SIGSEGV in
 *   `PinnedMemoryManager::AddPinnedMemoryBuffer`). `CudaBlockManager` has the same pattern, and
 *   `ServerNew` assigns the metrics configuration map that each model load copies.
 * - The core's log file is process-wide. Each engine's forwarder registers its file here; the
 *   core writes to the newest one, and while a server is created or a model is loaded, to the
 *   file of the engine doing it, so a load's reasons for failing reach that engine.
 */

#include "dt_abi.h"

/* Held across ServerNew, ServerDelete and model loads; never taken while g_log_mu is held. */
static pthread_mutex_t g_core_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- The core's log file -------------------------------------------------------------------- */

typedef struct dt_log_target {
  uint64_t id;
  char* path;
  struct dt_log_target* next;
} dt_log_target;

/* Guards the targets, newest first, and what the core writes to; held only briefly. */
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static dt_log_target* g_logs = NULL;
static uint64_t g_next_log = 1;
/* The target a server creation or model load has borrowed the core's log for (0: none). */
static uint64_t g_borrowed = 0;
/* The file the core writes to now ("" for stderr, NULL before the first change). */
static char* g_log_now = NULL;

static dt_log_target* find_log_locked(uint64_t id) {
  for (dt_log_target* t = g_logs; t; t = t->next)
    if (t->id == id) return t;
  return NULL;
}

/* Points the core's log at `path` ("" for stderr), unless it writes there already. */
static TRITONSERVER_Error* point_core_locked(const char* path) {
  if (g_log_now && strcmp(g_log_now, path) == 0) return NULL;
  TRITONSERVER_ServerOptions* options = NULL;
  TRITONSERVER_Error* err = TRITONSERVER_ServerOptionsNew(&options);
  if (err) return err;
  /* The setter changes the process's logger at once; the options object only carries it. */
  err = TRITONSERVER_ServerOptionsSetLogFile(options, path);
  TRITONSERVER_Error* ignored = TRITONSERVER_ServerOptionsDelete(options);
  if (ignored) TRITONSERVER_ErrorDelete(ignored);
  if (err) return err;
  char* now = strdup(path);
  if (!now) abort();
  free(g_log_now);
  g_log_now = now;
  return NULL;
}

/* Points the core at the file it should write to now: the borrower's, else the newest. */
static void repoint_locked(void) {
  dt_log_target* t = g_borrowed ? find_log_locked(g_borrowed) : NULL;
  if (!t) t = g_logs;
  TRITONSERVER_Error* err = point_core_locked(t ? t->path : "");
  /* The core keeps writing where it did: nothing better is left to do. */
  if (err) TRITONSERVER_ErrorDelete(err);
}

/**
 * Registers `path` as the newest target of the core's log and points the core at it (unless a
 * server creation or model load has borrowed the log; it points there once that is done). On
 * success `*id` names the target. Returns NULL or the core's error (the caller deletes it).
 */
DT_EXPORT TRITONSERVER_Error* dt_log_open(const char* path, uint64_t* id) {
  *id = 0;
  dt_log_target* t = calloc(1, sizeof *t);
  char* copy = strdup(path);
  if (!t || !copy) abort();
  pthread_mutex_lock(&g_log_mu);
  TRITONSERVER_Error* err = g_borrowed ? NULL : point_core_locked(path);
  if (err) {
    pthread_mutex_unlock(&g_log_mu);
    free(copy);
    free(t);
    return err;
  }
  t->id = g_next_log++;
  t->path = copy;
  t->next = g_logs;
  g_logs = t;
  *id = t->id;
  pthread_mutex_unlock(&g_log_mu);
  return NULL;
}

/**
 * Replaces the file of target `id` (a forwarder's fresh file); the core follows when it writes
 * to that target now. Returns NULL, or the core's error with the target unchanged.
 */
DT_EXPORT TRITONSERVER_Error* dt_log_move(uint64_t id, const char* path) {
  char* copy = strdup(path);
  if (!copy) abort();
  pthread_mutex_lock(&g_log_mu);
  dt_log_target* t = find_log_locked(id);
  if (!t) {
    pthread_mutex_unlock(&g_log_mu);
    free(copy);
    return dt_error(DT_CODE_NOT_FOUND, "Unknown log target %" PRIu64, id);
  }
  int current = g_borrowed ? g_borrowed == id : t == g_logs;
  TRITONSERVER_Error* err = current ? point_core_locked(path) : NULL;
  if (err) {
    pthread_mutex_unlock(&g_log_mu);
    free(copy);
    return err;
  }
  free(t->path);
  t->path = copy;
  pthread_mutex_unlock(&g_log_mu);
  return NULL;
}

/** Removes target `id`; the core goes back to the newest target left, or to stderr. */
DT_EXPORT void dt_log_close(uint64_t id) {
  pthread_mutex_lock(&g_log_mu);
  dt_log_target** link = &g_logs;
  while (*link && (*link)->id != id) link = &(*link)->next;
  dt_log_target* t = *link;
  if (t) {
    *link = t->next;
    free(t->path);
    free(t);
    if (g_borrowed == id) g_borrowed = 0;
    repoint_locked();
  }
  pthread_mutex_unlock(&g_log_mu);
}

static void borrow_log(uint64_t id) {
  if (id == 0) return;
  pthread_mutex_lock(&g_log_mu);
  g_borrowed = id;
  repoint_locked();
  pthread_mutex_unlock(&g_log_mu);
}

static void return_log(uint64_t id) {
  if (id == 0) return;
  pthread_mutex_lock(&g_log_mu);
  if (g_borrowed == id) g_borrowed = 0;
  repoint_locked();
  pthread_mutex_unlock(&g_log_mu);
}

/* ---- Servers and model loads ---------------------------------------------------------------- */

/**
 * `TRITONSERVER_ServerNew`, serialized with every other server creation, deletion and model load
 * of the process, with the core's log pointed at target `log` meanwhile (0: left as it is). JS
 * calls it as a nonblocking FFI call: the wait for the lock is not its event loop's.
 */
DT_EXPORT TRITONSERVER_Error* dt_server_new(TRITONSERVER_Server** server,
                                            TRITONSERVER_ServerOptions* options, uint64_t log) {
  pthread_mutex_lock(&g_core_mu);
  borrow_log(log);
  TRITONSERVER_Error* err = TRITONSERVER_ServerNew(server, options);
  return_log(log);
  pthread_mutex_unlock(&g_core_mu);
  return err;
}

/** `TRITONSERVER_ServerDelete`, serialized like `dt_server_new` (a nonblocking FFI call). */
DT_EXPORT TRITONSERVER_Error* dt_server_delete(TRITONSERVER_Server* server) {
  pthread_mutex_lock(&g_core_mu);
  TRITONSERVER_Error* err = TRITONSERVER_ServerDelete(server);
  pthread_mutex_unlock(&g_core_mu);
  return err;
}

/**
 * `TRITONSERVER_ServerLoadModelWithParameters`, serialized like `dt_server_new` (the load
 * copies the metrics configuration a concurrent ServerNew assigns), with the core's log pointed
 * at target `log` meanwhile, so the load's own lines reach the engine loading it. A nonblocking
 * FFI call.
 */
DT_EXPORT TRITONSERVER_Error* dt_server_load(TRITONSERVER_Server* server, const char* name,
                                             const TRITONSERVER_Parameter** parameters,
                                             uint64_t count, uint64_t log) {
  pthread_mutex_lock(&g_core_mu);
  borrow_log(log);
  TRITONSERVER_Error* err =
      TRITONSERVER_ServerLoadModelWithParameters(server, name, parameters, count);
  return_log(log);
  pthread_mutex_unlock(&g_core_mu);
  return err;
}
