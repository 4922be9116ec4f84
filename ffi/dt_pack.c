/*
 * The packed-description writer of the bridge (see dt_abi.h): the backend side describes batches
 * and the client side describes responses with it, straight into a buffer JS provides and reads
 * with a DataView (src/engine/native/packer.ts), so no JSON is built or parsed per request. Pure
 * functions of their arguments: they run on whichever thread calls them.
 */

#include "dt_abi.h"

void out_put(dt_out* o, const void* p, size_t n) {
  if (o->len + n <= o->cap && n > 0) memcpy(o->data + o->len, p, n);
  o->len += n;
}

void out_u32(dt_out* o, uint32_t v) { out_put(o, &v, sizeof v); }

void out_u64(dt_out* o, uint64_t v) { out_put(o, &v, sizeof v); }

void out_str(dt_out* o, const char* s) {
  size_t n = s ? strlen(s) : 0;
  out_u32(o, (uint32_t)n);
  out_put(o, s, n);
}

void out_param(dt_out* o, int type, const void* value) {
  switch (type) {
    case DT_PARAM_STRING:
      out_u32(o, 0);
      out_str(o, (const char*)value);
      break;
    case DT_PARAM_INT:
      out_u32(o, 1);
      out_u64(o, (uint64_t)*(const int64_t*)value);
      break;
    case DT_PARAM_BOOL:
      out_u32(o, 2);
      out_u32(o, *(const bool*)value ? 1 : 0);
      break;
    case DT_PARAM_DOUBLE: {
      uint64_t bits;
      memcpy(&bits, value, sizeof bits);
      out_u32(o, 3);
      out_u64(o, bits);
      break;
    }
    default:
      out_u32(o, 255);
  }
}

void out_patch_u32(dt_out* o, size_t at, uint32_t v) {
  if (at + sizeof v <= o->cap) memcpy(o->data + at, &v, sizeof v);
}
