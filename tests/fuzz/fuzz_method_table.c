/* Fuzz target: a plugin's method table and what its members return, read from the
 * fuzzer's bytes, through the checks kvbench makes of a plugin (issue 36):
 *   - the table's ABI version, size, flags and name through kv_method_resolve (the copy
 *     must never read past the table, whatever size it claims);
 *   - rows() (counts, positions, the count of positions written), memory() (every
 *     field) and key_channels() (the count and the indices, version 5) through
 *     kv_budget_check under a setup drawn from the bytes;
 *   - kept positions given to cs_load, decoded tokens through cs_append_decoded under
 *     either rule, with and without scores (cs_argmin);
 *   - the paper's "uncapped" setting and the params through kv_runs_uncapped.
 * The fake method writes at most `cap` positions (a plugin writing past the buffer it is
 * given corrupts its own process, which no check can stop) but may report any count. */
#include "fuzz.h"
#include "../../methods/budget_check.h"
#include "../../methods/cacheset.h"

typedef struct {
    const uint8_t *p;
    size_t n;
} bytes;

static uint32_t take(bytes *b, int k) {   /* k little-endian bytes, 0 past the end */
    uint32_t v = 0;
    for (int i = 0; i < k; i++) v |= (uint32_t)(b->n ? (b->n--, *b->p++) : 0) << (8 * i);
    return v;
}

/* The fake method's state: what its members will report. */
struct kv_state {
    bytes rows;        /* per rows() call: count (4 bytes), npos (4), then positions (2 each) */
    kv_mem mem;
};

static int fake_rows(const kv_state *st, int layer, int kv_head, int32_t *pos, int cap, int *npos) {
    (void)layer, (void)kv_head;
    bytes *b = (bytes *)&((kv_state *)st)->rows;
    int r = (int32_t)take(b, 4), np = (int32_t)take(b, 4);
    if (pos) {
        int w = np < 0 ? 0 : np < cap ? np : cap;
        for (int i = 0; i < w; i++) pos[i] = (int16_t)take(b, 2);
        *npos = np;
    }
    return r;
}
static void fake_memory(const kv_state *st, kv_mem *out) { *out = st->mem; }
/* any count; indices into chan up to the smallest head_dim the setups draw (4) */
static int fake_key_channels(const kv_state *st, int layer, int kv_head, int32_t *chan) {
    (void)layer, (void)kv_head;
    bytes *b = (bytes *)&((kv_state *)st)->rows;
    int kc = (int8_t)take(b, 1);
    for (int i = 0; chan && i < kc && i < 4; i++) chan[i] = (int8_t)take(b, 1);
    return kc;
}
static kv_state *fake_init(const kv_setup *s, char *err, size_t len) { return (void)s, (void)err, (void)len, NULL; }
static int fake_ingest(kv_state *st, const kv_prefill *p, char *err, size_t len) {
    return (void)st, (void)p, (void)err, (void)len, 0;
}
static void fake_append(kv_state *st, int l, const float *k, const float *v, const kv_token *t) {
    (void)st, (void)l, (void)k, (void)v, (void)t;
}
static void fake_attend(kv_state *st, int l, const float *q, float *out) { (void)st, (void)l, (void)q, (void)out; }
static void fake_free(kv_state *st) { (void)st; }

