/* safetensors files: an 8-byte little-endian header length, a JSON header naming each
 * tensor's dtype, shape and byte range, then the data. Mapped read-only; every range is
 * checked against the file before use. */
#ifndef KV_SAFETENSORS_H
#define KV_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char name[128];
    char dtype[8];            /* as the header spells it: "F32", "BF16", ... */
    int type;                 /* its ggml type (GGML_F32, GGML_F16, GGML_BF16), or -1 */
    int n_dims;
    int64_t shape[4];         /* row-major: shape[n_dims - 1] is the fastest */
    const uint8_t *data;
    size_t nbytes;
} st_tensor;

typedef struct {
    char path[512];
    uint8_t *base;
    size_t size;
    st_tensor *t;
    int n;
} st_file;

/* 0, or -1 with "PATH: what is wrong" in err. */
int st_open(st_file *f, const char *path, char *err, size_t errlen);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);

#endif
