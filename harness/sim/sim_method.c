/* One method x budget of kvbench sim through the method's own code (see sim.h).
 *
 * The measured layers (as many as the driver could hold) are ingested in order, then
 * --decode tokens are appended and attended on every measured layer, as the engine does.
 * Layers are independent for every method except those with a per-layer schedule
 * (kv_method.layer_budgets, PyramidKV): for those every layer is run, in batches of the
 * layers held (a fresh state per batch, layer numbers as in the model, the inputs of the
 * held layers reused), so the schedule is computed for every layer. For the others the
 * measured layers are scaled by L / measured:
 *   steady and slow bytes, rows         x L/m
 *   prefill peak                        measured peak + (L/m - 1) x bytes after ingest
 *                                       (the transient uncompressed layer counts once)
 *   decode peak                         max over steps of the scaled bytes, plus the
 *                                       measured excess of the method's own running peak
 * With m = L nothing is scaled: the figures are the method's memory() as a run records it. */
#include "sim.h"
#include "../identity/run_ident.h"
#include "../../kernels/host.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kv_setup setup_of(const sim_case *c, double budget) {
    const kv_model_config *cf = &c->shape->cfg;
    kv_setup s = {.n_layers = cf->n_layer, .n_heads = cf->n_head, .n_kv_heads = cf->n_head_kv, .head_dim = cf->head_dim,
                  .n_prompt = c->ctx, .max_decode = c->decode + 1, .kv_type = c->kv_type, .params = c->params,
                  .model_hash = c->shape->model_hash, .decode_rule = c->decode_rule};
    if (budget <= 1) s.budget_frac = budget;
    else s.budget_tokens = (int)budget;
    return s;
}

/* Bytes per decode step the method moves up from the slow tier (kv_method.slow_rows:
 * SeKV's reconstructed rows, SentenceKV's re-gathered working set; 0 for the others). */
static double slow_read_of(const kv_method *m, const kv_state *st, const sim_case *c, int l0, int l1) {
    double row = 2.0 * c->shape->cfg.head_dim * c->elem_bytes, rows = 0;
    for (int l = l0; l < l1; l++) rows += m->slow_rows(st, l);
    return rows * row;
}

typedef struct {
    kv_mem after_ingest, end;
    double *dec;        /* [decode + 1] fast bytes after ingest and after each step */
    double slow_read;
} batch_out;

static const kv_rope sim_no_rope = {0, 0, NULL, 1};

/* Layers [l0, l1) through a fresh state. 0; 1 infeasible/error at ingest (r->why); -1
 * configuration refused (r->why). */
static int run_batch(const sim_case *c, const kv_method *m, const kv_setup *s, int l0, int l1, batch_out *b,
                     sim_result *r) {
    const kv_model_config *cf = &c->shape->cfg;
    char err[512] = "";
    kv_state *st = m->init(s, err, sizeof err);
    if (!st) {
        snprintf(r->why, sizeof r->why, "%s", *err ? err : "init refused the setup");
        if (kv_init_refused(err)) return -1;
        r->status = strncmp(err, "infeasible", 10) ? "error" : "infeasible";
        return 1;
    }
    if (!*r->params) m->params_used(st, r->params, sizeof r->params);
    int rc = 0;
    for (int l = l0; l < l1 && !rc; l++) {
        const sim_layer *ly = &c->layers[l - l0];
        kv_prefill p = {.layer = l, .n = c->ctx, .K = ly->K, .V = ly->V, .kv_stride = (size_t)c->ctx * cf->head_dim,
                        .col_mass = ly->col_mass, .win_probs = ly->win_probs, .win = ly->win,
                        .surprisal = c->surprisal, .sent_end = c->sent_end,
                        /* door version 4: random queries without RoPE (a rope of 0 channels), a random Wo */
                        .Q = ly->Q, .q_stride = (size_t)ly->q_rows * cf->head_dim, .q_rows = ly->q_rows,
                        .rope = ly->Q ? &sim_no_rope : NULL, .Wo = ly->Wo, .embd = ly->Wo ? (int)(cf->n_head * cf->head_dim) : 0};
        if (m->ingest(st, &p, err, sizeof err)) {
            snprintf(r->why, sizeof r->why, "ingest layer %d: %s", l, err);
            r->status = strncmp(err, "infeasible", 10) ? "error" : "infeasible";
            rc = 1;
        }
    }
    if (!rc) {
        char used[sizeof r->params];   /* what an automatic fit chose, once ingested */
        m->params_used(st, used, sizeof used);
        if (*used) snprintf(r->params, sizeof r->params, "%s", used);
        m->memory(st, &b->after_ingest);
        b->dec[0] = (double)b->after_ingest.fast_bytes;
        size_t H = cf->n_head, Hkv = cf->n_head_kv, d = cf->head_dim;
        float *q = malloc(H * d * sizeof *q), *out = malloc(H * d * sizeof *out);
        float *k = malloc(Hkv * d * sizeof *k), *v = malloc(Hkv * d * sizeof *v);
        if (!q || !out || !k || !v) {
            snprintf(r->why, sizeof r->why, "out of memory for the decode step");
            r->status = "error";
            rc = 1;
        }
        for (int step = 0; !rc && step < c->decode; step++) {
            int pos = c->ctx + step, from = (int)(((long)step * 7919 + 1) % c->ctx);
            kv_token tok = {pos, c->surprisal[from], c->sent_end[from]};
            for (int l = l0; l < l1; l++) {
                sim_token(c->stats, l - l0, (int)H, (int)Hkv, (int)d, c->seed, (uint64_t)step, q, k, v);
                m->append(st, l, k, v, &tok);
                m->attend(st, l, q, out);
            }
            kv_mem mem;
            m->memory(st, &mem);
            b->dec[step + 1] = (double)mem.fast_bytes;
        }
        free(q), free(out), free(k), free(v);
        if (!rc) {
            m->memory(st, &b->end);
            b->slow_read = slow_read_of(m, st, c, l0, l1);
        }
    }
    m->free(st);
    return rc;
}

