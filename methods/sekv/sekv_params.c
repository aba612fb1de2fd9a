/* SeKV parameter file: init, save, load (see sekv_params.h).
 *
 * Layout, all little-endian:
 *   "SEKVPAR1"  8 bytes magic
 *   u32 version (SEKV_PARAMS_VERSION)
 *   u64 model hash
 *   i32 n_layers, n_heads, head_dim, rank_cap, dp, hidden, trained, train_steps
 *   u64 float count (must equal sekv_params_count for the shapes above)
 *   f32 [count]  W, tau, g_w1, g_b1, g_w2, g_b2, g_w3, g_b3 (bit patterns as stored)
 *   u64 FNV-1a 64 of every byte before it
 * Saving writes PATH.tmp and renames it over PATH, so a crash never leaves half a file. */
#include "sekv_params.h"
#include "../method.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SEKV_PARAMS_VERSION = 1, HEADER_BYTES = 8 + 4 + 8 + 8 * 4 + 8 };

static const char MAGIC[8] = {'S', 'E', 'K', 'V', 'P', 'A', 'R', '1'};

uint64_t sekv_model_hash(const void *bytes, size_t n) { return kv_model_hash(bytes, n); }

/* Float counts of each array, in file order. */
static void array_sizes(int L, int H, int d, int R, int dp, int hid, size_t sz[8]) {
    sz[0] = (size_t)L * H * dp * d;      /* W */
    sz[1] = (size_t)L * H;               /* tau */
    sz[2] = (size_t)hid * (R + d);       /* g_w1 */
    sz[3] = (size_t)hid;                 /* g_b1 */
    sz[4] = (size_t)hid * hid;           /* g_w2 */
    sz[5] = (size_t)hid;                 /* g_b2 */
    sz[6] = (size_t)R * hid;             /* g_w3 */
    sz[7] = (size_t)R;                   /* g_b3 */
}

static size_t total_floats(int L, int H, int d, int R, int dp, int hid) {
    size_t sz[8], n = 0;
    array_sizes(L, H, d, R, dp, hid, sz);
    for (int i = 0; i < 8; i++) n += sz[i];
    return n;
}

size_t sekv_params_count(const sekv_params *p) {
    return total_floats(p->n_layers, p->n_heads, p->head_dim, p->rank_cap, p->dp, p->hidden);
}

static int check_shape(int L, int H, int d, int R, int dp, int hid, char *err, size_t errlen,
                       const char *who) {
    if (L < 1 || L > 4096 || H < 1 || H > 4096 || d < 1 || d > 4096) {
        snprintf(err, errlen, "%s: bad shape n_layers=%d n_heads=%d head_dim=%d", who, L, H, d);
        return -1;
    }
    if (R != 8 && R != 32 && R != 64) {
        snprintf(err, errlen, "%s: rank cap %d is not 8, 32 or 64", who, R);
        return -1;
    }
    if (dp != SEKV_DPRIME || hid != SEKV_HIDDEN) {
        snprintf(err, errlen, "%s: routing dim %d / gate width %d, expected %d / %d", who, dp, hid,
                 SEKV_DPRIME, SEKV_HIDDEN);
        return -1;
    }
    return 0;
}

/* One allocation holds every array, in file order, starting at p->W. */
static int alloc_arrays(sekv_params *p) {
    size_t sz[8];
    array_sizes(p->n_layers, p->n_heads, p->head_dim, p->rank_cap, p->dp, p->hidden, sz);
    float *a = calloc(sekv_params_count(p), sizeof *a);
    if (!a) return -1;
    float **dst[8] = {&p->W, &p->tau, &p->g_w1, &p->g_b1, &p->g_w2, &p->g_b2, &p->g_w3, &p->g_b3};
    for (int i = 0; i < 8; i++) {
        *dst[i] = a;
        a += sz[i];
    }
    return 0;
}

void sekv_params_free(sekv_params *p) {
    if (!p) return;
    free(p->W);
    memset(p, 0, sizeof *p);
}

