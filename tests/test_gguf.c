/* GGUF reader and quant tests.
 *   test_gguf                      all checks: the real model's header, tensors and
 *                                  hyperparameters (skipped if absent), a small valid file,
 *                                  every truncation of it and hostile variants, f16/bf16
 *                                  conversions, dequant and dot of every type against an
 *                                  independent float64 decoder written here.
 *   test_gguf --dump PATH          keys, values and tensor infos, for tests/gguf_ref.py
 *   test_gguf --dequant PATH NAME ROW0 NROWS   rows as raw f32 on stdout
 *   test_gguf --dot PATH NAME XFILE            quant_dot of every row with x (raw f32)
 *   test_gguf --open PATH          open and print the error, if any (for fuzzing) */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "gguf_write.h"
#include "../model/gguf.h"
#include "../model/quant.h"

/* ---------- independent float64 reference decoders (section 2 of model-format.md) ---------- */

static double ref_f16(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double ref_bf16(uint16_t h) {
    int e = (h >> 7) & 255, m = h & 127;
    double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Q4_K/Q5_K sub-block s scale and min, written as the three 4-byte groups d, m, m_d. */
static void ref_kscale(const uint8_t *sc, int s, int *scale, int *min) {
    const uint8_t *d = sc, *m = sc + 4, *md = sc + 8;
    if (s < 4) {
        *scale = d[s] & 0x3f;
        *min = m[s] & 0x3f;
    } else {
        *scale = (md[s - 4] & 0x0f) | ((d[s - 4] >> 2) & 0x30);
        *min = (md[s - 4] >> 4) | ((m[s - 4] >> 2) & 0x30);
    }
}

/* Element i of the block starting at b, in float64, one element at a time. */
static double ref_elem(int type, const uint8_t *b, int i) {
    switch (type) {
    case GGML_F32: { float f; memcpy(&f, b + 4 * i, 4); return f; }
    case GGML_F16: return ref_f16(le16(b + 2 * i));
    case GGML_BF16: return ref_bf16(le16(b + 2 * i));
    case GGML_Q4_0: {
        int q = i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4);
        return (q - 8) * ref_f16(le16(b));
    }
    case GGML_Q4_1: {
        int q = i < 16 ? (b[4 + i] & 15) : (b[4 + i - 16] >> 4);
        return q * ref_f16(le16(b)) + ref_f16(le16(b + 2));
    }
    case GGML_Q5_0: case GGML_Q5_1: {
        int has_m = type == GGML_Q5_1;
        const uint8_t *qh = b + (has_m ? 4 : 2), *qs = qh + 4;
        uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
        int q = (i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4)) | (int)((h >> i) & 1) << 4;
        return has_m ? q * ref_f16(le16(b)) + ref_f16(le16(b + 2)) : (q - 16) * ref_f16(le16(b));
    }
    case GGML_Q8_0: return (int8_t)b[2 + i] * ref_f16(le16(b));
    case GGML_Q4_K: case GGML_Q5_K: {
        int five = type == GGML_Q5_K, c = i / 64, r = i % 64, l = r % 32, sub = i / 32, sc, mn;
        const uint8_t *qs = b + (five ? 48 : 16), *qh = b + 16;
        int q = r < 32 ? (qs[32 * c + l] & 15) : (qs[32 * c + l] >> 4);
        if (five) q += 16 * ((qh[l] >> sub) & 1);
        ref_kscale(b + 4, sub, &sc, &mn);
        return ref_f16(le16(b)) * sc * q - ref_f16(le16(b + 2)) * mn;
    }
    case GGML_Q6_K: {
        int h = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
        uint8_t qlb = b[64 * h + l + (quarter & 1) * 32];
        int nib = quarter < 2 ? (qlb & 15) : (qlb >> 4);
        int hb = (b[128 + 32 * h + l] >> (2 * quarter)) & 3;
        int scale = (int8_t)b[192 + 8 * h + l / 16 + 2 * quarter];
        return ref_f16(le16(b + 208)) * scale * ((nib | hb << 4) - 32);
    }
    }
    return NAN;
}

/* Expected layouts, from the type table of the reference document. */
typedef struct { int type; const char *name; int block, bytes; } type_row;
static const type_row TYPES[] = {
    {GGML_F32, "F32", 1, 4},       {GGML_F16, "F16", 1, 2},       {GGML_BF16, "BF16", 1, 2},
    {GGML_Q4_0, "Q4_0", 32, 18},   {GGML_Q4_1, "Q4_1", 32, 20},   {GGML_Q5_0, "Q5_0", 32, 22},
    {GGML_Q5_1, "Q5_1", 32, 24},   {GGML_Q8_0, "Q8_0", 32, 34},   {GGML_Q4_K, "Q4_K", 256, 144},
    {GGML_Q5_K, "Q5_K", 256, 176}, {GGML_Q6_K, "Q6_K", 256, 210},
};
#define N_TYPES (int)(sizeof TYPES / sizeof TYPES[0])

static uint16_t rand_f16_finite(void) {
    for (;;) {
        uint16_t h = (uint16_t)test_next();
        if (((h >> 10) & 31) != 31) return h;
    }
}

/* Random bytes, with every f16 field a random finite f16 (wide range, both signs,
 * subnormals). For F32/F16/BF16 "blocks", values are random normals (gauss=1) or random
 * finite bit patterns (gauss=0). */
