/* SentenceKV: the prompt is pre-filtered by SnapKV voting to F*B tokens per kv head, which
 * sit on the slow tier (host); each sentence's mean retained key (a sentence vector) sits
 * on the fast tier. Every decode step attends, in one softmax, over the first `sinks` and
 * last `recent` rows plus the tokens of the sentences whose vectors best match the mean
 * query of the sentence being generated, up to B rows per kv head (the fast-tier working
 * set). Generated sentences become new sentence vectors when they end.
 *
 * Deviations from the SentenceKV code, as proposed in the reference: KV-head granularity
 * (group-mean queries and window scores; K/V stored once per kv head); sentences end at
 * tokens whose text ends in .!? (and CJK forms) or holds a blank line (kv_prefill.sent_end),
 * not at an exact punctuation-token lookup. The prompt's unfinished last sentence is a
 * sentence of its own; the sentence being generated starts with the first decoded token.
 * The last sentence collected is cut to fill the budget exactly. Sinks are clamped to B/2
 * and recent to B - sinks, so a small budget still never attends more than B rows.
 * With the CUDA backend the attended rows sit on the device as a working set of at most B
 * rows per kv head (kvs_decode_subset): only rows newly selected cross the bus.
 *
 * Decode rule (kv_setup.decode_rule): under hold the working set is at most B rows in all,
 * generated tokens competing with the prompt's (sinks, sentences, recent rows of the whole
 * cache). Under append the B rows are chosen among the prompt's rows alone (the recent
 * rows are the prompt's last ones) and every generated token is attended on top of them,
 * at full resolution. */
#include "../kernels/core.h"
#include "kvstore.h"
#include "method.h"
#include "sentencekv.h"
#include "window_score.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kv_param params[] = {
    {"sinks", "32", "first rows of the cache attended every step"},
    {"recent", "32", "last rows of the cache attended every step"},
    {"factor", "3", "semantic factor F: the pre-filter keeps F*B prompt tokens per kv head on the slow tier"},
    {"window", "32", "pre-filter observation window (SnapKV voting, always kept)"},
    {"kernel", "7", "pre-filter max-pool kernel (1 = none)"},
    {NULL, NULL, NULL},
};

typedef struct {
    kv_store kv;              /* slow tier: pre-filtered prompt rows, then every decoded token */
    int ns, scap;             /* sentence vectors */
    float *skey;              /* [scap][d] mean retained key (fast tier) */
    int32_t *srow, *slen;     /* [scap] first row in kv and number of rows */
    int cur;                  /* first row of the sentence being generated */
    int np;                   /* rows from the prompt (the rest are generated tokens) */
    int nq, ended;            /* queries summed in qsum; the last token appended ends a sentence */
    double *qsum;             /* [d] sum of the current sentence's group-mean queries */
    int32_t *sel;             /* [selcap] rows attended at the last step (at most B) */
    int nsel, selcap, stepped;
    long retrieved;           /* sentences that contributed tokens, summed over steps */
} skv_head;

typedef struct {
    double score;
    int32_t s;
} ranked;

struct kv_state {
    kv_setup s;
    int B, S, R, w, kernel, g, append;
    long P;                   /* pre-filter budget F*B, window included */
    skv_head *hd;             /* [L*Hkv] */
    float *tmp;               /* [Hkv][n] window scores */
    int32_t *idx, *sid;       /* [n] */
    ranked *rank;             /* [rank_cap] */
    int rank_cap;
    size_t fast_peak, slow_peak;
};

const kv_method kv_sentencekv;

static void oom_exit(void) {
    fprintf(stderr, "sentencekv: out of memory during decode\n");
    exit(1);
}

static void sk_free(kv_state *st) {
    if (!st) return;
    for (int i = 0; st->hd && i < st->s.n_layers * st->s.n_kv_heads; i++) {
        skv_head *h = &st->hd[i];
        kvs_free(&h->kv);
        free(h->skey); free(h->srow); free(h->slen); free(h->qsum); free(h->sel);
    }
    free(st->hd); free(st->tmp); free(st->idx); free(st->sid); free(st->rank);
    free(st);
}

