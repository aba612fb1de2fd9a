/* The conformance checks of one method (conformance.h), run by tests/test_conformance.c
 * on every registered method and by `kvbench conformance` on any (plugins included),
 * under both decode rules and every K/V element type (f32, f16, bf16), on random prompts
 * and budgets:
 *   - fast-tier rows (kv_method.rows) within the rule after compression and after every
 *     decode step: hold, <= B per layer and kv head; append, <= B + the tokens decoded so
 *     far; methods that evict while decoding (evicts_decoding) <= B under both; FullKV
 *     (keeps_all) everything; per-layer budgets (layer_budgets) hold on the sum over layers,
 *     head-adaptive ones (head_budgets) on each layer's sum over kv heads;
 *   - append: the full-resolution prompt rows kept after compression are never dropped and
 *     every decoded token stays (except evicts_decoding methods);
 *   - memory(): fast_tokens is the sum of the resident rows, fast_bytes = rows x row bytes
 *     (2 d x the type's bytes; a prompt row of a method that prunes key channels,
 *     kv_method.key_channels, key_channels + d) + fast_aux_bytes, peaks >= current;
 *   - the rows kept by compression (chosen from the prefill's f32 statistics) are the same
 *     positions under every element type;
 *   - attend() writes finite outputs over poisoned (NaN) buffers;
 *   - attention itself: for a layer whose rows are all at full resolution (rows() reports
 *     as many positions as fast-tier rows, nothing on the slow tier), every query head's
 *     output equals a float64 softmax over the positions rows() reported before attend,
 *     with the K/V rounded to the element type (a prompt row's key over the channels
 *     key_channels reports, where the method prunes some), in every GQA group (the first scenario
 *     of each rule has 2 kv heads of 2 or 3 query heads each, so a wrong group slice shows);
 *   - what rows() and memory() report is checked by kv_budget_check (budget_check.h), the
 *     same function the drivers call: positions in range, ascending, none twice;
 *   - determinism: the same inputs twice give bit-equal outputs and memory;
 *   - init refuses, with one line naming the method, a non-numeric value for every declared
 *     parameter and a value outside every declared range.
 * The prompt statistics are real: column mass and window rows come from causal softmax
 * attention of random queries over the random keys (float64).
 *
 * Each scenario is announced on the output before it runs, and runs in a child process
 * (fork): a method that crashes is named with the rule, the scenario and the seed, and the
 * checks go on with the next scenario. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "budget_check.h"
#include "conformance.h"

/* The run in progress: counts, the failure stream and the generator. */
static struct {
    long checks, failed;
    FILE *log;
    uint64_t rng;
} C;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        C.checks++;                                                                      \
        if (!(cond)) {                                                                   \
            C.failed++;                                                                  \
            if (C.log) fprintf(C.log, "conformance: " __VA_ARGS__), fputc('\n', C.log), fflush(C.log); \
        }                                                                                \
    } while (0)

