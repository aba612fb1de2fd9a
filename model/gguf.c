/* GGUF v3 (and v2) reader. The file is mapped read-only; every count, length and
 * offset is checked against the bytes that remain BEFORE it is used or allocated for
 * (model-format.md 1.5). Errors read "PATH: what is wrong (where)". */
#include "gguf.h"
#include "../kernels/host.h"
#include "quant.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC 0x46554747u          /* "GGUF" read as a little-endian u32 */
#define MAX_KEY_LEN 65535u
#define MAX_STR_LEN (1ull << 30)
#define MAX_ARR_N (1ull << 30)
#define MIN_KV_BYTES 13u                /* key len + type + one byte of value */
#define MIN_TENSOR_BYTES 32u            /* name len + n_dims + ne0 + type + offset */
#define DEFAULT_ALIGNMENT 32u

/* Reading cursor over the mapping, plus what an error message needs. */
typedef struct {
    const uint8_t *base;
    size_t size, pos;
    const char *path;
    char *err;
    size_t errlen;
    char where[160];                    /* the record being read, for messages */
} cursor;

static int fail(cursor *c, const char *fmt, ...) {
    if (!c->err || !c->errlen) return -1;
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->where[0]) snprintf(c->err, c->errlen, "%s: %s (%s)", c->path, msg, c->where);
    else snprintf(c->err, c->errlen, "%s: %s", c->path, msg);
    return -1;
}

/* A name from the file, made printable and short, for messages. */
static void printable(char *out, size_t cap, const char *p, uint64_t len) {
    size_t n = 0;
    for (uint64_t i = 0; i < len && n + 4 < cap; i++) {
        unsigned char ch = (unsigned char)p[i];
        out[n++] = (ch >= 32 && ch < 127) ? (char)ch : '?';
    }
    if (len > n && n + 4 <= cap) { memcpy(out + n, "...", 3); n += 3; }
    out[n] = 0;
}

static size_t left(const cursor *c) { return c->size - c->pos; }