static int check_setup(const kv_setup *s, char *err, size_t errlen) {
    if (s->n_layers < 1 || s->n_heads < 1 || s->n_kv_heads < 1 || s->head_dim < 1 ||
        s->n_heads % s->n_kv_heads) {
        snprintf(err, errlen, "sentencekv: bad shape (layers %d, heads %d, kv heads %d, head dim %d)",
                 s->n_layers, s->n_heads, s->n_kv_heads, s->head_dim);
        return -1;
    }
    if (s->n_prompt < 1 || s->max_decode < 0) {
        snprintf(err, errlen, "sentencekv: bad lengths (n_prompt %d, max_decode %d)", s->n_prompt,
                 s->max_decode);
        return -1;
    }
    if (kv_check_type(s, "sentencekv", err, errlen)) return -1;
    if (s->budget_tokens < 0) {
        snprintf(err, errlen, "sentencekv: budget %d tokens must be >= 1", s->budget_tokens);
        return -1;
    }
    if (s->budget_tokens == 0 && !(s->budget_frac > 0 && s->budget_frac <= 1)) {
        snprintf(err, errlen, "sentencekv: budget fraction %g is not in (0,1]", s->budget_frac);
        return -1;
    }
    return 0;
}

static kv_state *sk_init(const kv_setup *s, char *err, size_t errlen) {
    const kv_method *m = &kv_sentencekv;
    if (check_setup(s, err, errlen) || kv_param_check(m, s->params, err, errlen)) return NULL;
    kv_state *st = calloc(1, sizeof *st);
    if (!st) { snprintf(err, errlen, "sentencekv: out of memory"); return NULL; }
    st->s = *s;
    st->s.params = NULL;
    int F;
    if (kv_param_int(m, s->params, "sinks", &st->S, err, errlen) ||
        kv_param_int(m, s->params, "recent", &st->R, err, errlen) ||
        kv_param_int(m, s->params, "factor", &F, err, errlen) ||
        kv_param_int(m, s->params, "window", &st->w, err, errlen) ||
        kv_param_int(m, s->params, "kernel", &st->kernel, err, errlen)) goto fail;
    if (st->S < 0 || st->R < 0 || F < 1 || st->w < 1 || st->kernel < 1) {
        snprintf(err, errlen, "sentencekv: need sinks >= 0 (%d), recent >= 0 (%d), factor >= 1 (%d), window >= 1 "
                 "(%d), kernel >= 1 (%d)", st->S, st->R, F, st->w, st->kernel);
        goto fail;
    }
    st->B = kv_budget(s);
    st->append = s->decode_rule != KV_DECODE_HOLD;
    st->P = (long)F * st->B;
    if (st->w > st->P) st->w = (int)st->P;
    /* sinks + recent must leave the budget intact: at most half each way for sinks */
    if (st->S > st->B / 2) st->S = st->B / 2;
    if (st->R > st->B - st->S) st->R = st->B - st->S;
    int L = s->n_layers, Hkv = s->n_kv_heads, n = s->n_prompt, d = s->head_dim;
    st->g = s->n_heads / Hkv;
    st->hd = calloc((size_t)L * Hkv, sizeof *st->hd);
    st->tmp = malloc((size_t)Hkv * n * sizeof *st->tmp);
    st->idx = malloc((size_t)n * sizeof *st->idx);
    st->sid = malloc((size_t)n * sizeof *st->sid);
    if (!st->hd || !st->tmp || !st->idx || !st->sid) goto oom;
    int rows = (long)n < st->P ? n : (int)st->P;
    for (int i = 0; i < L * Hkv; i++) {
        skv_head *h = &st->hd[i];
        if (kvs_init(&h->kv, d, rows + s->max_decode + 1, s->kv_type)) goto oom;
        h->qsum = calloc((size_t)d, sizeof *h->qsum);
        h->selcap = (st->B < rows ? st->B : rows) + s->max_decode + 1;
        h->sel = malloc((size_t)h->selcap * sizeof *h->sel);
        if (!h->qsum || !h->sel) goto oom;
    }
    return st;
oom:
    snprintf(err, errlen, "sentencekv: out of memory");
fail:
    sk_free(st);
    return NULL;
}

/* The pre-filter's window (clamped to P = F*B as init does), when it has anything to
 * filter (n > P). */
static void sk_needs(const kv_setup *s, kv_needs *out) {
    const kv_method *m = &kv_sentencekv;
    int F = 0, w = 0;
    char err[8];
    out->col_mass = 0;
    out->window = 0;
    if (kv_param_int(m, s->params, "factor", &F, err, sizeof err) || kv_param_int(m, s->params, "window", &w, err, sizeof err) ||
        F < 1 || w < 1)
        return;
    long P = (long)F * kv_budget(s);
    if (s->n_prompt > P) out->window = w > P ? (int)P : w;
}

static size_t row_bytes(const kv_state *st) { return (size_t)st->s.head_dim * 2 * kb_kvtype_bytes(st->s.kv_type); }

/* The fast-tier working set of a kv head: up to B rows (hold), or up to B prompt rows
 * plus every generated token (append). */
