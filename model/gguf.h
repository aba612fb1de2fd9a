/* GGUF v3 reader: memory-mapped, every offset, count and size checked before use. */
#ifndef KV_GGUF_H
#define KV_GGUF_H
#include <stddef.h>
#include <stdint.h>

enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL,
    GGUF_STRING, GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64
};

typedef struct { const char *ptr; uint64_t len; } gguf_str;   /* not NUL-terminated */

typedef struct {
    gguf_str key;
    int type;                 /* enum gguf_vtype */
    int arr_type;             /* element type when type == GGUF_ARRAY */
    uint64_t arr_n;
    const uint8_t *data;      /* the value's bytes in the mapping (array: first element;
                                 string: its u64 length prefix) */
    const uint64_t *str_off;  /* string arrays: file offset of each element's length
                                 prefix (validated at open); else NULL */
} gguf_kv;

typedef struct {
    char name[64];
    int n_dims;
    int64_t ne[4];            /* ne[0] fastest; unused dims are 1 */
    int type;                 /* ggml type id (quant.h) */
    uint64_t offset;          /* relative to the data section */
    size_t nbytes;
    const void *data;         /* points into the mapping */
} gguf_tensor;

typedef struct {
    char path[512];
    const uint8_t *base;
    size_t size;
    uint32_t version;
    int64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    size_t alignment, data_start;
    const gguf_kv **kv_sorted;            /* by key, for gguf_find */
    const gguf_tensor **tensors_sorted;   /* by name, for gguf_tensor_find */
    /* A gguf_file built in memory (hf_load.c) rather than mapped: base was malloc'd, and
     * aux (freed by aux_free) owns what the tensors point into. */
    int heap_base;
    void *aux;
    void (*aux_free)(void *aux);
} gguf_file;

/* Open and validate; returns 0, or -1 with "PATH: what is wrong (field)" in err.
 * Accepts versions 2 and 3, little-endian only. On failure f is left zeroed. */
int gguf_open(gguf_file *f, const char *path, char *err, size_t errlen);
void gguf_close(gguf_file *f);           /* safe on a zeroed or failed gguf_file */
/* The same checks on a GGUF image in memory (a malloc'd buf that f then owns, freed on
 * failure too); name stands for the path in messages. */
int gguf_open_mem(gguf_file *f, const char *name, void *buf, size_t size, char *err, size_t errlen);
/* Hand f a tensor list built elsewhere (malloc'd, f owns it; data already set): sorted
 * for gguf_tensor_find; -1 with "NAME: duplicate tensor name" on a repeat. */
int gguf_set_tensors(gguf_file *f, gguf_tensor *t, int64_t n, char *err, size_t errlen);

const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_tensor_find(const gguf_file *f, const char *name);
/* Typed getters: 0 on success, -1 if missing or of an incompatible type.
 * gguf_get_int accepts any integer type (and range-checks into int64). */
int gguf_get_int(const gguf_file *f, const char *key, int64_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
int gguf_get_bool(const gguf_file *f, const char *key, int *out);   /* BOOL only */
/* gguf_get_f32 accepts F32 and F64. */
/* i-th string of a string array (offsets precomputed and validated at open: O(1)).
 * All array getters return -1 if kv is not an array of a compatible type of f, or
 * i >= arr_n. */
int gguf_arr_str(const gguf_file *f, const gguf_kv *kv, uint64_t i, gguf_str *out);
int gguf_arr_int(const gguf_file *f, const gguf_kv *kv, uint64_t i, int64_t *out);  /* any int */
int gguf_arr_f32(const gguf_file *f, const gguf_kv *kv, uint64_t i, float *out);    /* F32/F64 */
/* Size in bytes of one value of a fixed-size type (0 for STRING, ARRAY, unknown). */
size_t gguf_vtype_size(int type);
const char *gguf_vtype_name(int type);

#endif