static int need(cursor *c, uint64_t n, const char *what) {
    if (n > left(c))
        return fail(c, "%s needs %llu bytes at offset %zu but only %zu remain (truncated?)", what,
                    (unsigned long long)n, c->pos, left(c));
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v, const char *what) {
    if (need(c, 4, what)) return -1;
    memcpy(v, c->base + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int rd_u64(cursor *c, uint64_t *v, const char *what) {
    if (need(c, 8, what)) return -1;
    memcpy(v, c->base + c->pos, 8);
    c->pos += 8;
    return 0;
}

static int rd_str(cursor *c, gguf_str *s, uint64_t cap, const char *what) {
    uint64_t len;
    if (rd_u64(c, &len, what)) return -1;
    if (len > cap) return fail(c, "%s length %llu exceeds the limit %llu", what, (unsigned long long)len,
                               (unsigned long long)cap);
    if (need(c, len, what)) return -1;
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return 0;
}

static const size_t VSIZE[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *VNAME[13] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};

size_t gguf_vtype_size(int type) { return (type >= 0 && type < 13) ? VSIZE[type] : 0; }
const char *gguf_vtype_name(int type) { return (type >= 0 && type < 13) ? VNAME[type] : "unknown"; }

static int read_kv(cursor *c, gguf_kv *kv, int64_t i) {
    snprintf(c->where, sizeof c->where, "kv %lld", (long long)i);
    if (rd_str(c, &kv->key, MAX_KEY_LEN, "key")) return -1;
    if (kv->key.len == 0) return fail(c, "empty key");
    char name[96];
    printable(name, sizeof name, kv->key.ptr, kv->key.len);
    snprintf(c->where, sizeof c->where, "kv %lld '%s'", (long long)i, name);

    uint32_t type;
    if (rd_u32(c, &type, "value type")) return -1;
    if (type > GGUF_F64) return fail(c, "unknown value type %u", type);
    kv->type = (int)type;
    kv->data = c->base + c->pos;
    if (type == GGUF_STRING) {
        gguf_str s;
        return rd_str(c, &s, MAX_STR_LEN, "string value");
    }
    if (type != GGUF_ARRAY) {
        if (need(c, VSIZE[type], "value")) return -1;
        c->pos += VSIZE[type];
        return 0;
    }

    uint32_t et;
    uint64_t n;
    if (rd_u32(c, &et, "array element type")) return -1;
    if (et == GGUF_ARRAY) return fail(c, "nested array (array of arrays is not supported)");
    if (et > GGUF_F64) return fail(c, "unknown array element type %u", et);
    if (rd_u64(c, &n, "array count")) return -1;
    if (n > MAX_ARR_N) return fail(c, "array count %llu exceeds the limit %llu", (unsigned long long)n, MAX_ARR_N);
    size_t esize = et == GGUF_STRING ? 8 : VSIZE[et];        /* a string is at least its length */
    if (n > left(c) / esize)
        return fail(c, "array of %llu %s needs at least %llu bytes but only %zu remain", (unsigned long long)n,
                    VNAME[et], (unsigned long long)n * esize, left(c));
    kv->arr_type = (int)et;
    kv->arr_n = n;
    kv->data = c->base + c->pos;
    if (et != GGUF_STRING) {
        c->pos += (size_t)n * esize;
        return 0;
    }
    /* Walk (and so validate) every string once; keep each element's offset. */
    uint64_t *off = malloc((n ? n : 1) * sizeof *off);
    if (!off) return fail(c, "out of memory for %llu string offsets", (unsigned long long)n);
    kv->str_off = off;
    for (uint64_t k = 0; k < n; k++) {
        gguf_str s;
        off[k] = c->pos;
        if (rd_str(c, &s, MAX_STR_LEN, "array string")) return -1;
    }
    return 0;
}

static int read_tensor_info(cursor *c, gguf_tensor *t, int64_t i, size_t align) {
    snprintf(c->where, sizeof c->where, "tensor %lld", (long long)i);
    gguf_str name;
    if (rd_str(c, &name, MAX_STR_LEN, "tensor name")) return -1;
    if (name.len == 0) return fail(c, "empty tensor name");
    char pname[48];
    printable(pname, sizeof pname, name.ptr, name.len);
    snprintf(c->where, sizeof c->where, "tensor %lld '%s'", (long long)i, pname);
    if (name.len >= sizeof t->name)
        return fail(c, "tensor name is %llu bytes, the limit is %zu", (unsigned long long)name.len,
                    sizeof t->name - 1);
    if (memchr(name.ptr, 0, (size_t)name.len)) return fail(c, "tensor name contains a NUL byte");
    memcpy(t->name, name.ptr, (size_t)name.len);
    t->name[name.len] = 0;

    uint32_t n_dims;
    if (rd_u32(c, &n_dims, "n_dims")) return -1;
    if (n_dims < 1 || n_dims > 4) return fail(c, "n_dims is %u, must be 1..4", n_dims);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        if (rd_u64(c, &ne, "dimension")) return -1;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return fail(c, "dimension ne[%u] = %llu is not a positive int64", d, (unsigned long long)ne);
        if ((int64_t)ne > INT64_MAX / nel) return fail(c, "element count overflows int64 at ne[%u]", d);
        t->ne[d] = (int64_t)ne;
        nel *= (int64_t)ne;
    }
    uint32_t type;
    int block, bytes;
    if (rd_u32(c, &type, "tensor type")) return -1;
    t->type = (int)type;
    if (type > 1000 || quant_info((int)type, &block, &bytes) != 0)
        return fail(c, "unsupported tensor type id %u", type);
    if (t->ne[0] % block)
        return fail(c, "ne[0] = %lld is not a multiple of the %s block size %d", (long long)t->ne[0],
                    quant_name((int)type), block);
    uint64_t row_blocks = (uint64_t)(t->ne[0] / block), rows = (uint64_t)(nel / t->ne[0]);
    if (row_blocks > SIZE_MAX / (uint64_t)bytes) return fail(c, "row size overflows size_t");
    uint64_t row_bytes = row_blocks * (uint64_t)bytes;
    if (rows > SIZE_MAX / row_bytes) return fail(c, "tensor size overflows size_t");
    t->nbytes = (size_t)(rows * row_bytes);
    if (rd_u64(c, &t->offset, "tensor offset")) return -1;
    if (t->offset % align)
        return fail(c, "data offset %llu is not a multiple of the alignment %zu", (unsigned long long)t->offset,
                    align);
    return 0;
}

static int cmp_str(gguf_str a, gguf_str b) {
    size_t n = a.len < b.len ? (size_t)a.len : (size_t)b.len;
    int r = memcmp(a.ptr, b.ptr, n);
    return r ? r : (a.len > b.len) - (a.len < b.len);
}
static int cmp_kv(const void *a, const void *b) {
    return cmp_str((*(const gguf_kv *const *)a)->key, (*(const gguf_kv *const *)b)->key);
}
static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}
static int cmp_tensor_offset(const void *a, const void *b) {
    uint64_t x = (*(const gguf_tensor *const *)a)->offset, y = (*(const gguf_tensor *const *)b)->offset;
    return (x > y) - (x < y);
}