/* xorshift64* (as tests/check.h): the same seed, the same scenarios */
static uint64_t next_u64(void) {
    C.rng ^= C.rng >> 12;
    C.rng ^= C.rng << 25;
    C.rng ^= C.rng >> 27;
    return C.rng * 2685821657736338717ULL;
}
static double test_unif(void) { return (next_u64() >> 11) * (1.0 / 9007199254740992.0); }
static int test_int(int lo, int hi) { return lo + (int)(test_unif() * (hi - lo + 1)); }
static float test_normal(void) {
    double u = test_unif() + 1e-12, v = test_unif();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
static void test_fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * test_normal();
}
static void test_poison(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

typedef struct {
    int L, H, Hkv, g, d, n, T, win;
    double frac;
    int tokens;
    float *K, *V;          /* [L][Hkv][n + T][d] */
    float *Qd;             /* [T][L][H][d] decode queries */
    float *cm, *wp;        /* [L][H][n], [L][H][win][n] */
    float *surp;           /* [n + T] */
    uint8_t *sent;         /* [n + T] */
    float *Qp;             /* [L][H][n][d] the prompt's queries (kv_prefill.Q: taken as pre-RoPE) */
    float *Wo;             /* [L][H*d][H*d] an output projection (kv_prefill.Wo, embd = H*d) */
    double inv_freq[64];   /* the rope (kv_prefill.rope): base 10000 over all d channels */
    kv_rope rope;
} scen;

static float *krow(const scen *s, int l, int j, int t) { return s->K + (((size_t)l * s->Hkv + j) * (s->n + s->T) + t) * s->d; }
static float *vrow(const scen *s, int l, int j, int t) { return s->V + (((size_t)l * s->Hkv + j) * (s->n + s->T) + t) * s->d; }

/* The scenario's shape, the first draws from its seed (so the parent can announce it
 * without building it). gqa: 2 kv heads of 2 or 3 query heads each. */
static void draw_shape(scen *s, int gqa) {
    memset(s, 0, sizeof *s);
    s->g = gqa ? test_int(2, 3) : test_int(1, 3);
    s->Hkv = gqa ? 2 : test_int(1, 2);
    s->H = s->g * s->Hkv;
    s->L = test_int(1, 3);
    s->d = 8 << test_int(0, 2);
    s->n = test_int(80, 360);
    s->T = test_int(4, 40);
    s->win = 40;
    if (test_int(0, 1)) s->frac = 0.15 + 0.35 * test_unif(), s->tokens = 0;
    else s->frac = 0, s->tokens = test_int(s->n / 6, s->n / 2);
}

static void make_scen(scen *s, int gqa) {
    draw_shape(s, gqa);
    size_t N = (size_t)s->n + s->T;
    s->K = malloc((size_t)s->L * s->Hkv * N * s->d * sizeof(float));
    s->V = malloc((size_t)s->L * s->Hkv * N * s->d * sizeof(float));
    s->Qd = malloc((size_t)s->T * s->L * s->H * s->d * sizeof(float));
    s->cm = calloc((size_t)s->L * s->H * s->n, sizeof(float));
    s->wp = calloc((size_t)s->L * s->H * s->win * s->n, sizeof(float));
    s->surp = malloc(N * sizeof(float));
    s->sent = malloc(N);
    test_fill(s->K, (size_t)s->L * s->Hkv * N * s->d, 1.0f);
    test_fill(s->V, (size_t)s->L * s->Hkv * N * s->d, 1.0f);
    test_fill(s->Qd, (size_t)s->T * s->L * s->H * s->d, 1.0f);
    for (size_t t = 0; t < N; t++) {
        s->surp[t] = t ? (float)(fabs(test_normal()) * 2 + (test_unif() < 0.05 ? 6 : 0)) : 0;
        s->sent[t] = test_unif() < 0.08;
    }
    /* prompt statistics from causal softmax attention of random queries, in double; the
     * queries are kept (kv_prefill.Q) */
    s->Qp = malloc((size_t)s->L * s->H * s->n * s->d * sizeof(float));
    double *p = malloc((size_t)s->n * sizeof *p);
    for (int l = 0; l < s->L; l++)
        for (int h = 0; h < s->H; h++)
            for (int i = 0; i < s->n; i++) {
                float *q = s->Qp + (((size_t)l * s->H + h) * s->n + i) * s->d;
                test_fill(q, (size_t)s->d, 1.0f);
                double mx = -INFINITY, sum = 0;
                for (int t = 0; t <= i; t++) {
                    const float *k = krow(s, l, h / s->g, t);
                    double dot = 0;
                    for (int c = 0; c < s->d; c++) dot += (double)q[c] * k[c];
                    p[t] = dot / sqrt((double)s->d);
                    if (p[t] > mx) mx = p[t];
                }
                for (int t = 0; t <= i; t++) sum += (p[t] = exp(p[t] - mx));
                int w = i - (s->n - s->win);
                for (int t = 0; t <= i; t++) {
                    p[t] /= sum;
                    s->cm[((size_t)l * s->H + h) * s->n + t] += (float)p[t];
                    if (w >= 0) s->wp[(((size_t)l * s->H + h) * s->win + w) * s->n + t] = (float)p[t];
                }
            }
    free(p);
    /* drawn last, so every other draw of the scenario is what it was before door version 4 */
    size_t E = (size_t)s->H * s->d;
    s->Wo = malloc((size_t)s->L * E * E * sizeof(float));
    test_fill(s->Wo, (size_t)s->L * E * E, 1.0f);
    for (int i = 0; i < s->d / 2; i++) s->inv_freq[i] = pow(10000.0, -2.0 * i / s->d);
    s->rope = (kv_rope){.n_rot = s->d, .neox = s->L % 2, .inv_freq = s->inv_freq, .mscale = 1};
}

static void free_scen(scen *s) {
    free(s->K), free(s->V), free(s->Qd), free(s->cm), free(s->wp), free(s->surp), free(s->sent);
    free(s->Qp), free(s->Wo);
}

/* What one run produced, for the determinism check. */
typedef struct {
    float *out;            /* [T][L][H][d] */
    kv_mem mem;
    int ok;                /* 0: init or ingest refused (infeasible for this setup) */
    int violated;          /* a check failed: the run stopped early, its outputs are not comparable */
    int32_t *kept;         /* [L][Hkv][n + T] positions kept by compression, -1 after the last */
    long attn_checked;     /* (step, layer) pairs whose outputs were compared with the reference */
} trace;

static int contains(const int32_t *pos, int n, int32_t v) {
    for (int i = 0; i < n; i++)
        if (pos[i] == v) return 1;
    return 0;
}

/* Fills apos[j] (cap each) with the positions rows() reports for every kv head of layer l,
 * and returns 1 when all of them are full-resolution rows attend() reads, in range and
 * ascending (then the reference attention is defined), else 0. */
static int full_rows(const kv_method *m, const kv_state *st, const scen *s, int l, int end, int32_t *apos,
                     int *anpos, int cap) {
    kv_mem mem;
    memset(&mem, 0, sizeof mem);
    m->memory(st, &mem);
    if (mem.slow_bytes) return 0;   /* a slow tier: what attend reads is the method's choice */
    for (int j = 0; j < s->Hkv; j++) {
        int np = -1, r = m->rows(st, l, j, apos + (size_t)j * cap, cap, &np);
        if (r < 1 || np != r || np > cap) return 0;
        const int32_t *p = apos + (size_t)j * cap;
        for (int i = 0; i < np; i++)
            if (p[i] < 0 || p[i] >= end || (i && p[i] <= p[i - 1])) return 0;   /* kv_budget_check names it */
        anpos[j] = np;
    }
    return 1;
}

/* Largest |out - reference| over the layer's query heads, the reference a float64
 * softmax over kv head h/g's reported positions, K and V rounded to the element type; a
 * prompt row's key reads only the channels kept[j][c] marks (key_channels). */
static double attention_error(const scen *s, int type, int l, int step, const int32_t *apos, const int *anpos,
                              int cap, const uint8_t *kept, const float *out, int *worst_head) {
    const int d = s->d;
    double worst = 0, *w = malloc((size_t)cap * sizeof *w), *acc = malloc((size_t)d * sizeof *acc);
    *worst_head = 0;
    for (int h = 0; h < s->H; h++) {
        int j = h / s->g, np = anpos[j];
        const int32_t *p = apos + (size_t)j * cap;
        const float *q = s->Qd + (((size_t)step * s->L + l) * s->H + h) * d;
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < np; i++) {
            const float *k = krow(s, l, j, p[i]);
            const uint8_t *kc = kept + (size_t)j * d;
            double dot = 0;
            for (int c = 0; c < d; c++)
                if (p[i] >= s->n || kc[c]) dot += (double)q[c] * kb_kv_round(type, k[c]);
            w[i] = dot / sqrt((double)d);
            if (w[i] > mx) mx = w[i];
        }
        for (int c = 0; c < d; c++) acc[c] = 0;
        for (int i = 0; i < np; i++) {
            double e = exp(w[i] - mx);
            sum += e;
            const float *v = vrow(s, l, j, p[i]);
            for (int c = 0; c < d; c++) acc[c] += e * kb_kv_round(type, v[c]);
        }
        for (int c = 0; c < d; c++) {
            double ref = acc[c] / sum, e = fabs(out[(size_t)h * d + c] - ref) / (1 + fabs(ref));
            if (!(e <= worst)) worst = e, *worst_head = h;   /* NaN counts as worst */
        }
    }
    free(w), free(acc);
    return worst;
}

