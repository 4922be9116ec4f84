/*
 * The one lookup the backend makes in the core's model-config JSON (see dt_abi.h). A pure
 * function of its arguments: it runs on whichever thread calls it.
 */

#include "dt_abi.h"

/* Finds `"key"` in JSON text and returns the text right after the following ':' (or NULL). */
const char* json_after_key(const char* json, size_t len, const char* key) {
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