static void rand_blocks(const type_row *t, uint8_t *p, int nb, int gauss) {
    size_t n = (size_t)nb * t->bytes;
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)test_next();
    for (int b = 0; b < nb; b++) {
        uint8_t *q = p + (size_t)b * t->bytes;
        uint16_t h;
        switch (t->type) {
        case GGML_F32: {
            float f = gauss ? test_normal() : 0;
            if (!gauss) {
                uint32_t u;
                do u = (uint32_t)test_next(); while (((u >> 23) & 255) == 255);
                memcpy(&f, &u, 4);
            }
            memcpy(q, &f, 4);
            break;
        }
        case GGML_F16:
            h = gauss ? f32_to_f16(test_normal()) : rand_f16_finite();
            memcpy(q, &h, 2);
            break;
        case GGML_BF16: {
            float f = test_normal();
            uint32_t u;
            memcpy(&u, &f, 4);
            h = gauss ? (uint16_t)(u >> 16) : (uint16_t)test_next();
            if (((h >> 7) & 255) == 255) h &= 0xbfff;      /* keep it finite */
            memcpy(q, &h, 2);
            break;
        }
        case GGML_Q6_K: h = rand_f16_finite(); memcpy(q + 208, &h, 2); break;
        case GGML_Q4_0: case GGML_Q5_0: case GGML_Q8_0: h = rand_f16_finite(); memcpy(q, &h, 2); break;
        default:   /* Q4_1, Q5_1, Q4_K, Q5_K: d and m/dmin */
            h = rand_f16_finite(); memcpy(q, &h, 2);
            h = rand_f16_finite(); memcpy(q + 2, &h, 2);
            break;
        }
    }
}

/* ---------- quant tests ---------- */

static void test_type_table(void) {
    for (int i = 0; i < N_TYPES; i++) {
        const type_row *t = &TYPES[i];
        int block = -1, bytes = -1;
        CHECK(quant_info(t->type, &block, &bytes) == 0 && block == t->block && bytes == t->bytes,
              "%s: quant_info gives block %d bytes %d", t->name, block, bytes);
        CHECK(strcmp(quant_name(t->type), t->name) == 0, "quant_name(%d) = %s", t->type, quant_name(t->type));
        CHECK(quant_row_bytes(t->type, 7LL * t->block) == (size_t)7 * t->bytes, "%s row bytes", t->name);
        if (t->block > 1) CHECK(quant_row_bytes(t->type, t->block + 1) == 0, "%s partial block", t->name);
    }
    int retired[] = {4, 5, 9, 10, 11, 15, 16, 28, 31, 36, 42, 99, -1};
    for (size_t i = 0; i < sizeof retired / sizeof retired[0]; i++)
        CHECK(quant_info(retired[i], NULL, NULL) != 0, "type %d should be unsupported", retired[i]);
    CHECK(strcmp(quant_name(10), "type 10") == 0, "quant_name(10) = %s", quant_name(10));
    CHECK(quant_row_bytes(GGML_Q4_1, 576) == 360, "Q4_1 row of 576");
}

/* Nearest f16 to v by search over the f16 value ladder; ties to even. */
static uint16_t ref_to_f16(float f) {
    double v = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (v >= 65520.0) return sign | 0x7c00;
    int lo = 0, hi = 0x7bff;                 /* largest h with value(h) <= v */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (ref_f16((uint16_t)mid) <= v) lo = mid;
        else hi = mid - 1;
    }
    if (lo == 0x7bff) return sign | (v - 65504.0 < 16.0 ? 0x7bff : 0x7c00);
    double a = v - ref_f16((uint16_t)lo), b = ref_f16((uint16_t)(lo + 1)) - v;
    int h = a < b ? lo : b < a ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
    return sign | (uint16_t)h;
}

static void test_conversions(void) {
    int bad16 = 0, badbf = 0, badrt = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double r = ref_f16((uint16_t)h);
        float f = f16_to_f32((uint16_t)h);
        if (isnan(r) ? !isnan(f) : ((double)f != r || !signbit(f) != !signbit(r))) bad16++;
        double rb = ref_bf16((uint16_t)h);
        float fb = bf16_to_f32((uint16_t)h);
        if (isnan(rb) ? !isnan(fb) : ((double)fb != rb || !signbit(fb) != !signbit(rb))) badbf++;
        uint16_t back = f32_to_f16(f);
        if (isnan(r) ? !(((back >> 10) & 31) == 31 && (back & 1023)) : back != h) badrt++;
    }
    CHECK(bad16 == 0, "%d f16 values decode wrong", bad16);
    CHECK(badbf == 0, "%d bf16 values decode wrong", badbf);
    CHECK(badrt == 0, "%d f16 values do not round-trip through f32", badrt);

    int badn = 0;
    for (int i = 0; i < 200000; i++) {
        /* random magnitudes from far below the f16 subnormals to beyond its max */
        float f = (float)ldexp(test_unif() + 0.5, test_int(-30, 17)) * (test_next() & 1 ? -1 : 1);
        if (i % 4 == 0) {           /* exact ties: midpoints between neighbouring f16 values */
            uint16_t h = (uint16_t)test_int(0, 0x7bfe);
            f = (float)((ref_f16(h) + ref_f16((uint16_t)(h + 1))) / 2);
        }
        uint16_t got = f32_to_f16(f), want = ref_to_f16(f);
        if (got != want && badn++ < 5) fprintf(stderr, "f32_to_f16(%a) = %#x, want %#x\n", f, got, want);
    }
    CHECK(badn == 0, "%d random floats round to the wrong f16", badn);
    CHECK(f32_to_f16(65519.0f) == 0x7bff && f32_to_f16(65520.0f) == 0x7c00 && f32_to_f16(-INFINITY) == 0xfc00,
          "f16 overflow boundary");
    uint16_t nan16 = f32_to_f16(NAN);
    CHECK(((nan16 >> 10) & 31) == 31 && (nan16 & 1023), "NaN -> %#x", nan16);
}