static int working_set(const kv_state *st, const skv_head *h) {
    if (!st->append) return h->kv.n < st->B ? h->kv.n : st->B;
    return (h->np < st->B ? h->np : st->B) + (h->kv.n - h->np);
}

/* Fast tier: the working set of every kv head plus the sentence vectors. */
static void tiers(const kv_state *st, size_t *fast, size_t *aux, size_t *slow, long *tokens) {
    *fast = *aux = *slow = 0;
    *tokens = 0;
    for (int i = 0; i < st->s.n_layers * st->s.n_kv_heads; i++) {
        const skv_head *h = &st->hd[i];
        int work = working_set(st, h);
        *tokens += work;
        *fast += (size_t)work * row_bytes(st);
        *aux += (size_t)h->ns * st->s.head_dim * sizeof(float);   /* sentence vectors: f32 */
        *slow += kvs_bytes(&h->kv);
    }
    *fast += *aux;
}

static void note_peaks(kv_state *st, size_t transient) {
    size_t fast, aux, slow;
    long tokens;
    tiers(st, &fast, &aux, &slow, &tokens);
    if (fast + transient > st->fast_peak) st->fast_peak = fast + transient;
    if (slow > st->slow_peak) st->slow_peak = slow;
}

/* Append a sentence vector: the mean key of rows [r0, r0+len). */
static int add_sentence(skv_head *h, int d, int r0, int len) {
    if (h->ns == h->scap) {
        int cap = h->scap ? 2 * h->scap : 16;
        float *k = realloc(h->skey, (size_t)cap * d * sizeof *k);
        if (!k) return -1;
        h->skey = k;
        int32_t *a = realloc(h->srow, (size_t)cap * sizeof *a);
        if (!a) return -1;
        h->srow = a;
        int32_t *b = realloc(h->slen, (size_t)cap * sizeof *b);
        if (!b) return -1;
        h->slen = b;
        h->scap = cap;
    }
    float *key = h->skey + (size_t)h->ns * d;
    for (int c = 0; c < d; c++) {
        double sum = 0;
        for (int r = r0; r < r0 + len; r++) sum += kb_kv_at(h->kv.type, h->kv.K, (size_t)r * d + c);
        key[c] = (float)(sum / len);
    }
    h->srow[h->ns] = r0;
    h->slen[h->ns] = len;
    h->ns++;
    return 0;
}

static int sk_ingest(kv_state *st, const kv_prefill *p, char *err, size_t errlen) {
    int L = st->s.n_layers, Hkv = st->s.n_kv_heads, d = st->s.head_dim;
    int l = p->layer, n = p->n, w = st->w;
    if (l < 0 || l >= L || n != st->s.n_prompt) {
        snprintf(err, errlen, "sentencekv: prefill of layer %d with %d tokens does not match the setup", l, n);
        return -1;
    }
    for (int j = 0; j < Hkv; j++)
        if (st->hd[l * Hkv + j].kv.n) {
            snprintf(err, errlen, "sentencekv: layer %d ingested twice", l);
            return -1;
        }
    if (!p->K || !p->V || !p->sent_end) {
        snprintf(err, errlen, "sentencekv: layer %d: the prefill gave no K/V or no sentence boundaries", l);
        return -1;
    }
    int filter = n > st->P, m = n - w;
    if (filter && (!p->win_probs || p->win < w)) {
        snprintf(err, errlen, "sentencekv: layer %d: need %d window probability rows, got %d", l, w,
                 p->win_probs ? p->win : 0);
        return -1;
    }
    note_peaks(st, (size_t)n * Hkv * row_bytes(st));     /* the full layer on the GPU at prefill */
    if (filter && window_scores(p, st->s.n_heads, Hkv, w, st->kernel, POOL_MAX, 0, st->tmp) != m) {
        snprintf(err, errlen, "sentencekv: out of memory scoring layer %d", l);
        return -1;
    }
    st->sid[0] = 0;
    for (int t = 1; t < n; t++) st->sid[t] = st->sid[t - 1] + (p->sent_end[t - 1] != 0);
    for (int j = 0; j < Hkv; j++) {
        skv_head *h = &st->hd[l * Hkv + j];
        int nk = n;
        if (filter) {
            nk = topk_sorted(st->tmp + (size_t)j * m, m, (int)st->P - w, st->idx);
            if (nk < 0) {
                snprintf(err, errlen, "sentencekv: out of memory selecting layer %d", l);
                return -1;
            }
            for (int t = m; t < n; t++) st->idx[nk++] = t;
        } else {
            for (int t = 0; t < n; t++) st->idx[t] = t;
        }
        h->kv.n = 0;
        h->ns = 0;
        for (int r = 0; r < nk; r++) {
            size_t off = (size_t)j * p->kv_stride + (size_t)st->idx[r] * d;
            kvs_push(&h->kv, p->K + off, p->V + off, st->idx[r]);     /* within capacity */
        }
        for (int r0 = 0, r = 1; r <= nk; r++)
            if (r == nk || st->sid[st->idx[r]] != st->sid[st->idx[r0]]) {
                if (add_sentence(h, d, r0, r - r0)) {
                    snprintf(err, errlen, "sentencekv: out of memory splitting layer %d", l);
                    return -1;
                }
                r0 = r;
            }
        h->cur = h->np = nk;
        h->nq = h->ended = h->nsel = h->stepped = 0;
        h->retrieved = 0;
        memset(h->qsum, 0, (size_t)d * sizeof *h->qsum);
    }
    note_peaks(st, 0);
    return 0;
}

