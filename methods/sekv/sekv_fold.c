/* SeKV's budget keeping at decode time: decoded tokens join at full resolution (gap
 * fix 1); once the persistent part P passes B/2, tokens that left the local window are
 * folded into new spans, and if P would still exceed B the two neighbouring rows that
 * cover the fewest tokens are merged into one span (rebuilt from the reconstructed
 * rows), so P never exceeds B and no token is dropped. */
#include "sekv_state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sekv_die(const char *what, int layer) {
    fprintf(stderr, "kvbench: sekv: %s (layer %d)\n", what, layer);
    exit(1);
}

static int is_anchor(const kv_state *st, int pos) {
    return pos == 0 || st->surp[pos] > st->threshold;
}

/* ---------------------------------------------------------------- compaction */

typedef struct {
    kv_state *st;
    int layer, s0, frontier;
    const float *tk, *tv;       /* [Hkv][m][d] copies of the pending rows */
    int m;
    float *ck, *cv;             /* [new spans][Hkv][d] coarse rows */
    int failed;
} compact_ctx;

static void compact_task(void *c_, int i) {
    compact_ctx *c = c_;
    kv_state *st = c->st;
    int k = i / st->Hkv, j = i % st->Hkv, d = st->d;
    const sekv_span *sp = &st->layer[c->layer].span[c->s0 + k];
    size_t off = ((size_t)j * c->m + (sp->start - c->frontier)) * d;
    if (sekv_build_span(st, c->layer, c->s0 + k, j, c->tk + off, c->tv + off, st->surp + sp->start,
                        c->ck + ((size_t)k * st->Hkv + j) * d, c->cv + ((size_t)k * st->Hkv + j) * d))
        __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
}

/* Folds the full-resolution tokens at positions [frontier, end) into spans: runs between
 * anchors (every token when all) cut into balanced pieces of at most l_max; pieces of 2+
 * tokens become spans, single tokens stay. Positions >= frontier are full-resolution
 * rows at the tail of the rows, one per position. */
static void compact(kv_state *st, int layer, int end, int all) {
    sekv_layer *ly = &st->layer[layer];
    int f = ly->frontier, d = st->d, Hkv = st->Hkv;
    if (end <= f) return;
    int pieces_cap = end - f + 1, s0 = ly->ns;
    int *pieces = malloc((size_t)pieces_cap * sizeof *pieces);
    if (!pieces || sekv_grow_spans(st, ly, ly->ns + (end - f) / 2 + 1)) sekv_die("out of memory compacting", layer);
    for (int t = f; t < end;) {
        if (!all && is_anchor(st, t)) {
            t++;
            continue;
        }
        int e = t;
        while (e < end && (all || !is_anchor(st, e))) e++;
        int k = sekv_split_run(e - t, st->l_max, pieces);
        for (int i = 0; i < k; i++) {
            if (pieces[i] >= 2) ly->span[ly->ns++] = (sekv_span){t, pieces[i]};
            t += pieces[i];
        }
    }
    free(pieces);
    ly->frontier = end;
    int added = ly->ns - s0;
    if (!added) return;
    int m = ly->total - f, r0 = ly->n_rows - m;
    compact_ctx c = {st, layer, s0, f, NULL, NULL, m, NULL, NULL, 0};
    float *tk = malloc((size_t)2 * Hkv * m * d * sizeof *tk);
    float *ck = malloc((size_t)2 * added * Hkv * d * sizeof *ck);
    if (!tk || !ck) sekv_die("out of memory compacting", layer);
    for (int j = 0; j < Hkv; j++) {
        memcpy(tk + (size_t)j * m * d, ly->kv[j].K + (size_t)r0 * d, (size_t)m * d * sizeof *tk);
        memcpy(tk + ((size_t)Hkv + j) * m * d, ly->kv[j].V + (size_t)r0 * d, (size_t)m * d * sizeof *tk);
    }
    c.tk = tk, c.tv = tk + (size_t)Hkv * m * d, c.ck = ck, c.cv = ck + (size_t)added * Hkv * d;
    sekv_par_for(added * Hkv, compact_task, &c);
    if (c.failed) sekv_die("span factorisation failed while compacting decoded tokens", layer);
    /* Rewrite the tail rows: coarse rows for the new spans, the other tokens as they were. */
    int r = r0, k = 0;
    for (int t = f; t < ly->total; r++) {
        if (k < added && ly->span[s0 + k].start == t) {
            ly->row_span[r] = s0 + k;
            ly->row_pos[r] = t;
            for (int j = 0; j < Hkv; j++) {
                memcpy(ly->kv[j].K + (size_t)r * d, c.ck + ((size_t)k * Hkv + j) * d, d * sizeof(float));
                memcpy(ly->kv[j].V + (size_t)r * d, c.cv + ((size_t)k * Hkv + j) * d, d * sizeof(float));
            }
            t += ly->span[s0 + k++].len;
            continue;
        }
        ly->row_span[r] = -1;
        ly->row_pos[r] = t;
        for (int j = 0; j < Hkv; j++) {
            memcpy(ly->kv[j].K + (size_t)r * d, c.tk + ((size_t)j * m + (t - f)) * d, d * sizeof(float));
            memcpy(ly->kv[j].V + (size_t)r * d, c.tv + ((size_t)j * m + (t - f)) * d, d * sizeof(float));
        }
        t++;
    }
    ly->n_rows = r;
    sekv_rows_moved(st, ly, r0);
    sekv_refresh_span_rows(ly);
    for (int i = s0; i < ly->ns; i++)
        st->slow_bytes += Hkv * sekv_store_floats(ly->span[i].len, d, st->rank) * st->eb;
    if (st->slow_bytes > st->slow_peak) st->slow_peak = st->slow_bytes;
    free(tk);
    free(ck);
}

