/* A model file's identity: FNV-1a 64 over its bytes. In the bottom layer so the engine
 * (model/), the methods' trained state (SeKV's params files) and the drivers all read
 * the same number without any of them reaching sideways or up for it. */
#ifndef KV_MODEL_HASH_H
#define KV_MODEL_HASH_H
#include <stddef.h>
#include <stdint.h>

/* kv_setup.model_hash: the identity trained state is tied to; 0 is kept for "unknown". */
uint64_t kv_model_hash(const void *bytes, size_t n);

#endif
