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
    const uint8_t *data;      /* the value's bytes in the mapping (array: first element) */
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
} gguf_file;

/* Open and validate; returns 0, or -1 with "PATH: what is wrong (field)" in err. */
int gguf_open(gguf_file *f, const char *path, char *err, size_t errlen);
void gguf_close(gguf_file *f);

const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_tensor_find(const gguf_file *f, const char *name);
/* Typed getters: 0 on success, -1 if missing or of an incompatible type.
 * gguf_get_int accepts any integer type (and range-checks into int64). */
int gguf_get_int(const gguf_file *f, const char *key, int64_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* i-th string of a string array (bounds-checked walk; O(i) the first time, cached). */
int gguf_arr_str(const gguf_file *f, const gguf_kv *kv, uint64_t i, gguf_str *out);

#endif