/* Runs the method over the scenario under the rule, checking as it goes. */
static void run(const kv_method *m, const char *params, const scen *s, int rule, int type, trace *tr,
                const char *tag) {
    kv_setup su = {.n_layers = s->L, .n_heads = s->H, .n_kv_heads = s->Hkv, .head_dim = s->d, .n_prompt = s->n,
                   .max_decode = s->T, .budget_frac = s->frac, .budget_tokens = s->tokens, .kv_type = type,
                   .params = params, .decode_rule = rule};
    int L = s->L, Hkv = s->Hkv, H = s->H, d = s->d, cap = s->n + s->T;
    char err[512] = "";
    memset(tr, 0, sizeof *tr);
    kv_state *st = m->init(&su, err, sizeof err);
    if (!st) {
        CHECK(strncmp(err, "infeasible", 10) == 0 || strstr(err, "infeasible"), "%s: init refused a valid setup: %s",
              tag, err);
        return;
    }
    kv_needs nd = {0};
    m->needs(&su, &nd);
    CHECK(nd.window <= s->win, "%s: asks for %d window rows (test has %d)", tag, nd.window, s->win);
    for (int l = 0; l < L; l++) {
        kv_prefill p = {.layer = l, .n = s->n, .K = krow(s, l, 0, 0), .V = vrow(s, l, 0, 0),
                        .kv_stride = (size_t)(s->n + s->T) * d,
                        .col_mass = nd.col_mass ? s->cm + (size_t)l * H * s->n : NULL,
                        .win_probs = nd.window > 0 ? s->wp + (size_t)l * H * s->win * s->n : NULL,
                        .win = nd.window > 0 ? s->win : 0, .surprisal = s->surp, .sent_end = s->sent};
        if (nd.queries > 0) {   /* door version 4: the last min(queries, n) prompt queries */
            p.q_rows = nd.queries < s->n ? nd.queries : s->n;
            p.Q = s->Qp + (size_t)l * H * s->n * d + (size_t)(s->n - p.q_rows) * d;
            p.q_stride = (size_t)s->n * d;
            p.rope = &s->rope;
        }
        if (nd.wo) p.Wo = s->Wo + (size_t)l * H * d * H * d, p.embd = H * d;
        if (m->ingest(st, &p, err, sizeof err)) {
            CHECK(strstr(err, "infeasible") != NULL, "%s: ingest layer %d: %s", tag, l, err);
            m->free(st);
            return;
        }
    }
    tr->ok = 1;
    tr->out = malloc((size_t)s->T * L * H * d * sizeof(float));
    tr->kept = malloc((size_t)L * Hkv * cap * sizeof *tr->kept);
    int32_t *pos = malloc((size_t)cap * sizeof *pos), *prompt = malloc((size_t)L * Hkv * cap * sizeof *prompt);
    int32_t *apos = malloc((size_t)Hkv * cap * sizeof *apos);
    int *nprompt = calloc((size_t)L * Hkv, sizeof *nprompt), *anpos = calloc((size_t)Hkv, sizeof *anpos), npos = 0;
    float *k = malloc((size_t)Hkv * d * sizeof *k), *v = malloc((size_t)Hkv * d * sizeof *v);
    uint8_t *kept = malloc((size_t)Hkv * d);
    int32_t *chan = malloc((size_t)d * sizeof *chan);
    int evicts = m->evicts_decoding || rule == KV_DECODE_HOLD, bad = 0;
    for (int step = -1; step < s->T && !bad; step++) {
        for (int l = 0; l < L && step >= 0 && !bad; l++) {
            int t = s->n + step;
            for (int j = 0; j < Hkv; j++) {
                memcpy(k + (size_t)j * d, krow(s, l, j, t), (size_t)d * sizeof *k);
                memcpy(v + (size_t)j * d, vrow(s, l, j, t), (size_t)d * sizeof *v);
            }
            kv_token tok = {.pos = t, .surprisal = s->surp[t], .sent_end = s->sent[t]};
            m->append(st, l, k, v, &tok);
            /* what attend will read: the rows held now (attend may evict after reading) */
            int full = full_rows(m, st, s, l, t + 1, apos, anpos, cap);
            for (int j = 0; j < Hkv; j++) {   /* the key channels prompt rows keep (version 5) */
                int kc = m->key_channels(st, l, j, chan);
                memset(kept + (size_t)j * d, kc < 0, (size_t)d);
                for (int i = 0; i < kc && i < d; i++)
                    if (chan[i] >= 0 && chan[i] < d) kept[(size_t)j * d + chan[i]] = 1;
            }
            float *out = tr->out + ((size_t)step * L + l) * H * d;
            test_poison(out, (size_t)H * d);
            m->attend(st, l, s->Qd + ((size_t)step * L + l) * H * d, out);
            int finite = 1;
            for (int i = 0; i < H * d; i++) finite &= isfinite(out[i]) != 0;
            if (!finite && !bad++) CHECK(0, "%s: step %d layer %d: attend left a non-finite output", tag, step, l);
            if (full && finite) {
                int head;
                double e = attention_error(s, type, l, step, apos, anpos, cap, kept, out, &head);
                tr->attn_checked++;
                if (!(e <= 1e-3) && !bad++)
                    CHECK(0,
                          "%s: step %d layer %d query head %d (kv head %d): attend's output is off softmax attention "
                          "over the %d positions rows() reports by %.3g",
                          tag, step, l, head, head / s->g, anpos[head / s->g], e);
            }
        }
        if (bad) break;
        int decoded = step + 1;
        /* rows, positions and memory within the rule: the drivers' check */
        char why[400];
        if (kv_budget_check(m, st, &su, decoded, why, sizeof why) && !bad++)
            CHECK(0, "%s: step %d: %s", tag, step, why);
        if (bad) break;
        long total = 0;
        size_t need = 0;   /* the rows' K/V bytes */
        for (int j = 0; j < Hkv; j++)
            for (int l = 0; l < L; l++) {
                int r = m->rows(st, l, j, pos, cap, &npos);
                total += r;
                if (npos < 0 || npos > cap) npos = 0;   /* kv_budget_check refused that already */
                need += kv_rows_bytes(m, st, &su, l, j, r, pos, npos);
                int32_t *p0 = prompt + ((size_t)l * Hkv + j) * cap;
                if (step < 0) {   /* the prompt rows kept by compression */
                    memcpy(p0, pos, (size_t)npos * sizeof *pos);
                    nprompt[l * Hkv + j] = npos;
                    int32_t *kt = tr->kept + ((size_t)l * Hkv + j) * cap;
                    memcpy(kt, pos, (size_t)npos * sizeof *pos);
                    for (int i = npos; i < cap; i++) kt[i] = -1;
                } else if (!evicts) {   /* append: nothing kept is dropped, every decoded token stays */
                    int miss = -1;
                    for (int i = 0; i < nprompt[l * Hkv + j] && miss < 0; i++)
                        if (!contains(pos, npos, p0[i])) miss = p0[i];
                    for (int t = s->n; t < s->n + decoded && miss < 0; t++)
                        if (!contains(pos, npos, t)) miss = t;
                    if (miss >= 0 && !bad++)
                        CHECK(0, "%s: step %d layer %d kv head %d: row of position %d dropped under append", tag, step,
                              l, j, miss);
                }
            }
        /* memory() is exactly the resident rows and the aux state */
        kv_mem mem;
        memset(&mem, 0xff, sizeof mem);
        m->memory(st, &mem);
        if (mem.fast_bytes != need + mem.fast_aux_bytes && !bad++)
            CHECK(0, "%s: step %d: memory fast %zu (aux %zu) for %ld rows of %zu K/V bytes", tag, step, mem.fast_bytes,
                  mem.fast_aux_bytes, total, need);
        tr->mem = mem;
    }
    CHECK(!bad, "%s: %d violation%s", tag, bad, bad == 1 ? "" : "s");
    tr->violated = bad;
    free(pos), free(prompt), free(nprompt), free(apos), free(anpos), free(k), free(v), free(kept), free(chan);
    m->free(st);
}

