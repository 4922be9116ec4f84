/*
 * The JSON text builder of the bridge (see dt_abi.h): a growable NUL-terminated string that the
 * backend side describes batches with and the client side describes responses with, and the one
 * lookup the backend makes in the core's model-config JSON. Pure functions of their arguments:
 * they run on whichever thread calls them.
 */

#include "dt_abi.h"

static void sb_reserve(sbuf* sb, size_t extra) {
  if (sb->len + extra + 1 <= sb->cap) return;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char* data = realloc(sb->data, cap);
  if (!data) abort();
  sb->data = data;
  sb->cap = cap;
}

void sb_put(sbuf* sb, const char* s, size_t n) {
  sb_reserve(sb, n);
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = 0;
}

void sb_str(sbuf* sb, const char* s) { sb_put(sb, s, strlen(s)); }

void sb_fmt(sbuf* sb, const char* fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_put(sb, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string literal; bytes >= 0x80 pass through (the core hands us UTF-8). */
void sb_json(sbuf* sb, const char* s) {
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
void sb_param(sbuf* sb, int type, const void* value) {
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
