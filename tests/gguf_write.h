/* A tiny GGUF writer for tests: build valid files byte by byte in memory, remember
 * where each field went, patch fields to make hostile variants, save to a temp file.
 * Every append returns the offset it wrote at. */
#ifndef KV_GGUF_WRITE_H
#define KV_GGUF_WRITE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint8_t *p; size_t n, cap; } gw_buf;

static inline size_t gw_bytes(gw_buf *b, const void *src, size_t len) {
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) { fprintf(stderr, "gguf_write: out of memory\n"); exit(2); }
        b->p = p;
        b->cap = cap;
    }
    size_t at = b->n;
    if (len) memcpy(b->p + at, src, len);
    b->n += len;
    return at;
}
static inline size_t gw_u8(gw_buf *b, uint8_t v) { return gw_bytes(b, &v, 1); }
static inline size_t gw_u32(gw_buf *b, uint32_t v) { return gw_bytes(b, &v, 4); }
static inline size_t gw_u64(gw_buf *b, uint64_t v) { return gw_bytes(b, &v, 8); }
static inline size_t gw_f32(gw_buf *b, float v) { return gw_bytes(b, &v, 4); }
/* string: u64 length then the bytes (no NUL) */
static inline size_t gw_strn(gw_buf *b, const char *s, size_t len) {
    size_t at = gw_u64(b, len);
    gw_bytes(b, s, len);
    return at;
}
static inline size_t gw_str(gw_buf *b, const char *s) { return gw_strn(b, s, strlen(s)); }

/* Header: magic, version, tensor_count, kv_count. Fields at 0, 4, 8, 16. */
static inline size_t gw_header(gw_buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    size_t at = gw_bytes(b, "GGUF", 4);
    gw_u32(b, version);
    gw_u64(b, n_tensors);
    gw_u64(b, n_kv);
    return at;
}

/* kv records; each returns the offset of the record (its key length). The value type
 * field is at record + 8 + strlen(key), the value right after it. */
static inline size_t gw_kv_u32(gw_buf *b, const char *key, uint32_t v) {
    size_t at = gw_str(b, key);
    gw_u32(b, 4);
    gw_u32(b, v);
    return at;
}
static inline size_t gw_kv_f32(gw_buf *b, const char *key, float v) {
    size_t at = gw_str(b, key);
    gw_u32(b, 6);
    gw_f32(b, v);
    return at;
}
static inline size_t gw_kv_str(gw_buf *b, const char *key, const char *v) {
    size_t at = gw_str(b, key);
    gw_u32(b, 8);
    gw_str(b, v);
    return at;
}
/* Array header (elements follow with gw_u32/gw_str/...): element type at
 * record + 12 + strlen(key), count at record + 16 + strlen(key). */
static inline size_t gw_kv_arr(gw_buf *b, const char *key, uint32_t elem_type, uint64_t n) {
    size_t at = gw_str(b, key);
    gw_u32(b, 9);
    gw_u32(b, elem_type);
    gw_u64(b, n);
    return at;
}

/* Tensor info; returns the record offset. n_dims is at record + 8 + strlen(name), ne
 * right after, then type (u32) and offset (u64). */
static inline size_t gw_tensor(gw_buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                               uint32_t type, uint64_t offset) {
    size_t at = gw_str(b, name);
    gw_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) gw_u64(b, ne[d]);
    gw_u32(b, type);
    gw_u64(b, offset);
    return at;
}

/* Zero bytes up to the next multiple of a (absolute offset). */
static inline size_t gw_align(gw_buf *b, size_t a) {
    size_t at = b->n;
    while (b->n % a) gw_u8(b, 0);
    return at;
}

static inline void gw_patch_u32(gw_buf *b, size_t at, uint32_t v) { memcpy(b->p + at, &v, 4); }
static inline void gw_patch_u64(gw_buf *b, size_t at, uint64_t v) { memcpy(b->p + at, &v, 8); }

/* Write the first len bytes of b to path; 0 or -1. */
static inline int gw_save_prefix(const gw_buf *b, size_t len, const char *path) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    size_t w = len ? fwrite(b->p, 1, len, fp) : 0;
    return (fclose(fp) == 0 && w == len) ? 0 : -1;
}
static inline int gw_save(const gw_buf *b, const char *path) { return gw_save_prefix(b, b->n, path); }

static inline gw_buf gw_copy(const gw_buf *b) {
    gw_buf c = {0};
    gw_bytes(&c, b->p, b->n);
    return c;
}
static inline void gw_free(gw_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
#endif