static void test_dequant_and_dot(void) {
    for (int ti = 0; ti < N_TYPES; ti++) {
        const type_row *t = &TYPES[ti];
        int n_bad = 0;
        double worst_dot = 0, worst_dot_generic = 0;
        for (int rep = 0; rep < 40; rep++) {
            int nb = test_int(1, t->block == 1 ? 300 : t->block == 32 ? 48 : 6);
            int64_t n = (int64_t)nb * t->block;
            uint8_t *blk = malloc((size_t)nb * t->bytes);
            float *y = malloc((size_t)(n + 8) * sizeof *y), *x = malloc((size_t)n * sizeof *x);
            double *ref = malloc((size_t)n * sizeof *ref);
            rand_blocks(t, blk, nb, rep % 2);
            for (int64_t i = 0; i < n; i++) ref[i] = ref_elem(t->type, blk + (i / t->block) * t->bytes, (int)(i % t->block));

            test_poison(y, (size_t)n + 8);
            dequant_row(t->type, blk, y, n);
            for (int64_t i = 0; i < n; i++) {
                if (y[i] == (float)ref[i]) continue;
                n_bad++;
                if (n_bad <= 3)
                    fprintf(stderr, "%s elem %lld: got %.9g want %.9g\n", t->name, (long long)i, y[i], ref[i]);
            }
            int tail_ok = 1;
            for (int i = 0; i < 8; i++) tail_ok &= isnan(y[n + i]);
            CHECK(tail_ok, "%s: dequant_row wrote past n", t->name);

            /* dot against the reference's double dot, on rows that stay finite */
            if (rep % 2 == 1 || t->block > 1) {
                test_fill(x, (size_t)n, 1.0f);
                double d = 0, mag = 0;
                for (int64_t i = 0; i < n; i++) {
                    d += ref[i] * x[i];
                    mag += fabs(ref[i] * x[i]);
                }
                if (isfinite(mag) && mag > 0 && mag < 1e30) {
                    double e1 = fabs(quant_dot(t->type, blk, x, n) - d) / mag;
                    double e2 = fabs(quant_dot_generic(t->type, blk, x, n) - d) / mag;
                    if (!(e1 <= worst_dot)) worst_dot = isnan(e1) ? INFINITY : e1;
                    if (!(e2 <= worst_dot_generic)) worst_dot_generic = isnan(e2) ? INFINITY : e2;
                }
            }
            free(blk), free(y), free(x), free(ref);
        }
        CHECK(n_bad == 0, "%s: %d dequantized values differ from the float64 reference", t->name,
              n_bad);
        CHECK(worst_dot <= 1e-5, "%s: quant_dot error %.3g of sum|w*x|", t->name, worst_dot);
        CHECK(worst_dot_generic <= 1e-5, "%s: quant_dot_generic error %.3g of sum|w*x|", t->name, worst_dot_generic);
        printf("  %-5s dequant bit-exact; dot rel err %.2g (fast) %.2g (portable)\n", t->name, worst_dot,
               worst_dot_generic);
    }
    float y[4];
    test_poison(y, 4);
    dequant_row(10, "abcd", y, 4);
    CHECK(isnan(y[0]) && isnan(y[3]), "unsupported type should give NaN");
    CHECK(isnan(quant_dot(10, "abcd", y, 4)), "quant_dot of unsupported type should be NaN");
}

/* ---------- a small valid file, its truncations and hostile variants ---------- */

static char tmpdir[64];

typedef struct {
    gw_buf b;
    size_t kv_align, kv_a, kv_b, kv_f, kv_str, kv_toks, kv_ints, tok1;
    size_t t0, t1, t2, data_start;
    uint8_t data[252];
} small_file;

#define K_ALIGN "general.alignment"
#define K_A "test.aaaa"
#define K_B "test.bbbb"
#define K_TOKS "tokenizer.ggml.tokens"
#define K_INTS "test.ints"

/* 3 tensors (Q8_0 [64,2] at 0, F32 [8] at 160, Q4_1 [32,3] at 192), 9 kv records. */
static void build_small(small_file *s) {
    memset(s, 0, sizeof *s);
    gw_buf *b = &s->b;
    gw_header(b, 3, 3, 9);
    gw_kv_str(b, "general.architecture", "llama");
    s->kv_align = gw_kv_u32(b, K_ALIGN, 32);
    s->kv_a = gw_kv_u32(b, K_A, 7);
    s->kv_b = gw_kv_u32(b, K_B, 9);
    s->kv_f = gw_kv_f32(b, "test.f32", 1.5f);
    s->kv_str = gw_kv_str(b, "test.str", "hello");
    s->kv_toks = gw_kv_arr(b, K_TOKS, GGUF_STRING, 4);
    gw_str(b, "a");
    s->tok1 = gw_str(b, "bc");
    gw_str(b, "");
    gw_str(b, "d\xc3\xa9");
    s->kv_ints = gw_kv_arr(b, K_INTS, GGUF_I32, 3);
    gw_u32(b, 1), gw_u32(b, (uint32_t)-2), gw_u32(b, 3);
    gw_str(b, "test.u64"), gw_u32(b, GGUF_U64), gw_u64(b, 1ull << 63);
    s->t0 = gw_tensor(b, "w.q8", 2, (uint64_t[]){64, 2}, GGML_Q8_0, 0);
    s->t1 = gw_tensor(b, "w.f32", 1, (uint64_t[]){8}, GGML_F32, 160);
    s->t2 = gw_tensor(b, "w.q41", 2, (uint64_t[]){32, 3}, GGML_Q4_1, 192);
    gw_align(b, 32);
    s->data_start = b->n;
    for (size_t i = 0; i < sizeof s->data; i++) s->data[i] = (uint8_t)test_next();
    gw_bytes(b, s->data, sizeof s->data);
}

/* Field offsets inside records. */
static size_t kv_type_at(size_t rec, const char *key) { return rec + 8 + strlen(key); }
static size_t kv_val_at(size_t rec, const char *key) { return rec + 12 + strlen(key); }
static size_t t_ndims_at(size_t rec, const char *name) { return rec + 8 + strlen(name); }
static size_t t_ne_at(size_t rec, const char *name, int d) { return rec + 12 + strlen(name) + 8 * (size_t)d; }
static size_t t_type_at(size_t rec, const char *name, int nd) { return t_ne_at(rec, name, nd); }
static size_t t_off_at(size_t rec, const char *name, int nd) { return t_ne_at(rec, name, nd) + 4; }

static int err_names_file(const char *err, const char *path) {
    size_t n = strlen(path);
    return strncmp(err, path, n) == 0 && err[n] == ':' && err[n + 1] == ' ' && strlen(err) > n + 8;
}

