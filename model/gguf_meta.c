/* GGUF metadata in memory (see gguf_meta.h): v3, little-endian, no tensors. */
#include "gguf_meta.h"
#include "gguf.h"
#include <stdlib.h>
#include <string.h>

static void put(gguf_meta *g, const void *p, size_t n) {
    if (g->oom) return;
    if (g->len + n > g->cap) {
        size_t cap = g->cap ? g->cap : 4096;
        while (cap < g->len + n) cap *= 2;
        uint8_t *b = realloc(g->buf, cap);
        if (!b) { g->oom = 1; return; }
        g->buf = b;
        g->cap = cap;
    }
    memcpy(g->buf + g->len, p, n);
    g->len += n;
}

static void put_u32(gguf_meta *g, uint32_t v) { put(g, &v, 4); }
static void put_u64(gguf_meta *g, uint64_t v) { put(g, &v, 8); }
static void put_s(gguf_meta *g, const char *s, size_t n) { put_u64(g, n); put(g, s, n); }

static void key(gguf_meta *g, const char *k, uint32_t type) {
    put_s(g, k, strlen(k));
    put_u32(g, type);
    g->n_kv++;
}

void gm_init(gguf_meta *g) {
    memset(g, 0, sizeof *g);
    uint8_t header[24] = {0};
    put(g, header, sizeof header);
}

void gm_str(gguf_meta *g, const char *k, const char *s, size_t n) { key(g, k, GGUF_STRING); put_s(g, s, n); }
void gm_u32(gguf_meta *g, const char *k, uint32_t v) { key(g, k, GGUF_U32); put_u32(g, v); }
void gm_u64(gguf_meta *g, const char *k, uint64_t v) { key(g, k, GGUF_U64); put_u64(g, v); }
void gm_f32(gguf_meta *g, const char *k, float v) { key(g, k, GGUF_F32); put(g, &v, 4); }
void gm_bool(gguf_meta *g, const char *k, int v) { key(g, k, GGUF_BOOL); uint8_t b = v != 0; put(g, &b, 1); }

void gm_arr_begin(gguf_meta *g, const char *k) {
    key(g, k, GGUF_ARRAY);
    put_u32(g, GGUF_STRING);
    g->arr_at = g->len;
    put_u64(g, 0);
}
void gm_arr_str(gguf_meta *g, const char *s, size_t n) { put_s(g, s, n); }
void gm_arr_end(gguf_meta *g, uint64_t count) {
    if (!g->oom) memcpy(g->buf + g->arr_at, &count, 8);
}

static void arr_fixed(gguf_meta *g, const char *k, uint32_t type, const void *v, uint64_t n) {
    key(g, k, GGUF_ARRAY);
    put_u32(g, type);
    put_u64(g, n);
    put(g, v, (size_t)n * 4);
}
void gm_arr_i32(gguf_meta *g, const char *k, const int32_t *v, uint64_t n) { arr_fixed(g, k, GGUF_I32, v, n); }
void gm_arr_f32(gguf_meta *g, const char *k, const float *v, uint64_t n) { arr_fixed(g, k, GGUF_F32, v, n); }

uint8_t *gm_finish(gguf_meta *g, size_t *size) {
    if (g->oom) { gm_free(g); return NULL; }
    uint32_t magic = 0x46554747u, version = 3;
    uint64_t nt = 0;
    memcpy(g->buf, &magic, 4);
    memcpy(g->buf + 4, &version, 4);
    memcpy(g->buf + 8, &nt, 8);
    memcpy(g->buf + 16, &g->n_kv, 8);
    uint8_t *b = g->buf;
    *size = g->len;
    g->buf = NULL;
    return b;
}

void gm_free(gguf_meta *g) {
    free(g->buf);
    memset(g, 0, sizeof *g);
}