/* init must refuse the value, with one line that names the method. */
static void expect_refused(const kv_method *m, const kv_setup *base, const char *params) {
    kv_setup su = *base;
    su.params = params;
    char err[512] = "";
    kv_state *st = m->init(&su, err, sizeof err);
    CHECK(!st, "%s accepted the parameters '%s'", m->name, params);
    CHECK(!st && err[0] && !strchr(err, '\n') && !strncmp(err, m->name, strlen(m->name)),
          "%s: '%s': error message '%s'", m->name, params, err);
    if (st) m->free(st);
}

static void test_bad_params(const kv_method *m, const char *params) {
    kv_setup base = {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .n_prompt = 200, .max_decode = 8,
                     .budget_frac = 0.3, .kv_type = KB_BF16, .params = params};
    char err[512] = "", buf[160];
    kv_state *st = m->init(&base, err, sizeof err);
    CHECK(st, "%s: init with %s: %s", m->name, params ? params : "the defaults", err);
    if (st) m->free(st);
    for (const kv_param *p = m->params; p && p->name; p++) {
        snprintf(buf, sizeof buf, "%s=x1", p->name);
        expect_refused(m, &base, buf);
        char *end;
        strtod(p->deflt ? p->deflt : "", &end);
        if (p->deflt && *p->deflt && !*end) {   /* a numeric parameter: empty is not a number */
            snprintf(buf, sizeof buf, "%s=", p->name);
            expect_refused(m, &base, buf);
        }
    }
    for (const kv_range *r = m->ranges; r && r->name; r++) {
        int declared = 0;
        for (const kv_param *p = m->params; p && p->name; p++) declared |= !strcmp(p->name, r->name);
        CHECK(declared, "%s: range for '%s', which is not a parameter", m->name, r->name);
        double below = r->lo - (r->lo == floor(r->lo) ? 1 : 0.5), above = r->hi + (r->hi == floor(r->hi) ? 1 : 0.5);
        if (below != r->special) {
            snprintf(buf, sizeof buf, "%s=%.17g", r->name, below);
            expect_refused(m, &base, buf);
        }
        if (r->hi < 1e9 && above != r->special) {
            snprintf(buf, sizeof buf, "%s=%.17g", r->name, above);
            expect_refused(m, &base, buf);
        }
    }
}