/* ---------------------------------------------------------------- merging */

static int row_len(const sekv_layer *ly, int r) {
    return ly->row_span[r] < 0 ? 1 : ly->span[ly->row_span[r]].len;
}

static size_t span_bytes(const kv_state *st, int len) {
    return (size_t)st->Hkv * sekv_store_floats(len, st->d, st->rank) * st->eb;
}

/* Opens (delta = +1) or closes (delta = -1) span slot k, moving the later spans' arrays. */
static void span_shift(kv_state *st, sekv_layer *ly, int k, int delta) {
    int move = ly->ns - k - (delta < 0), src = delta > 0 ? k : k + 1, dst = delta > 0 ? k + 1 : k;
    size_t dp = (size_t)st->prm.dp;
    memmove(ly->span + dst, ly->span + src, (size_t)move * sizeof *ly->span);
    for (int j = 0; j < st->Hkv; j++) {
        sekv_basis *b = ly->kv[j].basis;
        memmove(b + dst, b + src, (size_t)move * sizeof *b);
        if (delta > 0) b[k].buf = NULL;
    }
    for (int h = 0; h < st->H; h++) {
        float *kh = ly->khat + (size_t)h * ly->span_cap * dp;
        memmove(kh + dst * dp, kh + src * dp, (size_t)move * dp * sizeof *kh);
    }
    size_t d2 = 2 * (size_t)st->d;
    for (int j = 0; j < st->Hkv; j++) {
        float *kb = ly->kspread + (size_t)j * ly->span_cap * d2;
        memmove(kb + dst * d2, kb + src * d2, (size_t)move * d2 * sizeof *kb);
    }
    ly->ns += delta;
}

static void drop_span(kv_state *st, sekv_layer *ly, int s) {
    for (int j = 0; j < st->Hkv; j++) {
        sekv_slow_free(st, ly->kv[j].basis[s].buf);
        ly->kv[j].basis[s].buf = NULL;
    }
    st->slow_bytes -= span_bytes(st, ly->span[s].len);
}

/* Merges rows r and r+1 (a token or a span each; together contiguous positions) into one
 * span built from their rows, spans reconstructed with every component they kept. */