static void test_small_valid(small_file *s) {
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/valid.gguf", tmpdir);
    CHECK(gw_save(&s->b, path) == 0, "cannot write %s", path);
    gguf_file f;
    int rc = gguf_open(&f, path, err, sizeof err);
    CHECK(rc == 0, "valid small file rejected: %s", err);
    if (rc) return;
    CHECK(f.version == 3 && f.n_kv == 9 && f.n_tensors == 3 && f.alignment == 32, "header");
    CHECK(f.data_start == s->data_start, "data_start %zu want %zu", f.data_start, s->data_start);
    int64_t v = 0;
    float fl = 0;
    gguf_str str = {0};
    CHECK(gguf_get_int(&f, K_A, &v) == 0 && v == 7, "test.aaaa = %lld", (long long)v);
    CHECK(gguf_get_int(&f, K_B, &v) == 0 && v == 9, "test.bbbb = %lld", (long long)v);
    CHECK(gguf_get_f32(&f, "test.f32", &fl) == 0 && fl == 1.5f, "test.f32");
    CHECK(gguf_get_int(&f, "test.f32", &v) == -1, "int getter on f32 must fail");
    CHECK(gguf_get_int(&f, "test.u64", &v) == -1, "u64 2^63 must not fit int64");
    CHECK(gguf_get_int(&f, "no.such.key", &v) == -1, "missing key");
    CHECK(gguf_get_str(&f, "test.str", &str) == 0 && str.len == 5 && memcmp(str.ptr, "hello", 5) == 0, "test.str");
    CHECK(gguf_get_str(&f, K_A, &str) == -1, "str getter on u32 must fail");
    const gguf_kv *toks = gguf_find(&f, K_TOKS), *ints = gguf_find(&f, K_INTS);
    CHECK(toks && toks->type == GGUF_ARRAY && toks->arr_type == GGUF_STRING && toks->arr_n == 4, "tokens array");
    CHECK(ints && ints->arr_type == GGUF_I32 && ints->arr_n == 3, "ints array");
    if (toks && ints) {
        const char *want[] = {"a", "bc", "", "d\xc3\xa9"};
        for (int i = 3; i >= 0; i--)   /* backwards: no reliance on a forward walk */
            CHECK(gguf_arr_str(&f, toks, (uint64_t)i, &str) == 0 && str.len == strlen(want[i]) &&
                      memcmp(str.ptr, want[i], str.len) == 0, "tokens[%d]", i);
        CHECK(gguf_arr_str(&f, toks, 4, &str) == -1, "tokens[4] out of range must fail");
        CHECK(gguf_arr_str(&f, toks, UINT64_MAX, &str) == -1, "tokens[2^64-1] must fail");
        CHECK(gguf_arr_str(&f, ints, 0, &str) == -1, "string getter on an int array must fail");
        CHECK(gguf_arr_int(&f, ints, 1, &v) == 0 && v == -2, "ints[1] = %lld", (long long)v);
        CHECK(gguf_arr_int(&f, ints, 3, &v) == -1, "ints[3] out of range");
        CHECK(gguf_arr_int(&f, toks, 0, &v) == -1, "int getter on strings must fail");
        gguf_kv copy = *toks;
        CHECK(gguf_arr_str(&f, &copy, 0, &str) == -1, "a kv not of this file must be refused");
    }
    const char *names[] = {"w.q8", "w.f32", "w.q41"};
    const int types[] = {GGML_Q8_0, GGML_F32, GGML_Q4_1};
    const uint64_t offs[] = {0, 160, 192}, sizes[] = {136, 32, 60};
    for (int i = 0; i < 3; i++) {
        const gguf_tensor *t = gguf_tensor_find(&f, names[i]);
        CHECK(t && t->type == types[i] && t->offset == offs[i] && t->nbytes == sizes[i], "tensor %s", names[i]);
        if (t) CHECK(memcmp(t->data, s->data + offs[i], sizes[i]) == 0, "tensor %s data", names[i]);
    }
    const gguf_tensor *q8 = gguf_tensor_find(&f, "w.q8");
    CHECK(q8 && q8->n_dims == 2 && q8->ne[0] == 64 && q8->ne[1] == 2 && q8->ne[2] == 1 && q8->ne[3] == 1, "w.q8 ne");
    CHECK(gguf_tensor_find(&f, "w.q") == NULL && gguf_tensor_find(&f, "w.q8x") == NULL, "no prefix matches");
    gguf_close(&f);
    gguf_close(&f);   /* closing twice is harmless */
}

static void test_truncations(small_file *s) {
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/trunc.gguf", tmpdir);
    int bad = 0;
    for (size_t len = 0; len < s->b.n; len++) {
        if (gw_save_prefix(&s->b, len, path) != 0) { bad++; continue; }
        gguf_file f;
        err[0] = 0;
        int rc = gguf_open(&f, path, err, sizeof err);
        if (rc != -1 || !err_names_file(err, path)) {
            if (bad++ < 5) fprintf(stderr, "prefix %zu: rc %d, err '%s'\n", len, rc, err);
            if (rc == 0) gguf_close(&f);
        }
        CHECK(f.base == NULL && f.kv == NULL && f.tensors == NULL, "failed open must leave f zeroed");
    }
    CHECK(bad == 0, "%d of %zu truncated files were not rejected cleanly", bad, s->b.n);
    printf("  all %zu truncations of a %zu-byte file rejected\n", s->b.n, s->b.n);
}

static int n_hostile;
static void expect_fail(const gw_buf *b, const char *what, const char *substr) {
    char path[128], err[512] = "";
    snprintf(path, sizeof path, "%s/hostile%d.gguf", tmpdir, n_hostile++);
    if (gw_save(b, path) != 0) { CHECK(0, "cannot write %s", path); return; }
    gguf_file f;
    int rc = gguf_open(&f, path, err, sizeof err);
    CHECK(rc == -1, "%s: accepted", what);
    if (rc == 0) { gguf_close(&f); return; }
    CHECK(err_names_file(err, path) && strstr(err, substr), "%s: message '%s' should name the file and say '%s'",
          what, err, substr);
    if (getenv("KVBENCH_VERBOSE")) printf("  %-34s %s\n", what, err + strlen(path) + 2);
}