/* What a scenario (or the parameter checks) sends back to the parent. */
typedef struct {
    long checks, failed;
    long failed_type[3];   /* failures under f32, f16, bf16 */
    int feasible[3];       /* the type's runs were feasible */
    long attn_checked;
} part_result;

/* One scenario: both runs under every element type, compared. */
static void scenario(const kv_method *m, const char *params, int rule, uint64_t sseed, int gqa, const char *label,
                     part_result *res) {
    C.rng = sseed;
    scen s;
    make_scen(&s, gqa);
    trace f32 = {0};
    for (int type = KB_F32; type <= KB_BF16; type++) {
        long failed0 = C.failed;
        char tag[200];
        snprintf(tag, sizeof tag, "%s %s %s %s", m->name, kv_decode_name(rule), kb_kvtype_name(type), label);
        trace a, b;
        run(m, params, &s, rule, type, &a, tag);
        run(m, params, &s, rule, type, &b, tag);
        res->attn_checked += a.attn_checked + b.attn_checked;
        CHECK(a.ok == b.ok, "%s: feasible once, not the second time", tag);
        if (a.ok && b.ok) {
            res->feasible[type] = 1;
            size_t n = (size_t)s.T * s.L * s.H * s.d;
            if (!a.violated && !b.violated)   /* a run stopped at a violation has outputs left unwritten */
                CHECK(!memcmp(a.out, b.out, n * sizeof *a.out) && !memcmp(&a.mem, &b.mem, sizeof a.mem),
                      "%s: two identical runs differ", tag);
        }
        if (type == KB_F32) {
            f32 = a;
        } else {
            size_t nk = (size_t)s.L * s.Hkv * (s.n + s.T);
            CHECK(a.ok == f32.ok, "%s: feasible %d, under f32 %d", tag, a.ok, f32.ok);
            if (!a.violated && !f32.violated)
                CHECK(!a.ok || !f32.ok || !memcmp(a.kept, f32.kept, nk * sizeof *a.kept),
                      "%s: compression kept other rows than under f32", tag);
            free(a.out), free(a.kept);
        }
        free(b.out), free(b.kept);
        res->failed_type[type] += C.failed - failed0;
    }
    free(f32.out), free(f32.kept);
    free_scen(&s);
}