/* The alignment from general.alignment (must be a u32 power of two), or the default. */
static int read_alignment(cursor *c, const gguf_file *f, size_t *align) {
    *align = DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find(f, "general.alignment");
    if (!kv) return 0;
    snprintf(c->where, sizeof c->where, "general.alignment");
    if (kv->type != GGUF_U32) return fail(c, "alignment has type %s, must be u32", gguf_vtype_name(kv->type));
    uint32_t a;
    memcpy(&a, kv->data, 4);
    if (a == 0 || (a & (a - 1))) return fail(c, "alignment %u is not a power of two", a);
    *align = a;
    return 0;
}

/* Tensor data: inside the file, and no two tensors overlapping. */
static int check_tensor_data(cursor *c, gguf_file *f) {
    if (f->n_tensors == 0) return 0;
    c->where[0] = 0;
    if (f->data_start > f->size)
        return fail(c, "tensor data section would start at %zu, past the end of the file (%zu bytes)",
                    f->data_start, f->size);
    size_t avail = f->size - f->data_start;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        snprintf(c->where, sizeof c->where, "tensor %lld '%s'", (long long)i, t->name);
        if (t->offset > avail)
            return fail(c, "data offset %llu is past the end of the file", (unsigned long long)t->offset);
        if (t->nbytes > avail - t->offset)
            return fail(c, "data [%llu, +%zu) runs past the end of the file (%zu data bytes)",
                        (unsigned long long)t->offset, t->nbytes, avail);
        t->data = f->base + f->data_start + t->offset;
    }
    const gguf_tensor **by_off = malloc((size_t)f->n_tensors * sizeof *by_off);
    if (!by_off) return fail(c, "out of memory");
    for (int64_t i = 0; i < f->n_tensors; i++) by_off[i] = &f->tensors[i];
    qsort(by_off, (size_t)f->n_tensors, sizeof *by_off, cmp_tensor_offset);
    for (int64_t i = 0; i + 1 < f->n_tensors; i++)
        if (by_off[i]->offset + by_off[i]->nbytes > by_off[i + 1]->offset) {
            snprintf(c->where, sizeof c->where, "tensors '%s' and '%s'", by_off[i]->name, by_off[i + 1]->name);
            free(by_off);
            return fail(c, "tensor data overlaps");
        }
    free(by_off);
    return 0;
}