static void sk_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t) {
    int Hkv = st->s.n_kv_heads, d = st->s.head_dim;
    for (int j = 0; j < Hkv; j++) {
        skv_head *h = &st->hd[layer * Hkv + j];
        if (kvs_push(&h->kv, k + (size_t)j * d, v + (size_t)j * d, t->pos)) oom_exit();
        h->ended = t->sent_end != 0;
    }
    note_peaks(st, 0);
}

static int by_score_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->s > y->s) - (x->s < y->s);
}

static int by_row(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Choose h->sel: sinks, the best-matching sentences' rows between them and the recent
 * rows (up to the budget), then the recent rows; ascending. Under append these B rows
 * come from the prompt's rows [0, np) and every generated row follows them. */
static void select_rows(kv_state *st, skv_head *h) {
    int d = st->s.head_dim, N = st->append ? h->np : h->kv.n;
    int S = st->S < N ? st->S : N;
    int rec = N - st->R > S ? N - st->R : S;         /* first recent row */
    int ns = 0, need = working_set(st, h);
    if (need > h->selcap) {
        int32_t *sel = realloc(h->sel, (size_t)need * sizeof *sel);
        if (!sel) oom_exit();
        h->sel = sel;
        h->selcap = need;
    }
    for (int r = 0; r < S; r++) h->sel[ns++] = r;
    int quota = st->B - S - (N - rec);
    if (h->kv.n - h->cur > 1 && quota > 0 && h->ns > 0) {
        if (h->ns > st->rank_cap) {
            ranked *rk = realloc(st->rank, (size_t)h->ns * 2 * sizeof *rk);
            if (!rk) oom_exit();
            st->rank = rk;
            st->rank_cap = h->ns * 2;
        }
        for (int s = 0; s < h->ns; s++) {       /* q-bar . k-bar, q-bar = qsum / nq */
            const float *key = h->skey + (size_t)s * d;
            double dot = 0;
            for (int c = 0; c < d; c++) dot += h->qsum[c] * key[c];
            dot /= h->nq;
            st->rank[s] = (ranked){dot, s};
        }
        qsort(st->rank, (size_t)h->ns, sizeof *st->rank, by_score_desc);
        int first = ns;
        for (int i = 0; i < h->ns && ns - first < quota; i++) {
            int s = st->rank[i].s, before = ns;
            for (int r = h->srow[s]; r < h->srow[s] + h->slen[s] && ns - first < quota; r++)
                if (r >= S && r < rec) h->sel[ns++] = r;
            h->retrieved += ns > before;
        }
        qsort(h->sel + first, (size_t)(ns - first), sizeof *h->sel, by_row);
    }
    for (int r = rec; r < h->kv.n; r++) h->sel[ns++] = r;   /* append: the generated rows too */
    h->nsel = ns;
}

static void sk_attend(kv_state *st, int layer, const float *q, float *out) {
    int Hkv = st->s.n_kv_heads, d = st->s.head_dim, g = st->g;
    for (int j = 0; j < Hkv; j++) {
        skv_head *h = &st->hd[layer * Hkv + j];
        const float *qj = q + (size_t)j * g * d;
        for (int c = 0; c < d; c++) {
            double sum = 0;
            for (int hh = 0; hh < g; hh++) sum += qj[(size_t)hh * d + c];
            h->qsum[c] += sum / g;
        }
        h->nq++;
        select_rows(st, h);
        h->stepped = 1;
        kb_decode_args a = {.g = g, .d = d, .n = h->nsel, .q = qj, .idx = h->sel, .out = out + (size_t)j * g * d};
        kvs_decode_subset(&h->kv, &a);   /* CUDA backend: only the working set is on the device */
        if (h->ended) {   /* the generated sentence is finished (append: attended anyway, no vector) */
            if (!st->append && add_sentence(h, d, h->cur, h->kv.n - h->cur)) oom_exit();
            h->cur = h->kv.n;
            h->nq = h->ended = 0;
            memset(h->qsum, 0, (size_t)d * sizeof *h->qsum);
        }
    }
    note_peaks(st, 0);
}

static void sk_memory(const kv_state *st, kv_mem *out) {
    size_t fast, aux, slow;
    long tokens;
    tiers(st, &fast, &aux, &slow, &tokens);
    *out = (kv_mem){.fast_bytes = fast, .fast_peak = st->fast_peak, .fast_aux_bytes = aux, .slow_bytes = slow,
                    .slow_peak = st->slow_peak, .fast_tokens = tokens};
}

static void sk_head_stats(const kv_state *st, int layer, int head, kv_headstat *out) {
    const skv_head *h = &st->hd[layer * st->s.n_kv_heads + head / st->g];
    out->kept = h->stepped ? h->nsel : working_set(st, h);
    out->events = (double)h->retrieved;
}

/* Slow-tier traffic of a step: the working set is re-gathered from the slow tier every
 * step (an upper bound). */
static double sk_slow_rows(const kv_state *st, int layer) {
    double rows = 0;
    for (int j = 0; j < st->s.n_kv_heads; j++) rows += working_set(st, &st->hd[layer * st->s.n_kv_heads + j]);
    return rows;
}

/* Fast tier: the working set; full-resolution rows: the slow tier's (never dropped). */
static int sk_rows(const kv_state *st, int layer, int kv_head, int32_t *pos, int cap, int *npos) {
    const skv_head *h = &st->hd[layer * st->s.n_kv_heads + kv_head];
    if (pos) {
        int n = h->kv.n < cap ? h->kv.n : cap;
        memcpy(pos, h->kv.pos, (size_t)n * sizeof *pos);
        *npos = n;
    }
    return working_set(st, h);
}

static const kv_range ranges[] = {
    {"sinks", 0, 1e9, NAN}, {"recent", 0, 1e9, NAN}, {"factor", 1, 1e6, NAN}, {"window", 1, 1e9, NAN},
    {"kernel", 1, 1e9, NAN}, {NULL, 0, 0, 0},
};

int sentencekv_rows(const kv_state *st, int layer, int kv_head, int32_t *pos) {
    const skv_head *h = &st->hd[layer * st->s.n_kv_heads + kv_head];
    memcpy(pos, h->kv.pos, (size_t)h->kv.n * sizeof *pos);
    return h->kv.n;
}

int sentencekv_selection(const kv_state *st, int layer, int kv_head, int32_t *pos) {
    const skv_head *h = &st->hd[layer * st->s.n_kv_heads + kv_head];
    if (!h->stepped) return 0;
    for (int i = 0; i < h->nsel; i++) pos[i] = h->kv.pos[h->sel[i]];
    return h->nsel;
}

const kv_store *sentencekv_store(const kv_state *st, int layer, int kv_head) {
    return &st->hd[layer * st->s.n_kv_heads + kv_head].kv;
}

int sentencekv_sentence_count(const kv_state *st, int layer, int kv_head) {
    return st->hd[layer * st->s.n_kv_heads + kv_head].ns;
}

void sentencekv_sentence(const kv_state *st, int layer, int kv_head, int s, float *key, int32_t *first_pos,
                         int *n_tokens) {
    const skv_head *h = &st->hd[layer * st->s.n_kv_heads + kv_head];
    int d = st->s.head_dim;
    memcpy(key, h->skey + (size_t)s * d, (size_t)d * sizeof *key);
    *first_pos = h->kv.pos[h->srow[s]];
    *n_tokens = h->slen[s];
}

const kv_method kv_sentencekv = {
    KV_METHOD_HEAD,
    .name = "sentencekv",
    .summary = "SnapKV pre-filter to F*B tokens (slow tier) + sentence vectors (fast tier); per step attends "
               "sinks 32 + recent 32 + tokens of the sentences best matching the current sentence's mean query, "
               "B per kv head; robust sentence split (text ends in .!? or blank line: a deviation), KV-head mean",
    .params = params,
    .ranges = ranges,
    .init = sk_init,
    .needs = sk_needs,
    .ingest = sk_ingest,
    .append = sk_append,
    .attend = sk_attend,
    .memory = sk_memory,
    .head_stats = sk_head_stats,
    .rows = sk_rows,
    .free = sk_free,
    .slow_rows = sk_slow_rows,
};