/* A scenario's child runs at most this long (the slowest built-in method takes seconds);
 * KVBENCH_CONFORMANCE_SECONDS sets another limit (for tests). */
static int child_seconds(void) {
    const char *e = getenv("KVBENCH_CONFORMANCE_SECONDS");
    long v = e ? strtol(e, NULL, 10) : 0;
    return v > 0 && v < 86400 ? (int)v : 600;
}

/* Runs part (0: the parameter checks, else scenario `label`) in a child process, so a
 * crash is reported with what was running; the child's checks are added to C and *res. */
static void in_child(const kv_method *m, const char *params, int rule, uint64_t sseed, int gqa, const char *label,
                     part_result *res, uint64_t seed) {
    memset(res, 0, sizeof *res);
    if (C.log) fflush(C.log);
    fflush(stdout), fflush(stderr);   /* nothing buffered twice */
    int fd[2];
    pid_t pid = -1;
    if (!getenv("KVBENCH_CONFORMANCE_INPROCESS") && !pipe(fd)) {
        pid = fork();
        if (pid < 0) close(fd[0]), close(fd[1]);
    }
    long checks0 = C.checks, failed0 = C.failed;
    if (pid <= 0) {   /* the child, or in this process when no child could be made */
        if (!pid) alarm((unsigned)child_seconds());   /* a method that hangs is reported, not waited for */
        if (label) scenario(m, params, rule, sseed, gqa, label, res);
        else test_bad_params(m, params);
        res->checks = C.checks - checks0;
        res->failed = C.failed - failed0;
        if (pid < 0) return;
        if (C.log) fflush(C.log);
        close(fd[0]);
        ssize_t w = write(fd[1], res, sizeof *res);
        _exit(w == (ssize_t)sizeof *res ? 0 : 3);
    }
    close(fd[1]);
    part_result got;
    size_t have = 0;
    while (have < sizeof got) {
        ssize_t r = read(fd[0], (char *)&got + have, sizeof got - have);
        if (r <= 0) break;
        have += (size_t)r;
    }
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {}
    const char *what = label ? label : "the parameter checks";
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
        CHECK(0, "%s %s: %s ran past %d s (hung?); replay: kvbench conformance --method %s --seed %llu", m->name,
              label ? kv_decode_name(rule) : "", what, child_seconds(), m->name, (unsigned long long)seed);
        for (int t = 0; label && t < 3; t++) res->failed_type[t]++;
        return;
    }
    if (WIFSIGNALED(status)) {
        CHECK(0, "%s %s: %s crashed: signal %d (%s); replay: kvbench conformance --method %s --seed %llu", m->name,
              label ? kv_decode_name(rule) : "", what, WTERMSIG(status), strsignal(WTERMSIG(status)), m->name,
              (unsigned long long)seed);
        for (int t = 0; label && t < 3; t++) res->failed_type[t]++;
        return;
    }
    if (have != sizeof got || !WIFEXITED(status) || WEXITSTATUS(status)) {   /* a sanitizer's report exits 1 */
        CHECK(0, "%s %s: %s crashed: exit %d without its result; replay: kvbench conformance --method %s --seed %llu",
              m->name, label ? kv_decode_name(rule) : "", what, WIFEXITED(status) ? WEXITSTATUS(status) : -1, m->name,
              (unsigned long long)seed);
        for (int t = 0; label && t < 3; t++) res->failed_type[t]++;
        return;
    }
    *res = got;
    C.checks += got.checks;
    C.failed += got.failed;
}