/* splitmix64 + Box-Muller: a fixed stream per seed, independent of the platform's rand. */
static uint64_t sm_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double sm_normal(uint64_t *s) {
    double u = ((sm_next(s) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double v = (sm_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
static void fill_normal(float *x, size_t n, double std, uint64_t *s) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(std * sm_normal(s));
}

int sekv_params_init(sekv_params *p, int n_layers, int n_heads, int head_dim, int rank_cap,
                     uint64_t seed, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    if (check_shape(n_layers, n_heads, head_dim, rank_cap, SEKV_DPRIME, SEKV_HIDDEN, err, errlen,
                    "sekv params"))
        return -1;
    *p = (sekv_params){.n_layers = n_layers, .n_heads = n_heads, .head_dim = head_dim,
                       .rank_cap = rank_cap, .dp = SEKV_DPRIME, .hidden = SEKV_HIDDEN};
    if (alloc_arrays(p)) {
        snprintf(err, errlen, "sekv params: out of memory");
        return -1;
    }
    uint64_t s = seed;
    int R = rank_cap, d = head_dim, hid = p->hidden;
    /* W ~ N(0, 1/d'): E[(Wq).(Wk)] = q.k, a dot-product preserving random projection. */
    fill_normal(p->W, (size_t)n_layers * n_heads * p->dp * d, 1.0 / sqrt(p->dp), &s);
    for (int i = 0; i < n_layers * n_heads; i++) p->tau[i] = (float)SEKV_TAU_UNTRAINED;
    fill_normal(p->g_w1, (size_t)hid * (R + d), 1.0 / sqrt(R + d), &s);
    fill_normal(p->g_w2, (size_t)hid * hid, 1.0 / sqrt(hid), &s);
    /* A small last layer and b3 = ln(0.95/0.05): every component starts at m ~ 0.95. */
    fill_normal(p->g_w3, (size_t)R * hid, 0.01 / sqrt(hid), &s);
    for (int i = 0; i < R; i++) p->g_b3[i] = (float)log(0.95 / 0.05);
    return 0;
}

int sekv_params_check_shape(const sekv_params *p, const char *path, int n_layers, int n_heads,
                            int head_dim, char *err, size_t errlen) {
    if (p->n_layers == n_layers && p->n_heads == n_heads && p->head_dim == head_dim) return 0;
    snprintf(err, errlen,
             "%s: shape mismatch: file has n_layers=%d n_heads=%d head_dim=%d, model has %d/%d/%d",
             path, p->n_layers, p->n_heads, p->head_dim, n_layers, n_heads, head_dim);
    return -1;
}

/* --- little-endian (de)serialisation --- */
static unsigned char *put_u32(unsigned char *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
    return b + 4;
}
static unsigned char *put_u64(unsigned char *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    return b + 8;
}
static uint32_t get_u32(const unsigned char *b) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)b[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const unsigned char *b) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

int sekv_params_save(const sekv_params *p, const char *path, char *err, size_t errlen) {
    size_t nf = sekv_params_count(p);
    for (size_t i = 0; i < nf; i++)
        if (!isfinite(p->W[i])) {   /* the loader refuses such a file: never write one */
            snprintf(err, errlen, "%s: parameter %zu of %zu is not finite (%g): training diverged, nothing saved", path,
                     i + 1, nf, (double)p->W[i]);
            return -1;
        }
    size_t bytes = HEADER_BYTES + nf * 4 + 8;
    unsigned char *buf = malloc(bytes);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory saving SeKV params", path);
        return -1;
    }
    unsigned char *b = buf;
    memcpy(b, MAGIC, 8);
    b = put_u32(b + 8, SEKV_PARAMS_VERSION);
    b = put_u64(b, p->model_hash);
    int32_t hdr[8] = {p->n_layers, p->n_heads, p->head_dim, p->rank_cap,
                      p->dp,       p->hidden,  p->trained,  p->train_steps};
    for (int i = 0; i < 8; i++) b = put_u32(b, (uint32_t)hdr[i]);
    b = put_u64(b, nf);
    for (size_t i = 0; i < nf; i++) {
        uint32_t u;
        memcpy(&u, p->W + i, 4);
        b = put_u32(b, u);
    }
    put_u64(b, sekv_model_hash(buf, bytes - 8));

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        free(buf);
        snprintf(err, errlen, "%s: out of memory saving SeKV params", path);
        return -1;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(buf, 1, bytes, f) == bytes;
    if (f && fclose(f)) ok = 0;
    if (ok && rename(tmp, path)) ok = 0;
    if (!ok) {
        snprintf(err, errlen, "%s: cannot write SeKV params: %s", path, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    free(buf);
    return ok ? 0 : -1;
}

int sekv_params_check_writable(const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: is a directory, not a parameter file", path);
        return -1;
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);           /* the name sekv_params_save writes first */
    int existed = access(tmp, F_OK) == 0;
    int fd = open(tmp, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) snprintf(err, errlen, "%s: cannot write there: %s", path, strerror(errno));
    else {
        close(fd);
        if (!existed) unlink(tmp);
    }
    free(tmp);
    return fd < 0 ? -1 : 0;
}

static unsigned char *read_all(const char *path, size_t *n, char *err, size_t errlen) {
    /* O_NONBLOCK: a FIFO must not block the open; a device (params_file=/dev/zero) would
     * be read until memory runs out: only a regular file of at most 1 GiB is read */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    struct stat sb;
    const char *why = fd < 0 || fstat(fd, &sb) ? strerror(errno)
                      : !S_ISREG(sb.st_mode)   ? "not a regular file"
                      : sb.st_size > (off_t)1 << 30 ? "over 1 GiB"
                                                    : NULL;
    FILE *f = why ? NULL : fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open SeKV params: %s", path, why ? why : strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                snprintf(err, errlen, "%s: out of memory reading SeKV params", path);
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: read error", path);
        free(buf);
        return NULL;
    }
    *n = len;
    return buf;
}

int sekv_params_load(sekv_params *p, const char *path, uint64_t expect_hash, char *err,
                     size_t errlen) {
    memset(p, 0, sizeof *p);
    size_t n;
    unsigned char *buf = read_all(path, &n, err, errlen);
    if (!buf) return -1;
    int rc = -1;
    if (n < 8 || memcmp(buf, MAGIC, 8) != 0) {
        snprintf(err, errlen, "%s: bad magic: not a SeKV params file (expected \"SEKVPAR1\")", path);
        goto out;
    }
    if (n < HEADER_BYTES) {
        snprintf(err, errlen, "%s: truncated: %zu bytes, the header alone is %d", path, n,
                 HEADER_BYTES);
        goto out;
    }
    uint32_t version = get_u32(buf + 8);
    if (version != SEKV_PARAMS_VERSION) {
        snprintf(err, errlen, "%s: wrong version %u (this build reads version %d)", path, version,
                 SEKV_PARAMS_VERSION);
        goto out;
    }
    uint64_t hash = get_u64(buf + 12);
    int32_t h[8];
    for (int i = 0; i < 8; i++) h[i] = (int32_t)get_u32(buf + 20 + 4 * i);
    uint64_t nf = get_u64(buf + 52);
    char why[160];
    if (check_shape(h[0], h[1], h[2], h[3], h[4], h[5], why, sizeof why, "shape mismatch")) {
        snprintf(err, errlen, "%s: %s", path, why);
        goto out;
    }
    size_t want = total_floats(h[0], h[1], h[2], h[3], h[4], h[5]);
    if (nf != want) {
        snprintf(err, errlen, "%s: shape mismatch: header declares %llu floats, shapes need %zu",
                 path, (unsigned long long)nf, want);
        goto out;
    }
    size_t bytes = HEADER_BYTES + want * 4 + 8;
    if (n < bytes) {
        snprintf(err, errlen, "%s: truncated: %zu bytes, expected %zu", path, n, bytes);
        goto out;
    }
    if (n > bytes) {
        snprintf(err, errlen, "%s: %zu unexpected bytes after the checksum", path, n - bytes);
        goto out;
    }
    if (get_u64(buf + bytes - 8) != sekv_model_hash(buf, bytes - 8)) {
        snprintf(err, errlen, "%s: checksum mismatch: the file is corrupt", path);
        goto out;
    }
    if (expect_hash && hash != expect_hash) {
        snprintf(err, errlen,
                 "%s: model hash mismatch: trained for model %016llx, this model is %016llx", path,
                 (unsigned long long)hash, (unsigned long long)expect_hash);
        goto out;
    }
    *p = (sekv_params){.n_layers = h[0], .n_heads = h[1], .head_dim = h[2], .rank_cap = h[3],
                       .dp = h[4], .hidden = h[5], .trained = h[6], .train_steps = h[7],
                       .model_hash = hash};
    if (alloc_arrays(p)) {
        snprintf(err, errlen, "%s: out of memory loading SeKV params", path);
        memset(p, 0, sizeof *p);
        goto out;
    }
    const unsigned char *b = buf + HEADER_BYTES;
    for (size_t i = 0; i < want; i++) {
        uint32_t u = get_u32(b + 4 * i);
        memcpy(p->W + i, &u, 4);
        if (!isfinite(p->W[i])) {   /* a diverged or hand-made file: every score it gives would be NaN */
            snprintf(err, errlen, "%s: parameter %zu of %zu is not finite (%g): refused", path, i + 1, want, (double)p->W[i]);
            sekv_params_free(p);
            goto out;
        }
    }
    rc = 0;
out:
    free(buf);
    return rc;
}