static const kv_param params[] = {{"uncapped", "0", "run past the budget"}, {NULL, NULL, NULL}};
static const char *const names[] = {"fz", "", "Bad Name", "fz-2", NULL};
static const char *const settings[] = {"uncapped=1", "uncapped=", "=1", "uncapped", "nope=1", NULL};
static const char *const param_text[] = {NULL, "uncapped=1", "uncapped=0", "uncapped=1.0", "uncapped=x", "other=1"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    bytes b = {data, n};
    /* the table, in a buffer as large as this kvbench's table (what a plugin's static table is) */
    static kv_method table;
    kv_method resolved;
    memset(&table, 0, sizeof table);
    kv_paper paper = {0};
    paper.uncapped = settings[take(&b, 1) % 6];
    table.abi = (int)(take(&b, 1) % 5) - 1;
    uint32_t sz = take(&b, 2);
    table.size = sz & 0x8000 ? sz & 0x7fff : (sz & 1 ? (unsigned)KV_METHOD_SIZE_V1 : (unsigned)sizeof(kv_method));
    table.name = names[take(&b, 1) % 5];
    uint32_t flags = take(&b, 1);
    table.keeps_all = flags & 1, table.evicts_decoding = (flags >> 1) & 1, table.layer_budgets = (flags >> 2) & 1;
    if (flags & 16) table.abi = KV_METHOD_ABI;   /* this kvbench's version, with its helpers version or another */
    table.helpers = flags & 32 ? KV_HELPERS_VERSION + 1 : KV_HELPERS_VERSION;
    table.params = params;
    table.init = fake_init, table.ingest = fake_ingest, table.append = fake_append, table.attend = fake_attend;
    table.memory = fake_memory, table.rows = fake_rows, table.free = fake_free;
    if (flags & 8) table.rows = NULL;
    if (flags & 64) table.key_channels = fake_key_channels;
    table.paper = &paper;
    char err[512];
    if (kv_method_resolve(&table, &resolved, err, sizeof err)) return 0;
    if (table.size < sizeof table) resolved.paper = &paper;   /* a version-1 table has none: give it one */

    /* a setup */
    uint32_t sh = take(&b, 4);
    kv_setup s = {.n_layers = 1 + sh % 3, .n_kv_heads = 1 + (sh >> 2) % 2, .head_dim = 4 << ((sh >> 3) % 2),
                  .n_prompt = 1 + (sh >> 4) % 64, .max_decode = 16, .kv_type = (sh >> 10) % 3,
                  .decode_rule = (sh >> 12) & 1, .params = param_text[(sh >> 13) % 6]};
    s.n_heads = s.n_kv_heads * (1 + (sh >> 16) % 3);
    if (sh >> 18 & 1) s.budget_tokens = 1 + (sh >> 19) % 80;
    else s.budget_frac = ((sh >> 19) % 100 + 1) / 100.0;
    int decoded = (int)(take(&b, 1) % 17);

    /* the fake state: memory() from the bytes, rows() from the rest */
    kv_state st;
    st.mem.fast_bytes = take(&b, 4), st.mem.fast_peak = take(&b, 4), st.mem.fast_aux_bytes = take(&b, 2);
    st.mem.slow_bytes = take(&b, 2), st.mem.slow_peak = take(&b, 2), st.mem.fast_tokens = (int32_t)take(&b, 4);
    if (take(&b, 1) & 1) {   /* the memory a correct method would report for its rows, so the row checks run */
        st.mem.fast_aux_bytes = 0;
        st.mem.fast_peak = st.mem.fast_bytes = (size_t)1 << 40;
        st.mem.slow_peak = st.mem.slow_bytes = 0;
    }
    st.rows = b;
    (void)kv_runs_uncapped(&resolved, &s);
    (void)kv_row_limit(&resolved, &s, decoded);
    (void)kv_budget_check(&resolved, &st, &s, decoded, err, sizeof err);

    /* the cache set a plugin builds on: positions to keep, then decoded tokens */
    b = st.rows;   /* what rows() left */
    kv_cacheset c;
    uint32_t scored = take(&b, 1) & 1;
    if (cs_init(&c, &s, (int)scored, 4, "fz", err, sizeof err)) return 0;
    size_t rowsz = (size_t)s.n_kv_heads * s.n_prompt * s.head_dim;
    float *K = calloc(rowsz, sizeof *K), *V = calloc(rowsz, sizeof *V), kv[2 * 2 * 8] = {0};
    double *score = calloc((size_t)s.n_prompt, sizeof *score);
    int32_t keep[96];
    for (int l = 0; l < s.n_layers; l++) {
        kv_prefill p = {.layer = l, .n = s.n_prompt, .K = K, .V = V, .kv_stride = (size_t)s.n_prompt * s.head_dim};
        if (cs_begin_layer(&c, &p, "fz", err, sizeof err)) break;
        for (int j = 0; j < s.n_kv_heads; j++) {
            int nk = (int)(take(&b, 1) % 97) - 1;
            for (int i = 0; i < nk && i < 96; i++) keep[i] = (int16_t)take(&b, 2);
            (void)cs_load(&c, &p, j, keep, nk > 96 ? 96 : nk, (take(&b, 1) & 1) ? score : NULL);
        }
    }
    for (int t = 0; t < decoded; t++)
        for (int l = 0; l < s.n_layers; l++)
            cs_append_decoded(&c, l, kv, kv + 16, s.n_prompt + t, c.budget);
    kv_mem m;
    cs_memory(&c, &m);
    free(K), free(V), free(score);
    cs_free(&c);
    return 0;
}