/* Patch a copy of the valid file, expect a clean failure mentioning substr. */
#define HOSTILE(what, substr, ...)                     \
    do {                                               \
        gw_buf b = gw_copy(&s->b);                     \
        __VA_ARGS__;                                   \
        expect_fail(&b, what, substr);                 \
        gw_free(&b);                                   \
    } while (0)

static void test_hostile(small_file *s) {
    const size_t T0 = s->t0, T1 = s->t1, T2 = s->t2;
    HOSTILE("bad magic", "bad magic", b.p[0] = 'X');
    HOSTILE("version 1", "version 1", gw_patch_u32(&b, 4, 1));
    HOSTILE("version 4", "version 4", gw_patch_u32(&b, 4, 4));
    HOSTILE("big-endian", "big-endian", gw_patch_u32(&b, 4, 0x03000000u));
    HOSTILE("huge tensor_count", "tensor_count", gw_patch_u64(&b, 8, 1ull << 40));
    HOSTILE("tensor_count 2^64-1", "tensor_count", gw_patch_u64(&b, 8, UINT64_MAX));
    HOSTILE("huge kv_count", "kv_count", gw_patch_u64(&b, 16, 1ull << 62));
    HOSTILE("kv_count 2^64-1", "kv_count", gw_patch_u64(&b, 16, UINT64_MAX));
    HOSTILE("kv_count one too many", "", gw_patch_u64(&b, 16, 10));
    HOSTILE("empty key", "empty key", gw_patch_u64(&b, s->kv_a, 0));
    HOSTILE("huge key length", "key length", gw_patch_u64(&b, s->kv_a, 1ull << 40));
    HOSTILE("key length past EOF", "remain", gw_patch_u64(&b, s->kv_a, 60000));
    HOSTILE("huge string length", "string value length", gw_patch_u64(&b, kv_val_at(s->kv_str, "test.str"), UINT64_MAX));
    HOSTILE("string past EOF", "string value", gw_patch_u64(&b, kv_val_at(s->kv_str, "test.str"), 1u << 20));
    HOSTILE("value type 13", "unknown value type 13", gw_patch_u32(&b, kv_type_at(s->kv_a, K_A), 13));
    HOSTILE("value type 2^32-1", "unknown value type", gw_patch_u32(&b, kv_type_at(s->kv_a, K_A), UINT32_MAX));
    HOSTILE("nested array", "nested array", gw_patch_u32(&b, kv_val_at(s->kv_ints, K_INTS), GGUF_ARRAY));
    HOSTILE("array element type 13", "unknown array element type",
            gw_patch_u32(&b, kv_val_at(s->kv_ints, K_INTS), 13));
    HOSTILE("array count 2^31", "array count", gw_patch_u64(&b, kv_val_at(s->kv_ints, K_INTS) + 4, 1ull << 31));
    HOSTILE("array count 2^64-1", "array count", gw_patch_u64(&b, kv_val_at(s->kv_ints, K_INTS) + 4, UINT64_MAX));
    HOSTILE("array count past EOF", "array of", gw_patch_u64(&b, kv_val_at(s->kv_ints, K_INTS) + 4, 1u << 29));
    HOSTILE("string array count past EOF", "array of",
            gw_patch_u64(&b, kv_val_at(s->kv_toks, K_TOKS) + 4, 1u << 28));
    HOSTILE("string element too long", "array string length", gw_patch_u64(&b, s->tok1, 1ull << 62));
    HOSTILE("string element past EOF", "array string", gw_patch_u64(&b, s->tok1, 100000));
    HOSTILE("duplicate key", "duplicate key", memcpy(b.p + s->kv_b + 8, K_A, strlen(K_A)));
    HOSTILE("alignment not u32", "must be u32", gw_patch_u32(&b, kv_type_at(s->kv_align, K_ALIGN), GGUF_I32));
    HOSTILE("alignment 0", "power of two", gw_patch_u32(&b, kv_val_at(s->kv_align, K_ALIGN), 0));
    HOSTILE("alignment 24", "power of two", gw_patch_u32(&b, kv_val_at(s->kv_align, K_ALIGN), 24));
    HOSTILE("alignment 64 (offset 160 off)", "alignment", gw_patch_u32(&b, kv_val_at(s->kv_align, K_ALIGN), 64));
    HOSTILE("empty tensor name", "empty tensor name", gw_patch_u64(&b, T1, 0));
    HOSTILE("tensor name 64 bytes", "tensor name is 64 bytes", gw_patch_u64(&b, T1, 64));
    HOSTILE("tensor name huge", "tensor name length", gw_patch_u64(&b, T1, UINT64_MAX));
    HOSTILE("tensor name with NUL", "NUL", b.p[T1 + 9] = 0);
    HOSTILE("duplicate tensor name", "duplicate tensor name", memcpy(b.p + T2 + 8, "w.f32", 5));
    HOSTILE("n_dims 0", "n_dims is 0", gw_patch_u32(&b, t_ndims_at(T0, "w.q8"), 0));
    HOSTILE("n_dims 5", "n_dims is 5", gw_patch_u32(&b, t_ndims_at(T0, "w.q8"), 5));
    HOSTILE("ne 0", "ne[1] = 0", gw_patch_u64(&b, t_ne_at(T0, "w.q8", 1), 0));
    HOSTILE("ne 2^63", "positive int64", gw_patch_u64(&b, t_ne_at(T0, "w.q8", 1), 1ull << 63));
    HOSTILE("ne 2^64-1", "positive int64", gw_patch_u64(&b, t_ne_at(T0, "w.q8", 0), UINT64_MAX));
    HOSTILE("ne product overflow", "overflows int64", gw_patch_u64(&b, t_ne_at(T0, "w.q8", 0), 1ull << 32);
            gw_patch_u64(&b, t_ne_at(T0, "w.q8", 1), 1ull << 32));
    HOSTILE("nbytes overflow size_t", "overflows size_t", gw_patch_u64(&b, t_ne_at(T1, "w.f32", 0), 1ull << 62));
    HOSTILE("retired type 4", "unsupported tensor type id 4", gw_patch_u32(&b, t_type_at(T0, "w.q8", 2), 4));
    HOSTILE("unsupported type Q2_K", "unsupported tensor type id 10", gw_patch_u32(&b, t_type_at(T0, "w.q8", 2), 10));
    HOSTILE("type 2^32-1", "unsupported tensor type", gw_patch_u32(&b, t_type_at(T0, "w.q8", 2), UINT32_MAX));
    HOSTILE("ne0 not a block multiple", "not a multiple of the Q8_0 block size",
            gw_patch_u64(&b, t_ne_at(T0, "w.q8", 0), 48));
    HOSTILE("misaligned offset", "not a multiple of the alignment", gw_patch_u64(&b, t_off_at(T1, "w.f32", 1), 161));
    HOSTILE("offset past EOF", "past the end", gw_patch_u64(&b, t_off_at(T1, "w.f32", 1), 1ull << 40));
    HOSTILE("offset 2^64-32", "past the end", gw_patch_u64(&b, t_off_at(T1, "w.f32", 1), UINT64_MAX - 31));
    HOSTILE("data runs past EOF", "runs past the end", gw_patch_u64(&b, t_off_at(T2, "w.q41", 2), 224));
    HOSTILE("tensor too big for file", "runs past the end", gw_patch_u64(&b, t_ne_at(T0, "w.q8", 1), 1000));
    HOSTILE("overlapping tensors", "overlaps", gw_patch_u64(&b, t_off_at(T1, "w.f32", 1), 128));

    /* Version 2 is layout-identical and accepted. */
    gw_buf b = gw_copy(&s->b);
    gw_patch_u32(&b, 4, 2);
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/v2.gguf", tmpdir);
    gguf_file f;
    CHECK(gw_save(&b, path) == 0 && gguf_open(&f, path, err, sizeof err) == 0 && f.version == 2, "v2 rejected: %s", err);
    if (f.base) gguf_close(&f);
    gw_free(&b);

    /* A file with no tensors needs no data section. */
    gw_header(&b, 3, 0, 1);
    gw_kv_u32(&b, "x.y", 1);
    snprintf(path, sizeof path, "%s/notensors.gguf", tmpdir);
    CHECK(gw_save(&b, path) == 0 && gguf_open(&f, path, err, sizeof err) == 0 && f.n_tensors == 0,
          "tensor-free file rejected: %s", err);
    if (f.base) gguf_close(&f);
    gw_free(&b);

    /* Missing file, a directory, an empty file. */
    snprintf(path, sizeof path, "%s/missing.gguf", tmpdir);
    CHECK(gguf_open(&f, path, err, sizeof err) == -1 && err_names_file(err, path) && strstr(err, "cannot open"),
          "missing file: %s", err);
    CHECK(gguf_open(&f, tmpdir, err, sizeof err) == -1 && err_names_file(err, tmpdir), "directory: %s", err);
    snprintf(path, sizeof path, "%s/empty.gguf", tmpdir);
    CHECK(gw_save(&b, path) == 0 && gguf_open(&f, path, err, sizeof err) == -1 && strstr(err, "too small"),
          "empty file: %s", err);
    printf("  %d hostile files rejected with a message naming the problem\n", n_hostile);
}

