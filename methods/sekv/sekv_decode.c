/* SeKV's decode step (reference §8), one layer at a time, read top to bottom:
 *   route    every query head scores every span (route(): the trained d'=32 summaries,
 *            or sekv-spread's mean + spread)
 *   select   per kv group, the spans over some head's tau, by descending score, each
 *            taken if its |S| rows fit in the room B - P (gap fix 4: per group, not per head)
 *   rebuild  the selected spans' rows from their rank-r factors: host threads here, or
 *            on the device (sekv_dev.c, kernels/cuda_spans.cu)
 *   attend   one softmax per query head over full-resolution rows, coarse rows (bias
 *            ln|S|) and the rebuilt rows of the spans it zooms into
 *   append   the token joins at full resolution (gap fix 1); under --decode hold the
 *            budget is kept by folding (sekv_fold.c)
 * sekv_attend() runs the first four steps, sekv_append() the last. */
#include "sekv_state.h"
#include "../../kernels/core.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- attend */

typedef struct {
    float score;
    int s;
} cand;

static int by_score(const void *a_, const void *b_) {
    const cand *a = a_, *b = b_;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->s - b->s;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    kv_state *st;
    sekv_layer *ly;
    int *task_j, *task_k;
} recon_ctx;

static void recon_task(void *c_, int i) {
    recon_ctx *c = c_;
    int j = c->task_j[i], s = c->ly->sel[(size_t)j * c->ly->span_cap + c->task_k[i]];
    const sekv_basis *b = &c->ly->kv[j].basis[s];
    size_t row = (size_t)c->ly->recon_row[(size_t)j * c->ly->span_cap + s] * c->st->d;
    sekv_basis_rows(b, 1, c->ly->kv[j].K + row, c->ly->kv[j].V + row);
    /* rebuilt rows are fast-tier rows: stored in the K/V type like the others (the device
     * rebuild stores the same bits, kernels/cuda_spans.cu) */
    sekv_round_rows(c->st, c->ly->kv[j].K + row, b->fk.len), sekv_round_rows(c->st, c->ly->kv[j].V + row, b->fk.len);
}

/* The selected spans of every group rebuilt into the host rows, on the worker threads. */
static void reconstruct_host(kv_state *st, int layer, int n_tasks) {
    sekv_layer *ly = &st->layer[layer];
    int *tj = malloc(2 * (size_t)n_tasks * sizeof *tj), *tk = tj + n_tasks, t = 0;
    if (!tj) sekv_die("out of memory", layer);
    for (int j = 0; j < st->Hkv; j++)
        for (int k = 0; k < ly->n_sel[j]; k++) tj[t] = j, tk[t++] = k;
    recon_ctx rc = {st, ly, tj, tk};
    sekv_par_for(n_tasks, recon_task, &rc);
    free(tj);
}

/* route=2, a diagnostic upper bound, not a method: each span's exact attention mass for
 * the head, ln sum exp(q.k / sqrt(d)) over its keys rebuilt from every component of the
 * factors (exact where the rank covers the span), i.e. the ranking training's teacher
 * gives. It reads every span's keys at every step, which the method exists to avoid. */
static void route_oracle(kv_state *st, int layer, const float *q, float *scores) {
    sekv_layer *ly = &st->layer[layer];
    int d = st->d, ns = ly->ns, maxlen = 1;
    for (int s = 0; s < ns; s++) maxlen = ly->span[s].len > maxlen ? ly->span[s].len : maxlen;
    float *K = malloc(2 * (size_t)maxlen * d * sizeof *K);
    double *l = malloc((size_t)maxlen * sizeof *l);
    if (!K || !l) sekv_die("out of memory", layer);
    for (int j = 0; j < st->Hkv; j++)
        for (int s = 0; s < ns; s++) {
            int len = ly->span[s].len;
            sekv_basis_rows(&ly->kv[j].basis[s], 0, K, K + (size_t)len * d);
            for (int h = j * st->g; h < (j + 1) * st->g; h++) {
                const float *qh = q + (size_t)h * d;
                double mx = -INFINITY, sum = 0;
                for (int t = 0; t < len; t++) {
                    double x = 0;
                    for (int i = 0; i < d; i++) x += (double)qh[i] * K[(size_t)t * d + i];
                    l[t] = x / sqrt((double)d);
                    mx = l[t] > mx ? l[t] : mx;
                }
                for (int t = 0; t < len; t++) sum += exp(l[t] - mx);
                scores[(size_t)h * ns + s] = (float)(mx + log(sum));
            }
        }
    free(K), free(l);
}

/* Relevance of every span for every query head as a logit (alpha~ = sigmoid of it):
 * scores [H][ns]. Logits rank spans that alpha~ would round to the same 1.0f. */