static int parse(cursor *c, gguf_file *f) {
    uint32_t magic = 0, version = 0;
    uint64_t nt = 0, nkv = 0;
    if (rd_u32(c, &magic, "magic") || rd_u32(c, &version, "version") || rd_u64(c, &nt, "tensor_count") ||
        rd_u64(c, &nkv, "kv_count"))
        return -1;
    if (magic != GGUF_MAGIC) return fail(c, "not a GGUF file (bad magic)");
    if ((version & 0xffffu) == 0) return fail(c, "big-endian GGUF is not supported (version field %#x)", version);
    if (version != 2 && version != 3) return fail(c, "unsupported GGUF version %u (need 2 or 3)", version);
    f->version = version;
    /* Counts must fit in what remains at the minimum record size, before allocating. */
    if (nkv > left(c) / MIN_KV_BYTES)
        return fail(c, "kv_count %llu cannot fit in the %zu remaining bytes", (unsigned long long)nkv, left(c));
    size_t rest = left(c) - (size_t)nkv * MIN_KV_BYTES;
    if (nt > rest / MIN_TENSOR_BYTES)
        return fail(c, "tensor_count %llu cannot fit in the %zu remaining bytes", (unsigned long long)nt, rest);
    f->n_kv = (int64_t)nkv;
    f->n_tensors = (int64_t)nt;

    f->kv = calloc(nkv ? nkv : 1, sizeof *f->kv);
    f->kv_sorted = calloc(nkv ? nkv : 1, sizeof *f->kv_sorted);
    f->tensors = calloc(nt ? nt : 1, sizeof *f->tensors);
    f->tensors_sorted = calloc(nt ? nt : 1, sizeof *f->tensors_sorted);
    if (!f->kv || !f->kv_sorted || !f->tensors || !f->tensors_sorted) return fail(c, "out of memory");

    for (int64_t i = 0; i < f->n_kv; i++) {
        if (read_kv(c, &f->kv[i], i)) return -1;
        f->kv_sorted[i] = &f->kv[i];
    }
    qsort(f->kv_sorted, nkv, sizeof *f->kv_sorted, cmp_kv);
    for (int64_t i = 0; i + 1 < f->n_kv; i++)
        if (cmp_str(f->kv_sorted[i]->key, f->kv_sorted[i + 1]->key) == 0) {
            char name[96];
            printable(name, sizeof name, f->kv_sorted[i]->key.ptr, f->kv_sorted[i]->key.len);
            snprintf(c->where, sizeof c->where, "key '%s'", name);
            return fail(c, "duplicate key");
        }
    if (read_alignment(c, f, &f->alignment)) return -1;

    for (int64_t i = 0; i < f->n_tensors; i++) {
        if (read_tensor_info(c, &f->tensors[i], i, f->alignment)) return -1;
        f->tensors_sorted[i] = &f->tensors[i];
    }
    qsort(f->tensors_sorted, nt, sizeof *f->tensors_sorted, cmp_tensor_name);
    for (int64_t i = 0; i + 1 < f->n_tensors; i++)
        if (strcmp(f->tensors_sorted[i]->name, f->tensors_sorted[i + 1]->name) == 0) {
            snprintf(c->where, sizeof c->where, "tensor '%s'", f->tensors_sorted[i]->name);
            return fail(c, "duplicate tensor name");
        }
    /* pos <= size, so adding alignment - 1 (< 2^32) cannot wrap a 64-bit size_t. */
    f->data_start = c->pos + (f->alignment - c->pos % f->alignment) % f->alignment;
    return check_tensor_data(c, f);
}

int gguf_open(gguf_file *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    cursor c = {.path = path, .err = err, .errlen = errlen};
    if (err && errlen) err[0] = 0;
    snprintf(f->path, sizeof f->path, "%s", path);
    char why[160];
    int fd = kb_open_regular(path, SIZE_MAX, &f->size, why, sizeof why);   /* a FIFO never blocks */
    if (fd < 0) return fail(&c, "%s", why);
    if (f->size < 24) {
        close(fd);
        size_t n = f->size;
        memset(f, 0, sizeof *f);
        return fail(&c, "file is %zu bytes, too small for a GGUF header (24)", n);
    }
    void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        memset(f, 0, sizeof *f);
        return fail(&c, "cannot map: %s", strerror(map_errno));
    }
    f->base = map;
    c.base = f->base;
    c.size = f->size;
    if (parse(&c, f) != 0) {
        gguf_close(f);
        return -1;
    }
    return 0;
}

int gguf_open_mem(gguf_file *f, const char *name, void *buf, size_t size, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    cursor c = {.path = name, .err = err, .errlen = errlen, .base = buf, .size = size};
    if (err && errlen) err[0] = 0;
    snprintf(f->path, sizeof f->path, "%s", name);
    f->base = buf;
    f->size = size;
    f->heap_base = 1;
    if (parse(&c, f) != 0) {
        gguf_close(f);
        return -1;
    }
    return 0;
}

int gguf_set_tensors(gguf_file *f, gguf_tensor *t, int64_t n, char *err, size_t errlen) {
    free(f->tensors);
    free(f->tensors_sorted);
    f->tensors = t;
    f->n_tensors = n;
    f->tensors_sorted = calloc(n ? (size_t)n : 1, sizeof *f->tensors_sorted);
    if (!f->tensors_sorted) {
        snprintf(err, errlen, "%s: out of memory", f->path);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) f->tensors_sorted[i] = &t[i];
    qsort(f->tensors_sorted, (size_t)n, sizeof *f->tensors_sorted, cmp_tensor_name);
    for (int64_t i = 0; i + 1 < n; i++)
        if (!strcmp(f->tensors_sorted[i]->name, f->tensors_sorted[i + 1]->name)) {
            snprintf(err, errlen, "%s: duplicate tensor name '%s'", f->path, f->tensors_sorted[i]->name);
            return -1;
        }
    return 0;
}

