/* safetensors reader (see safetensors.h). */
#include "safetensors.h"
#include "quant.h"
#include "../kernels/host.h"
#include "../kernels/jsonl.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const char *path, char *err, size_t errlen, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", path, msg);
    return -1;
}

static const struct { const char *name; int type, size; } DTYPES[] = {
    {"F32", GGML_F32, 4}, {"F16", GGML_F16, 2}, {"BF16", GGML_BF16, 2},
    {"F64", -1, 8}, {"I64", -1, 8}, {"I32", -1, 4}, {"I16", -1, 2}, {"I8", -1, 1}, {"U8", -1, 1},
    {"BOOL", -1, 1}, {"F8_E4M3", -1, 1}, {"F8_E5M2", -1, 1}, {"U16", -1, 2}, {"U32", -1, 4}, {"U64", -1, 8},
};

/* One header entry {"dtype", "shape", "data_offsets"} into t; data is relative to data0. */
static int read_entry(st_file *f, const char *name, const json_value *v, const uint8_t *data0, size_t avail,
                      st_tensor *t, char *err, size_t errlen) {
    if (strlen(name) >= sizeof t->name) return fail(f->path, err, errlen, "tensor name '%.60s...' is too long", name);
    snprintf(t->name, sizeof t->name, "%s", name);
    const json_value *dt = json_get(v, "dtype"), *sh = json_get(v, "shape"), *off = json_get(v, "data_offsets");
    if (v->type != JSON_OBJECT || !dt || dt->type != JSON_STRING || !sh || sh->type != JSON_ARRAY || !off ||
        off->type != JSON_ARRAY || off->n != 2)
        return fail(f->path, err, errlen, "tensor %s: header entry needs dtype, shape and data_offsets", name);
    int size = 0;
    t->type = -1;
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (!strcmp(dt->str, DTYPES[i].name)) size = DTYPES[i].size, t->type = DTYPES[i].type;
    if (!size) return fail(f->path, err, errlen, "tensor %s: unknown dtype '%.16s'", name, dt->str);
    snprintf(t->dtype, sizeof t->dtype, "%s", dt->str);
    if (sh->n > 4) return fail(f->path, err, errlen, "tensor %s: %d dimensions (at most 4)", name, sh->n);
    t->n_dims = sh->n;
    double nel = 1;
    for (int d = 0; d < 4; d++) t->shape[d] = 1;
    for (int d = 0; d < sh->n; d++) {
        double x = sh->items[d].num;
        if (sh->items[d].type != JSON_NUMBER || x < 0 || x != floor(x) || x > 1e15)
            return fail(f->path, err, errlen, "tensor %s: shape[%d] is not a non-negative integer", name, d);
        t->shape[d] = (int64_t)x;
        nel *= x;
    }
    double b = off->items[0].num, e = off->items[1].num;
    if (off->items[0].type != JSON_NUMBER || off->items[1].type != JSON_NUMBER || b < 0 || e < b ||
        b != floor(b) || e != floor(e) || e > (double)avail)
        return fail(f->path, err, errlen, "tensor %s: data_offsets [%.0f, %.0f] are outside the %zu data bytes",
                    name, b, e, avail);
    if (e - b != nel * size)
        return fail(f->path, err, errlen, "tensor %s: data_offsets hold %.0f bytes, its shape needs %.0f", name,
                    e - b, nel * size);
    t->data = data0 + (size_t)b;
    t->nbytes = (size_t)(e - b);
    return 0;
}

typedef struct { const uint8_t *p; size_t n; int i; } span;
static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

/* No two tensors share a byte: one written over another would load as two weights. */
static int check_overlap(st_file *f, const uint8_t *data0, char *err, size_t errlen) {
    span *s = malloc((f->n ? (size_t)f->n : 1) * sizeof *s);
    int m = 0;
    if (!s) return fail(f->path, err, errlen, "out of memory");
    for (int i = 0; i < f->n; i++)
        if (f->t[i].nbytes) s[m++] = (span){f->t[i].data, f->t[i].nbytes, i};
    qsort(s, (size_t)m, sizeof *s, cmp_span);
    for (int k = 1; k < m; k++)
        if (s[k - 1].p + s[k - 1].n > s[k].p) {
            const span *x = &s[k - 1], *y = &s[k];
            size_t xb = (size_t)(x->p - data0), yb = (size_t)(y->p - data0);
            fail(f->path, err, errlen, "tensors %s (data_offsets [%zu, %zu]) and %s ([%zu, %zu]) overlap",
                 f->t[x->i].name, xb, xb + x->n, f->t[y->i].name, yb, yb + y->n);
            free(s);
            return -1;
        }
    free(s);
    return 0;
}

int st_open(st_file *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    char why[160];
    int fd = kb_open_regular(path, SIZE_MAX, &f->size, why, sizeof why);   /* a FIFO never blocks */
    if (fd < 0) return fail(path, err, errlen, "%s", why);
    if (f->size < 8) {
        close(fd);
        return fail(path, err, errlen, "too small for a safetensors header");
    }
    void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return fail(path, err, errlen, "cannot map: %s", strerror(e));
    f->base = map;
    uint64_t hlen;
    memcpy(&hlen, f->base, 8);
    if (hlen > f->size - 8) {
        fail(path, err, errlen, "header length %llu runs past the end of the file (%zu bytes)",
             (unsigned long long)hlen, f->size);
        goto bad;
    }
    json_value h;
    char jerr[200];
    if (json_parse((const char *)f->base + 8, (size_t)hlen, &h, jerr, sizeof jerr)) {
        fail(path, err, errlen, "header is not valid JSON: %s", jerr);
        goto bad;
    }
    if (h.type != JSON_OBJECT) {
        json_free(&h);
        fail(path, err, errlen, "header is not a JSON object");
        goto bad;
    }
    f->t = calloc(h.n ? (size_t)h.n : 1, sizeof *f->t);
    if (!f->t) {
        json_free(&h);
        fail(path, err, errlen, "out of memory");
        goto bad;
    }
    const uint8_t *data0 = f->base + 8 + hlen;
    size_t avail = f->size - 8 - (size_t)hlen;
    for (int i = 0; i < h.n; i++) {
        if (!strcmp(h.keys[i], "__metadata__")) continue;
        if (read_entry(f, h.keys[i], &h.items[i], data0, avail, &f->t[f->n], err, errlen)) {
            json_free(&h);
            goto bad;
        }
        f->n++;
    }
    json_free(&h);
    if (check_overlap(f, data0, err, errlen)) goto bad;
    return 0;
bad:
    st_close(f);
    return -1;
}

void st_close(st_file *f) {
    if (f->base) munmap(f->base, f->size);
    free(f->t);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}