static void route(kv_state *st, int layer, const float *q, float *scores) {
    sekv_layer *ly = &st->layer[layer];
    int d = st->d, dp = st->prm.dp, ns = ly->ns;
    float qhat[SEKV_DPRIME];
    if (st->route == 2) {
        route_oracle(st, layer, q, scores);
        return;
    }
    for (int h = 0; h < st->H; h++) {
        const float *qh = q + (size_t)h * d;
        float *a = scores + (size_t)h * ns;
        if (st->trained_zoom && st->route == 1) {
            /* The span's best logit, estimated: its mean logit plus sqrt(2 ln|S|) (the
             * expected maximum of |S| Gaussian deviations) times the spread of its keys
             * along q, from their top-2 principal directions (v1, v2, scaled by the rms).
             * A span with one key that stands out along q scores high even when its mean
             * is diluted; no ln|S| mass prior, under which long spans win regardless. */
            const float *kb = ly->kspread + (size_t)(h / st->g) * ly->span_cap * 2 * d;
            const float *K = ly->kv[h / st->g].K;
            for (int s = 0; s < ns; s++) {
                const float *v1 = kb + (size_t)s * 2 * d, *v2 = v1 + d, *kbar = K + (size_t)ly->span_row[s] * d;
                double m = 0, a1 = 0, a2 = 0;
                for (int i = 0; i < d; i++) m += (double)qh[i] * kbar[i], a1 += (double)qh[i] * v1[i], a2 += (double)qh[i] * v2[i];
                double lam = sqrt(2 * log((double)ly->span[s].len));
                a[s] = (float)((m + lam * sqrt(a1 * a1 + a2 * a2)) / sqrt((double)d));
            }
        } else if (st->trained_zoom) {
            sekv_route_query(st->prm.W + ((size_t)layer * st->H + h) * dp * d, qh, d, dp, qhat);
            const float *kh = ly->khat + (size_t)h * ly->span_cap * dp;
            for (int s = 0; s < ns; s++) a[s] = sekv_route_logit(qhat, kh + (size_t)s * dp, dp, ly->span[s].len);
        } else {   /* untrained zoom: raw similarity to the coarse key, no size term */
            const float *K = ly->kv[h / st->g].K;
            for (int s = 0; s < ns; s++) {
                const float *kb = K + (size_t)ly->span_row[s] * d;
                double dot = 0;
                for (int i = 0; i < d; i++) dot += (double)qh[i] * kb[i];
                a[s] = (float)(dot / sqrt((double)d));
            }
        }
    }
}

/* Head h's zoom threshold tau on alpha~, as a logit: alpha~ > tau iff logit > this. */
static float tau_logit(const kv_state *st, int layer, int h) {
    /* route=1 has its own score scale: the trained thresholds belong to route=0's */
    double tau = st->route == 2        ? 0   /* the oracle: every span a candidate, ranked by mass */
                 : st->tau_override >= 0 ? st->tau_override
                 : st->route == 1      ? SEKV_TAU_UNTRAINED
                                       : st->prm.tau[(size_t)layer * st->H + h];
    return tau <= 0 ? -INFINITY : tau >= 1 ? INFINITY : (float)log(tau / (1 - tau));
}

/* Picks the spans group j reconstructs: candidates have some head's relevance above its
 * tau; by descending max relevance over the group's heads, each taken if its |S| rows
 * still fit in room (spans that do not fit are skipped). Marks zoom_h for the heads
 * that asked for each taken span. Returns the rows used. */
static int select_group(kv_state *st, int layer, int j, const float *scores, int room, cand *cs) {
    sekv_layer *ly = &st->layer[layer];
    int ns = ly->ns, nc = 0, used = 0;
    for (int s = 0; s < ns; s++) {
        float best = -INFINITY;
        int want = 0;
        for (int h = j * st->g; h < (j + 1) * st->g; h++) {
            float a = scores[(size_t)h * ns + s];
            want |= a > tau_logit(st, layer, h);
            if (a > best) best = a;
        }
        if (want) cs[nc++] = (cand){best, s};
    }
    qsort(cs, (size_t)nc, sizeof *cs, by_score);
    int32_t *sel = ly->sel + (size_t)j * ly->span_cap, n = 0;
    for (int i = 0; i < nc && used < room; i++) {
        int len = ly->span[cs[i].s].len;
        if (len > room - used) continue;
        sel[n++] = cs[i].s;
        used += len;
    }
    qsort(sel, (size_t)n, sizeof *sel, cmp_i32);
    int32_t *rr = ly->recon_row + (size_t)j * ly->span_cap;
    for (int s = 0; s < ns; s++) rr[s] = -1;
    int row = ly->n_rows;
    for (int i = 0; i < n; i++) {
        int s = sel[i];
        rr[s] = row;
        row += ly->span[s].len;
        for (int h = j * st->g; h < (j + 1) * st->g; h++)
            ly->zoom_h[(size_t)h * ly->span_cap + s] = scores[(size_t)h * ns + s] > tau_logit(st, layer, h);
    }
    for (int h = j * st->g; h < (j + 1) * st->g; h++)   /* what each head got, and why not */
        for (int s = 0; s < ns; s++) {
            size_t o = (size_t)h * ly->span_cap + s;
            ly->why[o] = ly->zoom_h[o]                                     ? SEKV_WHY_ZOOMED
                         : !(scores[(size_t)h * ns + s] > tau_logit(st, layer, h)) ? SEKV_WHY_BELOW
                         : ly->span[s].len > room                          ? SEKV_WHY_TOO_LONG
                                                                           : SEKV_WHY_NO_ROOM;
        }
    ly->n_sel[j] = n;
    ly->kv[j].n_recon = used;
    return used;
}