void gguf_close(gguf_file *f) {
    if (f->kv)
        for (int64_t i = 0; i < f->n_kv; i++) free((void *)f->kv[i].str_off);
    free(f->kv);
    free(f->kv_sorted);
    free(f->tensors);
    free(f->tensors_sorted);
    if (f->aux_free) f->aux_free(f->aux);
    if (f->base && f->heap_base) free((void *)f->base);
    else if (f->base) munmap((void *)f->base, f->size);
    memset(f, 0, sizeof *f);
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
    if (!f->kv_sorted || !key) return NULL;
    gguf_str k = {key, strlen(key)};
    int64_t lo = 0, hi = f->n_kv - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = cmp_str(f->kv_sorted[mid]->key, k);
        if (r == 0) return f->kv_sorted[mid];
        if (r < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const gguf_tensor *gguf_tensor_find(const gguf_file *f, const char *name) {
    if (!f->tensors_sorted || !name) return NULL;
    int64_t lo = 0, hi = f->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = strcmp(f->tensors_sorted[mid]->name, name);
        if (r == 0) return f->tensors_sorted[mid];
        if (r < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* One integer value of type `type` at p into int64 (u64 beyond INT64_MAX fails). */
static int int_at(int type, const uint8_t *p, int64_t *out) {
    switch (type) {
    case GGUF_U8: *out = p[0]; return 0;
    case GGUF_I8: *out = (int8_t)p[0]; return 0;
    case GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_I16: { int16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_I32: { int32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_I64: { int64_t v; memcpy(&v, p, 8); *out = v; return 0; }
    case GGUF_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v;
        return 0;
    }
    default: return -1;
    }
}

static int f32_at(int type, const uint8_t *p, float *out) {
    if (type == GGUF_F32) { memcpy(out, p, 4); return 0; }
    if (type == GGUF_F64) { double v; memcpy(&v, p, 8); *out = (float)v; return 0; }
    return -1;
}

int gguf_get_int(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_find(f, key);
    return kv ? int_at(kv->type, kv->data, out) : -1;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    const gguf_kv *kv = gguf_find(f, key);
    return kv ? f32_at(kv->type, kv->data, out) : -1;
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv || kv->type != GGUF_BOOL) return -1;
    *out = kv->data[0] != 0;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv || kv->type != GGUF_STRING) return -1;
    memcpy(&out->len, kv->data, 8);           /* validated at open */
    out->ptr = (const char *)kv->data + 8;
    return 0;
}

/* kv must be one of f's own records, an array with element i. */
static int arr_ok(const gguf_file *f, const gguf_kv *kv, uint64_t i) {
    return f->kv && kv >= f->kv && kv < f->kv + f->n_kv && kv->type == GGUF_ARRAY && i < kv->arr_n;
}

int gguf_arr_str(const gguf_file *f, const gguf_kv *kv, uint64_t i, gguf_str *out) {
    if (!arr_ok(f, kv, i) || kv->arr_type != GGUF_STRING || !kv->str_off) return -1;
    memcpy(&out->len, f->base + kv->str_off[i], 8);
    out->ptr = (const char *)f->base + kv->str_off[i] + 8;
    return 0;
}

int gguf_arr_int(const gguf_file *f, const gguf_kv *kv, uint64_t i, int64_t *out) {
    if (!arr_ok(f, kv, i) || kv->arr_type == GGUF_STRING) return -1;
    return int_at(kv->arr_type, kv->data + i * VSIZE[kv->arr_type], out);
}

int gguf_arr_f32(const gguf_file *f, const gguf_kv *kv, uint64_t i, float *out) {
    if (!arr_ok(f, kv, i) || kv->arr_type == GGUF_STRING) return -1;
    return f32_at(kv->arr_type, kv->data + i * VSIZE[kv->arr_type], out);
}