/* Random byte flips in the valid file: anything may happen except a crash or a leak;
 * whatever opens must have every tensor inside the mapping. Run under SAN=1. */
static void test_random_corruption(small_file *s, int rounds) {
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/fuzz.gguf", tmpdir);
    int opened = 0;
    for (int r = 0; r < rounds; r++) {
        gw_buf b = gw_copy(&s->b);
        int flips = test_int(1, 4);
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)test_int(0, (int)s->data_start - 1);
            b.p[at] = test_next() & 1 ? (uint8_t)test_next() : (uint8_t)(b.p[at] ^ (1u << test_int(0, 7)));
        }
        gguf_file f;
        if (gw_save(&b, path) == 0 && gguf_open(&f, path, err, sizeof err) == 0) {
            opened++;
            for (int64_t i = 0; i < f.n_tensors; i++) {
                const gguf_tensor *t = &f.tensors[i];
                CHECK((const uint8_t *)t->data >= f.base && t->nbytes <= f.size &&
                          (size_t)((const uint8_t *)t->data - f.base) <= f.size - t->nbytes,
                      "fuzz: tensor outside the file");
            }
            for (int64_t i = 0; i < f.n_kv; i++)
                if (f.kv[i].type == GGUF_ARRAY && f.kv[i].arr_type == GGUF_STRING) {
                    gguf_str str;
                    for (uint64_t j = 0; j < f.kv[i].arr_n; j++)
                        if (gguf_arr_str(&f, &f.kv[i], j, &str) == 0 && str.len)
                            CHECK((const uint8_t *)str.ptr + str.len <= f.base + f.size, "fuzz: string outside");
                }
            gguf_close(&f);
        } else {
            CHECK(err_names_file(err, path), "fuzz: message '%s' should name the file", err);
        }
        gw_free(&b);
    }
    printf("  %d random corruptions: %d still valid, the rest rejected\n", rounds, opened);
}

/* ---------- the real model ---------- */