static void log_zoom(kv_state *st, int step, int layer, int head, int expanded, int spans) {
    if (st->n_zlog == st->zlog_cap) {
        size_t cap = st->zlog_cap ? 2 * st->zlog_cap : 1024;
        sekv_zoom_event *z = realloc(st->zlog, cap * sizeof *z);
        if (!z) sekv_die("out of memory (zoom log)", layer);
        st->zlog = z, st->zlog_cap = cap;
    }
    st->zlog[st->n_zlog++] = (sekv_zoom_event){step, layer, head, expanded, spans};
}

/* Scratch of one step: scores [H][ns] then the candidate list; entry lists per head. */
static cand *step_scratch(kv_state *st, int layer) {
    sekv_layer *ly = &st->layer[layer];
    size_t need = (size_t)st->H * ly->ns + (size_t)ly->ns * sizeof(cand) / sizeof(float) + 1;
    if ((size_t)st->scores_cap < need) {
        free(st->scores);
        st->scores = malloc(need * sizeof *st->scores);
        if (!st->scores) sekv_die("out of memory", layer);
        st->scores_cap = (int)need;
    }
    return (cand *)(st->scores + (size_t)st->H * ly->ns);
}

/* Rows a step may rebuild per kv group: B - P, plus under append the decoded rows that
 * sit on top of the budget (the room stays the prompt's); uncapped: unbounded. */
static int zoom_room(const kv_state *st, const sekv_layer *ly) {
    if (st->uncapped) return INT_MAX / 4;
    return st->B - ly->n_rows + (st->hold ? 0 : ly->total - st->n_prompt);
}

/* Every kv group's spans to rebuild this step (select_group); returns the most rows
 * one group rebuilds, *n_tasks the spans over all groups. */
static int select_spans(kv_state *st, int layer, const float *scores, cand *cs, int room, int *n_tasks) {
    sekv_layer *ly = &st->layer[layer];
    int most = 0;
    *n_tasks = 0;
    for (int j = 0; j < st->Hkv; j++) {
        int used = select_group(st, layer, j, scores, room, cs);
        if (used > most) most = used;
        *n_tasks += ly->n_sel[j];
    }
    return most;
}

/* Head h's entries, in position order: a full-resolution row (bias 0), a span's coarse
 * row (bias ln|S|) or, where h zooms into the span, its rebuilt rows (bias 0). Returns
 * the count; *expanded the spans zoomed, *spans the spans it could zoom into. */
static int head_entries(const kv_state *st, const sekv_layer *ly, int h, int32_t *idx, float *bias, int *expanded,
                        int *spans) {
    const uint8_t *zh = ly->zoom_h + (size_t)h * ly->span_cap;
    const int32_t *rr = ly->recon_row + (size_t)(h / st->g) * ly->span_cap;
    int n = 0;
    *expanded = *spans = 0;
    for (int r = 0; r < ly->n_rows; r++) {
        int s = ly->row_span[r];
        *spans += s >= 0;
        if (s < 0) {
            idx[n] = r, bias[n++] = 0;
        } else if (zh[s]) {
            for (int i = 0; i < ly->span[s].len; i++) idx[n] = rr[s] + i, bias[n++] = 0;
            (*expanded)++;
        } else {
            idx[n] = r, bias[n++] = logf((float)ly->span[s].len);
        }
    }
    return n;
}

/* One softmax per query head over its entries: on the device all heads of the layer in
 * one batched call (one round trip), else one by one here. */