static void merge(kv_state *st, int layer, int r) {
    sekv_layer *ly = &st->layer[layer];
    int d = st->d, Hkv = st->Hkv, la = row_len(ly, r), len = la + row_len(ly, r + 1);
    int start = ly->row_pos[r], sa = ly->row_span[r], sb = ly->row_span[r + 1], k;
    float *tmp = malloc((size_t)2 * Hkv * len * d * sizeof *tmp);
    if (!tmp || sekv_grow_spans(st, ly, ly->ns + 1)) sekv_die("out of memory merging spans", layer);
    for (int j = 0; j < Hkv; j++)
        for (int side = 0; side < 2; side++) {
            float *K = tmp + ((size_t)j * len + (side ? la : 0)) * d;
            float *V = K + (size_t)Hkv * len * d;
            int s = side ? sb : sa, row = r + side;
            if (s >= 0) {
                sekv_basis_rows(&ly->kv[j].basis[s], 0, K, V);
            } else {
                memcpy(K, ly->kv[j].K + (size_t)row * d, d * sizeof *K);
                memcpy(V, ly->kv[j].V + (size_t)row * d, d * sizeof *V);
            }
        }
    if (sa >= 0) {   /* the merged span takes the first span's slot */
        k = sa;
        drop_span(st, ly, sa);
        if (sb >= 0) drop_span(st, ly, sb), span_shift(st, ly, sb, -1);
    } else if (sb >= 0) {
        k = sb;
        drop_span(st, ly, sb);
    } else {
        k = 0;
        for (int i = 0; i < r; i++) k += ly->row_span[i] >= 0;
        span_shift(st, ly, k, +1);
    }
    ly->span[k] = (sekv_span){start, len};
    for (int j = 0; j < Hkv; j++) {
        const float *K = tmp + (size_t)j * len * d, *V = K + (size_t)Hkv * len * d;
        if (sekv_build_span(st, layer, k, j, K, V, st->surp + start, ly->kv[j].K + (size_t)r * d,
                            ly->kv[j].V + (size_t)r * d))
            sekv_die("span factorisation failed while merging", layer);
    }
    st->slow_bytes += span_bytes(st, len);
    if (st->slow_bytes > st->slow_peak) st->slow_peak = st->slow_bytes;
    free(tmp);
    /* row r is now the span's coarse row; remove row r+1 */
    int tail = ly->n_rows - r - 2;
    memmove(ly->row_pos + r + 1, ly->row_pos + r + 2, (size_t)tail * sizeof *ly->row_pos);
    memmove(ly->row_span + r + 1, ly->row_span + r + 2, (size_t)tail * sizeof *ly->row_span);
    for (int j = 0; j < Hkv; j++) {
        memmove(ly->kv[j].K + (size_t)(r + 1) * d, ly->kv[j].K + (size_t)(r + 2) * d, (size_t)tail * d * sizeof(float));
        memmove(ly->kv[j].V + (size_t)(r + 1) * d, ly->kv[j].V + (size_t)(r + 2) * d, (size_t)tail * d * sizeof(float));
    }
    ly->n_rows--;
    sekv_rows_moved(st, ly, r);
    ly->row_span[r] = k;
    for (int i = 0, s = 0; i < ly->n_rows; i++)   /* span indices follow row order */
        if (ly->row_span[i] >= 0) ly->row_span[i] = s++;
    sekv_refresh_span_rows(ly);
    memset(ly->zoom_h, 0, (size_t)st->H * ly->span_cap);
    memset(ly->why, SEKV_WHY_OFF, (size_t)st->H * ly->span_cap);
}

/* The settled neighbouring rows (past token 0 and the sinks) covering the fewest tokens;
 * the oldest on ties. -1 if none. */
static int pick_pair(const kv_state *st, const sekv_layer *ly) {
    int best = -1, best_len = 0, lo = st->sinks > 1 ? st->sinks : 1;
    for (int r = 0; r + 1 < ly->n_rows; r++) {
        if (ly->row_pos[r] < lo) continue;
        if (ly->row_pos[r + 1] + row_len(ly, r + 1) > ly->frontier) break;
        int l = row_len(ly, r) + row_len(ly, r + 1);
        if (best < 0 || l < best_len) best = r, best_len = l;
    }
    return best;
}

static void merge_to_budget(kv_state *st, int layer) {
    sekv_layer *ly = &st->layer[layer];
    for (int r; ly->n_rows > st->B && (r = pick_pair(st, ly)) >= 0;) merge(st, layer, r);
}

/* Keeps P <= B: once P passes p_max*B, tokens that left the local window are folded into
 * spans in chunks of c = min(l_max, B - p_max*B) (at least 2) tokens. If P exceeds B anyway
 * (anchors, spans piling up over a long decode, a tiny budget), neighbouring settled rows
 * are merged, then the local window is folded too. Uncapped: nothing (P grows). */
void sekv_keep_budget(kv_state *st, int layer) {
    if (st->uncapped) return;
    sekv_layer *ly = &st->layer[layer];
    int cap = (int)(st->p_max * st->B), out_of_window = ly->total - st->local;
    int c = st->l_max < st->B - cap ? st->l_max : st->B - cap;
    if (c < 2) c = 2;
    if (ly->n_rows > cap && out_of_window - ly->frontier >= c) compact(st, layer, out_of_window, 0);
    if (ly->n_rows <= st->B) return;
    compact(st, layer, out_of_window, 0);
    merge_to_budget(st, layer);
    if (ly->n_rows > st->B) {   /* the local window too */
        compact(st, layer, ly->total, 1);
        merge_to_budget(st, layer);
    }
    if (ly->n_rows > st->B && !st->warned_over) {
        st->warned_over = 1;
        fprintf(stderr, "kvbench: sekv: warning: layer %d holds %d persistent rows, over the budget B=%d "
                "(token 0 and the sinks alone)\n", layer, ly->n_rows, st->B);
    }
}