/* The scenario seeds: splitmix64 of the run's seed, the rule and the trial. */
static uint64_t scenario_seed(uint64_t seed, int rule, int trial) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(1 + rule * 100003 + trial);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z ? z : 1;
}

long kv_conformance_params(const kv_method *m, const char *params, uint64_t seed, int trials, FILE *out,
                           long *checks) {
    memset(&C, 0, sizeof C);
    C.log = out;
    seed = seed ? seed : 88172645463325252ULL;
    CHECK(m->init && m->needs && m->ingest && m->append && m->attend && m->memory && m->head_stats && m->rows &&
              m->free,
          "%s: a missing entry point (not a registered method?)", m->name);
    if (C.failed) goto done;
    part_result pr;
    if (out) fprintf(out, "%-13s parameters: init refuses bad values%s%s\n", m->name, params ? ", runs with " : "",
                     params ? params : "");
    in_child(m, params, 0, 0, 0, NULL, &pr, seed);
    for (int rule = KV_DECODE_APPEND; rule <= KV_DECODE_HOLD; rule++) {
        int feasible[3] = {0, 0, 0}, ran = 0;
        long failed[3] = {0, 0, 0}, attn = 0;
        /* `trials` setups, and more (up to 8x) until each type had a feasible one: a method
         * that refuses most random setups (sekv-ref: P > B) must still be checked running */
        for (int trial = 0; trial < trials || (trial < 8 * trials && !(feasible[0] && feasible[1] && feasible[2]));
             trial++, ran++) {
            uint64_t sseed = scenario_seed(seed, rule, trial);
            scen shape;
            C.rng = sseed;
            draw_shape(&shape, trial == 0);
            char label[160], budget[40];
            if (shape.tokens) snprintf(budget, sizeof budget, "%d tokens", shape.tokens);
            else snprintf(budget, sizeof budget, "%.3g", shape.frac);
            snprintf(label, sizeof label, "scenario %d (L%d H%d/%d d%d n%d T%d budget %s)", trial + 1, shape.L,
                     shape.H, shape.Hkv, shape.d, shape.n, shape.T, budget);
            if (out) {
                fprintf(out, "%-13s %-6s %s\n", m->name, kv_decode_name(rule), label);
                fflush(out);   /* on the screen (or in the pipe) before it runs */
            }
            in_child(m, params, rule, sseed, trial == 0, label, &pr, seed);
            for (int type = KB_F32; type <= KB_BF16; type++) feasible[type] += pr.feasible[type], failed[type] += pr.failed_type[type];
            attn += pr.attn_checked;
        }
        for (int type = KB_F32; type <= KB_BF16; type++) {
            CHECK(feasible[type] > 0, "%s %s %s: no feasible trial", m->name, kv_decode_name(rule),
                  kb_kvtype_name(type));
            if (out) {
                fprintf(out, "%-13s %-6s %-4s %d of %d random setups feasible, ", m->name, kv_decode_name(rule),
                        kb_kvtype_name(type), feasible[type], ran);
                if (failed[type]) fprintf(out, "%ld check%s FAILED\n", failed[type], failed[type] == 1 ? "" : "s");
                else fprintf(out, "all within the rule\n");
            }
        }
        if (out)
            fprintf(out, "%-13s %-6s attention compared with float64 softmax at %ld (step, layer) points%s\n", m->name,
                    kv_decode_name(rule), attn, attn ? "" : " (no layer held only full-resolution rows)");
    }
done:
    if (out) fflush(out);
    if (checks) *checks = C.checks;
    return C.failed;
}

long kv_conformance(const kv_method *m, uint64_t seed, int trials, FILE *out, long *checks) {
    return kv_conformance_params(m, NULL, seed, trials, out, checks);
}