static void attend_heads(kv_state *st, int layer, const float *q, float *out, int on_dev, int n_tasks) {
    sekv_layer *ly = &st->layer[layer];
    int H = st->H, d = st->d;
    if (st->idx_cap < H * ly->row_cap) {   /* one entry list per query head */
        free(st->idx), free(st->bias);
        st->idx = malloc((size_t)H * ly->row_cap * sizeof *st->idx);
        st->bias = malloc((size_t)H * ly->row_cap * sizeof *st->bias);
        if (!st->idx || !st->bias) sekv_die("out of memory", layer);
        st->idx_cap = H * ly->row_cap;
    }
    kb_decode_args *as = malloc((size_t)H * sizeof *as);
    if (!as) sekv_die("out of memory", layer);
    for (int h = 0; h < H; h++) {
        int j = h / st->g, expanded, spans;
        int32_t *idx = st->idx + (size_t)h * ly->row_cap;
        float *bias = st->bias + (size_t)h * ly->row_cap;
        int n = head_entries(st, ly, h, idx, bias, &expanded, &spans);
        as[h] = (kb_decode_args){.g = 1, .d = d, .n = n, .q = q + (size_t)h * d, .K = ly->kv[j].K,
                                 .V = ly->kv[j].V, .idx = idx, .bias = bias, .out = out + (size_t)h * d,
                                 .probs = NULL};
        ly->kept[h] = n;
        ly->events[h] += expanded;
        if (expanded) log_zoom(st, ly->steps, layer, h, expanded, spans);
    }
    if (!on_dev || sekv_dev_decode_heads(st, layer, as)) {
        if (on_dev && n_tasks) reconstruct_host(st, layer, n_tasks);   /* the device failed */
        for (int h = 0; h < H; h++) kb_get()->decode(&as[h]);
    }
    free(as);
}

/* One decode step of one layer, top to bottom: route -> select -> rebuild -> attend.
 * (The token's own row joins afterwards, in sekv_append below: append, or fold under
 * --decode hold.) */
void sekv_attend(kv_state *st, int layer, const float *q, float *out) {
    sekv_layer *ly = &st->layer[layer];
    if (!ly->ingested) sekv_die("attend before ingest", layer);
    cand *cs = step_scratch(st, layer);
    int room = zoom_room(st, ly), n_tasks = 0, most = 0;
    memset(ly->zoom_h, 0, (size_t)st->H * ly->span_cap);
    memset(ly->why, SEKV_WHY_OFF, (size_t)st->H * ly->span_cap);
    for (int j = 0; j < st->Hkv; j++) ly->n_sel[j] = 0, ly->kv[j].n_recon = 0;
    if (st->zoom && ly->ns > 0 && room > 0) {
        /* 1. route: every query head's relevance for every span */
        route(st, layer, q, st->scores);
        /* 2. select: per kv group, the spans over some head's tau that fit in the room */
        most = select_spans(st, layer, st->scores, cs, room, &n_tasks);
    }
    /* 3. rebuild the selected spans from their factors, after the persistent rows (only
     *    uncapped can outgrow the rows sized for B); on the CUDA backend on the device
     *    (sekv_dev.c), inside the batched attention call */
    if (sekv_grow_rows(st, ly, ly->n_rows + most)) sekv_die("out of memory", layer);
    int on_dev = sekv_dev_prepare(st, layer);
    if (n_tasks && !on_dev) reconstruct_host(st, layer, n_tasks);
    /* 4. attend: one softmax per query head over full, coarse and rebuilt rows */
    attend_heads(st, layer, q, out, on_dev, n_tasks);
    ly->steps++;
    sekv_track_peak(st, 0);
}

/* ---------------------------------------------------------------- append / fold */

/* 5. The decoded token joins at full resolution; under --decode hold the budget is kept
 * by folding (sekv_fold.c), under append it stays as it is. */
void sekv_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t) {
    sekv_layer *ly = &st->layer[layer];
    if (!ly->ingested) sekv_die("append before ingest", layer);
    int pos = ly->total, d = st->d;
    if (pos >= st->surp_cap) {
        int cap = 2 * st->surp_cap;
        float *s = realloc(st->surp, (size_t)cap * sizeof *s);
        if (!s) sekv_die("out of memory", layer);
        st->surp = s, st->surp_cap = cap;
    }
    st->surp[pos] = t->surprisal;
    if (sekv_grow_rows(st, ly, ly->n_rows + 1 + st->B)) sekv_die("out of memory", layer);
    int r = ly->n_rows++;
    sekv_rows_moved(st, ly, r);
    ly->row_span[r] = -1;
    ly->row_pos[r] = pos;
    for (int j = 0; j < st->Hkv; j++) {
        ly->kv[j].n_recon = 0;   /* last step's reconstruction is dropped */
        memcpy(ly->kv[j].K + (size_t)r * d, k + (size_t)j * d, d * sizeof(float));
        memcpy(ly->kv[j].V + (size_t)r * d, v + (size_t)j * d, d * sizeof(float));
        sekv_round_rows(st, ly->kv[j].K + (size_t)r * d, 1), sekv_round_rows(st, ly->kv[j].V + (size_t)r * d, 1);
    }
    ly->total++;
    if (st->hold) sekv_keep_budget(st, layer);
    sekv_track_peak(st, 0);
}