static double maxd(double a, double b) { return a > b ? a : b; }

int sim_method_run(const sim_case *c, const kv_method *m, double budget, sim_result *r) {
    const int L = c->shape->cfg.n_layer, T = c->decode;
    memset(r, 0, sizeof *r);
    r->status = "ok";
    r->n_layers_model = L;
    kv_setup s = setup_of(c, budget);
    r->budget_tokens = kv_budget(&s);
    if (c->params) snprintf(r->params, sizeof r->params, "%s", c->params);
    int held = c->n_layers_made < L ? c->n_layers_made : L;
    r->measured = held;
    r->batched = m->layer_budgets && held < L;
    int nb = r->batched ? (L + held - 1) / held : 1;
    double *dec_total = calloc((size_t)T + 1, sizeof *dec_total), *dec = calloc((size_t)T + 1, sizeof *dec);
    if (!dec_total || !dec) {
        free(dec_total), free(dec);
        r->status = "error";
        snprintf(r->why, sizeof r->why, "out of memory");
        return 0;
    }
    double t0 = kb_now_s(), prefix = 0, prefill_peak = 0, excess = 0;
    kv_mem sum = {0};
    int rc = 0;
    for (int bi = 0; bi < nb && !rc; bi++) {
        int l0 = bi * held, l1 = l0 + held < L ? l0 + held : L;
        batch_out b = {.dec = dec};
        rc = run_batch(c, m, &s, l0, r->batched ? l1 : held, &b, r);
        if (rc) break;
        double f = r->batched ? 1.0 : (double)L / held;
        double ingest = (double)b.after_ingest.fast_bytes, dmax = 0;
        /* the prefill peak: earlier batches' layers are resident under this one's peak */
        prefill_peak = maxd(prefill_peak, prefix + (double)b.after_ingest.fast_peak + (f - 1) * ingest);
        prefix += ingest * f;
        for (int k = 0; k <= T; k++) dec_total[k] += dec[k] * f, dmax = maxd(dmax, dec[k]);
        /* a running peak above the prefill's was reached while decoding: by this much over
         * the most held after a step (an appended row before an eviction) */
        if (b.end.fast_peak > b.after_ingest.fast_peak) excess = maxd(excess, (double)b.end.fast_peak - dmax);
        sum.fast_bytes += (size_t)llround((double)b.end.fast_bytes * f);
        sum.fast_aux_bytes += (size_t)llround((double)b.end.fast_aux_bytes * f);
        sum.slow_bytes += (size_t)llround((double)b.end.slow_bytes * f);
        sum.slow_peak += (size_t)llround((double)b.end.slow_peak * f);
        sum.fast_tokens += (long)llround((double)b.end.fast_tokens * f);
        r->slow_read += b.slow_read * f;
    }
    r->seconds = kb_now_s() - t0;
    if (!rc) {
        double dpeak = 0;
        for (int k = 0; k <= T; k++) dpeak = maxd(dpeak, dec_total[k]);
        r->fast_prefill_peak = prefill_peak;
        r->fast_decode_peak = dpeak;
        sum.fast_peak = (size_t)llround(maxd(prefill_peak, dpeak + excess));
        r->mem = sum;
        r->fast_kv_read = (double)sum.fast_bytes;
    }
    free(dec_total), free(dec);
    return rc < 0 ? -1 : 0;
}
