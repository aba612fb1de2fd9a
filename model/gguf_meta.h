/* Writing GGUF metadata into memory: the key/value part of a GGUF image (no tensors),
 * which gguf_open_mem then reads like a file. hf_load.c states a Hugging Face checkpoint
 * in the keys llama.cpp's converter would write, so the loaders after it stay the same. */
#ifndef KV_GGUF_META_H
#define KV_GGUF_META_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *buf;
    size_t len, cap;
    uint64_t n_kv;
    int oom;                   /* an allocation failed: gm_finish returns NULL */
    uint64_t arr_at;           /* gm_arr_begin: where the open array's count goes */
} gguf_meta;

void gm_init(gguf_meta *g);    /* room for the 24-byte header */
void gm_str(gguf_meta *g, const char *key, const char *s, size_t n);
void gm_u32(gguf_meta *g, const char *key, uint32_t v);
void gm_u64(gguf_meta *g, const char *key, uint64_t v);
void gm_f32(gguf_meta *g, const char *key, float v);
void gm_bool(gguf_meta *g, const char *key, int v);
/* A string array: begin, then one gm_arr_str per element. */
void gm_arr_begin(gguf_meta *g, const char *key);
void gm_arr_str(gguf_meta *g, const char *s, size_t n);
void gm_arr_end(gguf_meta *g, uint64_t count);
void gm_arr_i32(gguf_meta *g, const char *key, const int32_t *v, uint64_t n);
void gm_arr_f32(gguf_meta *g, const char *key, const float *v, uint64_t n);
/* The finished image (malloc'd; the caller owns it), or NULL if out of memory. */
uint8_t *gm_finish(gguf_meta *g, size_t *size);
void gm_free(gguf_meta *g);

#endif
