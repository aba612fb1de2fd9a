#include "model_hash.h"

uint64_t kv_model_hash(const void *bytes, size_t n) {
    const unsigned char *b = bytes;
    uint64_t h = 0xcbf29ce484222325ULL;   /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