static const char *model_path(char *buf, size_t cap) {
    const char *cache = getenv("KVBENCH_CACHE");
    const char *home = getenv("HOME");
    if (cache) snprintf(buf, cap, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
    else snprintf(buf, cap, "%s/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : ".");
    return buf;
}

static void check_tensor(const gguf_file *f, const char *name, int type, int64_t ne0, int64_t ne1) {
    const gguf_tensor *t = gguf_tensor_find(f, name);
    CHECK(t != NULL, "%s missing", name);
    if (!t) return;
    int nd = ne1 ? 2 : 1;
    CHECK(t->type == type && t->n_dims == nd && t->ne[0] == ne0 && t->ne[1] == (ne1 ? ne1 : 1),
          "%s: %s n_dims %d [%lld, %lld]", name, quant_name(t->type), t->n_dims, (long long)t->ne[0],
          (long long)t->ne[1]);
    CHECK(t->nbytes == quant_row_bytes(type, ne0) * (size_t)(ne1 ? ne1 : 1), "%s nbytes", name);
    CHECK(((uintptr_t)t->data & 31) == 0, "%s data not 32-byte aligned", name);
}

static void test_real_model(void) {
    char path[1024], err[512];
    model_path(path, sizeof path);
    if (access(path, R_OK) != 0) {
        printf("SKIP real-model checks: %s not found (run `make model`)\n", path);
        return;
    }
    gguf_file f;
    int rc = gguf_open(&f, path, err, sizeof err);
    CHECK(rc == 0, "real model rejected: %s", err);
    if (rc) return;
    /* Expected values: model-format.md sections 3.2 and 4 (SmolLM2-135M-Instruct). */
    CHECK(f.version == 3 && f.n_tensors == 272 && f.n_kv == 33, "header: v%u, %lld tensors, %lld kv", f.version,
          (long long)f.n_tensors, (long long)f.n_kv);
    CHECK(f.alignment == 32 && f.data_start % 32 == 0, "alignment %zu data_start %zu", f.alignment, f.data_start);
    gguf_str arch;
    CHECK(gguf_get_str(&f, "general.architecture", &arch) == 0 && arch.len == 5 && !memcmp(arch.ptr, "llama", 5),
          "architecture");
    struct { const char *key; int64_t want; } ints[] = {
        {"llama.block_count", 30},          {"llama.embedding_length", 576},
        {"llama.attention.head_count", 9},  {"llama.attention.head_count_kv", 3},
        {"llama.feed_forward_length", 1536}, {"llama.context_length", 8192},
        {"llama.vocab_size", 49152},        {"llama.rope.dimension_count", 64},
        {"tokenizer.ggml.bos_token_id", 1}, {"tokenizer.ggml.eos_token_id", 2},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t v = -1;
        CHECK(gguf_get_int(&f, ints[i].key, &v) == 0 && v == ints[i].want, "%s = %lld, want %lld", ints[i].key,
              (long long)v, (long long)ints[i].want);
    }
    float base = 0, eps = 0;
    CHECK(gguf_get_f32(&f, "llama.rope.freq_base", &base) == 0 && base == 100000.0f, "rope base %g", base);
    CHECK(gguf_get_f32(&f, "llama.attention.layer_norm_rms_epsilon", &eps) == 0 && eps == 1e-5f, "eps %g", eps);
    int add_bos = -1;
    CHECK(gguf_get_bool(&f, "tokenizer.ggml.add_bos_token", &add_bos) == 0 && add_bos == 0, "add_bos_token");
    const gguf_kv *toks = gguf_find(&f, "tokenizer.ggml.tokens");
    CHECK(toks && toks->type == GGUF_ARRAY && toks->arr_type == GGUF_STRING && toks->arr_n == 49152, "tokens array");
    if (toks) {
        const char *special[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
        gguf_str s;
        for (int i = 0; i < 3; i++)
            CHECK(gguf_arr_str(&f, toks, (uint64_t)i, &s) == 0 && s.len == strlen(special[i]) &&
                      !memcmp(s.ptr, special[i], s.len), "token %d", i);
        CHECK(gguf_arr_str(&f, toks, 49151, &s) == 0 && gguf_arr_str(&f, toks, 49152, &s) == -1, "token bounds");
    }
    check_tensor(&f, "token_embd.weight", GGML_Q8_0, 576, 49152);
    check_tensor(&f, "output_norm.weight", GGML_F32, 576, 0);
    CHECK(gguf_tensor_find(&f, "output.weight") == NULL, "tied embeddings: no output.weight");
    for (int l = 0; l < 30; l++) {
        char n[64];
        struct { const char *s; int type; int64_t ne0, ne1; } w[] = {
            {"attn_q", GGML_Q4_1, 576, 576},    {"attn_k", GGML_Q4_1, 576, 192},
            {"attn_v", GGML_Q4_1, 576, 192},    {"attn_output", GGML_Q4_1, 576, 576},
            {"ffn_gate", GGML_Q4_1, 576, 1536}, {"ffn_up", GGML_Q4_1, 576, 1536},
            {"ffn_down", GGML_Q4_1, 1536, 576}, {"attn_norm", GGML_F32, 576, 0},
            {"ffn_norm", GGML_F32, 576, 0},
        };
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
            snprintf(n, sizeof n, "blk.%d.%s.weight", l, w[i].s);
            check_tensor(&f, n, w[i].type, w[i].ne0, w[i].ne1);
        }
    }
    /* quant_dot on real rows against the float64 reference decoder */
    const char *rows_of[] = {"blk.7.attn_q.weight", "token_embd.weight", "blk.29.ffn_down.weight"};
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        const gguf_tensor *t = gguf_tensor_find(&f, rows_of[k]);
        if (!t) continue;
        int block, bytes;
        quant_info(t->type, &block, &bytes);
        size_t rb = quant_row_bytes(t->type, t->ne[0]);
        float *x = malloc((size_t)t->ne[0] * sizeof *x);
        test_fill(x, (size_t)t->ne[0], 1.0f);
        for (int rep = 0; rep < 16; rep++) {
            int64_t r = (int64_t)(test_unif() * (double)t->ne[1]);
            const uint8_t *row = (const uint8_t *)t->data + (size_t)r * rb;
            double d = 0, mag = 0;
            for (int64_t i = 0; i < t->ne[0]; i++) {
                double w = ref_elem(t->type, row + (i / block) * bytes, (int)(i % block));
                d += w * x[i];
                mag += fabs(w * x[i]);
            }
            double e = fabs(quant_dot(t->type, row, x, t->ne[0]) - d) / mag;
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
        free(x);
    }
    CHECK(worst <= 1e-5, "real rows: quant_dot rel err %.3g", worst);
    printf("  real model: 272 tensors, 33 kv, shapes and hyperparameters as documented; dot rel err %.2g\n", worst);
    gguf_close(&f);
}

/* ---------- modes used by tests/gguf_ref.py ---------- */

static void hex(const uint8_t *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) printf("%02x", p[i]);
}

static int dump(const char *path) {
    gguf_file f;
    char err[512];
    if (gguf_open(&f, path, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    printf("version %u\nn_kv %lld\nn_tensors %lld\nalignment %zu\ndata_start %zu\n", f.version, (long long)f.n_kv,
           (long long)f.n_tensors, f.alignment, f.data_start);
    for (int64_t i = 0; i < f.n_kv; i++) {
        const gguf_kv *kv = &f.kv[i];
        printf("kv %.*s %s ", (int)kv->key.len, kv->key.ptr, gguf_vtype_name(kv->type));
        if (kv->type == GGUF_STRING) {
            uint64_t len;
            memcpy(&len, kv->data, 8);
            hex(kv->data + 8, len);
        } else if (kv->type != GGUF_ARRAY) {
            hex(kv->data, gguf_vtype_size(kv->type));
        } else {
            /* the header, then one line per element: strings as their bytes, numbers raw */
            printf("%s %llu", gguf_vtype_name(kv->arr_type), (unsigned long long)kv->arr_n);
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                printf("\n  [%llu] ", (unsigned long long)j);
                if (kv->arr_type == GGUF_STRING) {
                    gguf_str s;
                    gguf_arr_str(&f, kv, j, &s);
                    hex((const uint8_t *)s.ptr, s.len);
                } else {
                    size_t n = gguf_vtype_size(kv->arr_type);
                    hex(kv->data + j * n, n);
                }
            }
        }
        printf("\n");
    }
    for (int64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        printf("tensor %s %s %d %lld %lld %lld %lld %llu %zu\n", t->name, quant_name(t->type), t->n_dims,
               (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
               (unsigned long long)t->offset, t->nbytes);
    }
    gguf_close(&f);
    return 0;
}

static const gguf_tensor *open_tensor(gguf_file *f, const char *path, const char *name) {
    char err[512];
    if (gguf_open(f, path, err, sizeof err)) { fprintf(stderr, "%s\n", err); return NULL; }
    const gguf_tensor *t = gguf_tensor_find(f, name);
    if (!t) { fprintf(stderr, "%s: no tensor '%s'\n", path, name); gguf_close(f); }
    return t;
}

static int dequant_rows(const char *path, const char *name, const char *r0s, const char *nrs) {
    gguf_file f;
    const gguf_tensor *t = open_tensor(&f, path, name);
    if (!t) return 1;
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3], r0 = atoll(r0s), nr = atoll(nrs);
    if (r0 < 0 || nr < 0 || r0 > rows || nr > rows - r0) {
        fprintf(stderr, "--dequant: rows [%lld, +%lld) outside %s's %lld rows\n", (long long)r0, (long long)nr, name,
                (long long)rows);
        gguf_close(&f);
        return 1;
    }
    size_t rb = quant_row_bytes(t->type, t->ne[0]);
    float *y = malloc((size_t)t->ne[0] * sizeof *y);
    for (int64_t r = r0; r < r0 + nr; r++) {
        dequant_row(t->type, (const uint8_t *)t->data + (size_t)r * rb, y, t->ne[0]);
        fwrite(y, sizeof *y, (size_t)t->ne[0], stdout);
    }
    free(y);
    gguf_close(&f);
    return 0;
}

static int dot_rows(const char *path, const char *name, const char *xfile) {
    gguf_file f;
    const gguf_tensor *t = open_tensor(&f, path, name);
    if (!t) return 1;
    float *x = malloc((size_t)t->ne[0] * sizeof *x);
    FILE *fp = fopen(xfile, "rb");
    if (!fp || fread(x, sizeof *x, (size_t)t->ne[0], fp) != (size_t)t->ne[0]) {
        fprintf(stderr, "--dot: %s: cannot read %lld floats\n", xfile, (long long)t->ne[0]);
        if (fp) fclose(fp);
        free(x);
        gguf_close(&f);
        return 1;
    }
    fclose(fp);
    size_t rb = quant_row_bytes(t->type, t->ne[0]);
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    for (int64_t r = 0; r < rows; r++) {
        float d = quant_dot(t->type, (const uint8_t *)t->data + (size_t)r * rb, x, t->ne[0]);
        fwrite(&d, sizeof d, 1, stdout);
    }
    free(x);
    gguf_close(&f);
    return 0;
}

static void usage(void) {
    printf("usage: test_gguf                 run the GGUF and quant tests\n"
           "       test_gguf --dump PATH     print keys, values and tensor infos\n"
           "       test_gguf --dequant PATH TENSOR ROW0 NROWS   rows as raw f32 on stdout\n"
           "       test_gguf --dot PATH TENSOR XFILE            quant_dot of each row with x\n"
           "       test_gguf --open PATH     open, print the error if any\n"
           "env: KVBENCH_TEST_SEED (replay), KVBENCH_CACHE (model dir), KVBENCH_VERBOSE,\n"
           "     KVBENCH_FUZZ_ROUNDS (random corruptions, default 3000)\n");
}

static void remove_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
    if (rmdir(tmpdir) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) { usage(); return 0; }
        if (!strcmp(argv[1], "--dump") && argc == 3) return dump(argv[2]);
        if (!strcmp(argv[1], "--dequant") && argc == 6) return dequant_rows(argv[2], argv[3], argv[4], argv[5]);
        if (!strcmp(argv[1], "--dot") && argc == 5) return dot_rows(argv[2], argv[3], argv[4]);
        if (!strcmp(argv[1], "--open") && argc == 3) {
            gguf_file f;
            char err[512];
            if (gguf_open(&f, argv[2], err, sizeof err)) { printf("%s\n", err); return 1; }
            gguf_close(&f);
            printf("ok\n");
            return 0;
        }
        usage();
        return 2;
    }
    test_seed();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kvbench_gguf_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }

    test_type_table();
    test_conversions();
    test_dequant_and_dot();
    small_file s;
    build_small(&s);
    test_small_valid(&s);
    test_truncations(&s);
    test_hostile(&s);
    const char *fr = getenv("KVBENCH_FUZZ_ROUNDS");
    test_random_corruption(&s, fr ? atoi(fr) : 3000);
    gw_free(&s.b);
    test_real_model();
    remove_tmpdir();
    return check_done("test_gguf");
}
