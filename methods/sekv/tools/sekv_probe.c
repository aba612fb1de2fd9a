/* kvbench sekv-probe (a command SeKV brings: kv_method.commands): looks inside SeKV's zoom-in on NIAH cases through the model, for
 * tuning and tests on dev cases (never the reported grid). Per case it prefills the
 * prompt once (or, with --question-after, the context alone and the question through
 * decode steps), then for each parameter setting of sekv it ingests the prefill and
 * teacher-forces the needle's answer, measuring at every answer step:
 *   nll        mean -ln p(answer token) over the answer tokens after the first (the
 *              first comes from the uncompressed prefill's logits)
 *   precision  share of the (step, layer, query head, span) expansions that hit a span
 *              holding a needle token
 *   recall     share of the (step, layer, query head) decisions that expanded a needle span
 *   rows       mean rows attended per (layer, head) and step, against the budget B
 *   why        the (step, layer, head, needle span) decisions by outcome: zoomed, below
 *              the head's tau, longer than the whole room B - P, outranked (the room went
 *              to higher-scored spans), no routing (sekv_why)
 *   teacher    what training's targets would say at the same decisions: the query each
 *              (layer, head) sent, against the prompt's exact keys (softmax over the
 *              prompt, mass summed per span): how often the needle's span is the span of
 *              most mass and among the coverage targets (rho 0.9, as train-sekv), how many
 *              spans those targets hold, how often the router expanded the teacher's top
 *              span, and how often it did so where that span is the needle's. Separates
 *              the teacher signal from what the router learnt of it. */
#include "sekv_probe.h"
#include "../sekv.h"
#include "../../../kernels/stats.h"
#include "../../../model/model.h"
#include "../../../workloads/haystack.h"
#include "../../../workloads/niah.h"
#include "../../../kernels/cli_opt.h"
#include "../train/sekv_train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SETS SEKV_PROBE_MAX_SETS
#define MAX_LIST SEKV_PROBE_MAX_LIST

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench sekv-probe [--model F] [--haystack PATH] [--split dev|test] [--ctx LIST]\n"
            "                          [--depths LIST] [--budget B] [--question-after] --params P [--params P ...]\n"
            "\n"
            "Teacher-forces the NIAH answer through sekv for each --params setting (sekv's\n"
            "key=value list; \"\" = its defaults) on every (ctx, depth) case and prints, per\n"
            "setting: answer NLL, zoom precision and recall on the needle's spans, rows attended,\n"
            "and the teacher's view of the same decisions (exact attention summed per span: is\n"
            "the needle's span on top, did the router expand the top span); then every two\n"
            "settings paired case by case (exact sign-flip tests).\n"
            "Meant for dev cases: use contexts and depths outside the reported grid.\n"
            "\n"
            "  --model F          GGUF file or Hugging Face directory (default %s)\n"
            "  --haystack PATH    essays (default: the `make haystack` cache)\n"
            "  --split S          dev (default: the haystack text of kvbench run --split dev) or test\n"
            "  --ctx LIST         prompt lengths in tokens (default 768)\n"
            "  --depths LIST      needle depths in %% (default 35)\n"
            "  --budget B         fraction of the prompt or a token count (default 0.5)\n"
            "  --question-after   prefill the context, feed the question by decode steps\n"
            "  --params P         a sekv setting to probe (up to %d)\n",
            model_default_path(), MAX_SETS);
}

/* A comma-separated list of up to MAX_LIST numbers in [lo, hi] (whole ones when whole):
 * 0, or -1 after printing which value is wrong. */
static int parse_list(const char *flag, const char *s, double lo, double hi, int whole, double *out, int *n) {
    *n = 0;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !(v >= lo && v <= hi) || (whole && v != floor(v)) || *n == MAX_LIST ||
            (*end && *end != ',') || (*end == ',' && !end[1])) {
            fprintf(stderr, "kvbench sekv-probe: %s '%s': expected up to %d comma-separated %s in %.15g..%.15g\n", flag, s,
                    MAX_LIST, whole ? "whole numbers" : "numbers", lo, hi);
            return -1;
        }
        out[(*n)++] = v;
        if (!*end) return 0;
        p = end + 1;
    }
}

int sekv_probe_parse(int argc, char **argv, sekv_probe_opts *o) {
    *o = (sekv_probe_opts){.model_path = model_default_path(), .ctxs = {768}, .depths = {35}, .budget = 0.5,
                           .n_ctx = 1, .n_depth = 1};
    o->split = NIAH_DEV;   /* tuning reads dev cases */
    static const char *const bare[] = {"--help", "-h", "--question-after", NULL};
    for (int i = 1; i < argc; i++) {
        char a[64], why[160];
        const char *v;
        int r = kb_opt_next(argc, argv, &i, bare, a, sizeof a, &v);   /* --flag value, --flag=value */
        if (r != KB_OPT_OK) {
            fprintf(stderr, "kvbench sekv-probe: %s (see --help)\n", kb_opt_problem(r, a, why, sizeof why));
            return 2;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--question-after")) {
            o->question_after = 1;
            continue;
        }
        char *end;
        if (!strcmp(a, "--model")) o->model_path = v;
        else if (!strcmp(a, "--haystack")) o->hay_path = v;
        else if (!strcmp(a, "--split")) {
            if (strcmp(v, "dev") && strcmp(v, "test")) {
                fprintf(stderr, "kvbench sekv-probe: --split '%s': expected dev or test\n", v);
                return 2;
            }
            o->split = !strcmp(v, "dev") ? NIAH_DEV : NIAH_TEST;
        }
        else if (!strcmp(a, "--ctx")) {
            double c[MAX_LIST];
            if (parse_list(a, v, 1, SEKV_PROBE_MAX_CTX, 1, c, &o->n_ctx)) return 2;
            for (int k = 0; k < o->n_ctx; k++) o->ctxs[k] = (int)c[k];
        } else if (!strcmp(a, "--depths")) {
            if (parse_list(a, v, 0, 100, 0, o->depths, &o->n_depth)) return 2;
        } else if (!strcmp(a, "--budget")) {
            /* a fraction of the prompt, or above 1 a whole token count a prompt can have */
            errno = 0;
            o->budget = strtod(v, &end);
            if (end == v || *end || errno || !(o->budget > 0) ||
                (o->budget > 1 && (o->budget > SEKV_PROBE_MAX_CTX || o->budget != floor(o->budget)))) {
                fprintf(stderr,
                        "kvbench sekv-probe: --budget '%s': expected a fraction in (0,1] or a whole token count up to %d\n",
                        v, SEKV_PROBE_MAX_CTX);
                return 2;
            }
        } else if (!strcmp(a, "--params")) {
            if (o->n_sets == MAX_SETS) {
                fprintf(stderr, "kvbench sekv-probe: at most %d --params\n", MAX_SETS);
                return 2;
            }
            o->sets[o->n_sets++] = v;
        } else {
            fprintf(stderr, "kvbench sekv-probe: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!o->n_sets) {
        fprintf(stderr, "kvbench sekv-probe: give at least one --params setting (\"\" for sekv's defaults)\n");
        return 2;
    }
    return 0;
}

typedef struct {
    double nll, hit, exp, rec_hit, rec_all, rows;
    double why[SEKV_WHY_OFF + 1];   /* (step, layer, head, needle span) decisions by sekv_why */
    /* the teacher's view of the (step, layer, head) decisions with a needle span among the
     * prompt spans: the needle's span holds the most mass / is a coverage target; the
     * targets' share of the spans; the needle spans' share of the span mass; the router
     * expanded the teacher's top span; of the decisions with the needle's span on top,
     * those where the router expanded it (imitating the teacher where retrieval needs it) */
    double t_dec, t_top, t_cov, t_density, t_mass, t_agree, t_top_agree;
    int n_nll, n_rows, infeasible;
    double case_sum, case_sq;   /* per-case mean NLLs: their sum and sum of squares */
    int n_case;
    /* per case (index = case number; NAN where the case failed or had no zoom): mean
     * answer NLL, zoom precision and recall on the needle, for the paired comparison */
    double c_nll[MAX_LIST * MAX_LIST], c_prec[MAX_LIST * MAX_LIST], c_rec[MAX_LIST * MAX_LIST];
    char desc[512];         /* sekv_describe of the first case */
} probe_acc;

/* [lo, hi): the prompt tokens of the needle's answer words ("a sandwich and sit in
 * Dolores Park"), found by the tokens' text in the context part. -1 if not found. */
static int needle_tokens(const kv_tokenizer *t, const int32_t *ids, int n_context, int *lo, int *hi) {
    static const char key[] = "a sandwich and sit in Dolores Park";
    size_t cap = 1, len = 0;
    size_t *off = malloc(((size_t)n_context + 1) * sizeof *off);
    char *text = NULL;
    if (!off) return -1;
    for (int i = 0; i < n_context; i++) {
        int k = tok_piece(t, ids[i], 0, NULL, 0);
        cap += k > 0 ? (size_t)k : 0;
    }
    text = malloc(cap);
    if (!text) return free(off), -1;
    for (int i = 0; i < n_context; i++) {
        off[i] = len;
        int k = tok_piece(t, ids[i], 0, text + len, (int)(cap - len));
        len += k > 0 ? (size_t)k : 0;
    }
    off[n_context] = len;
    text[len] = 0;
    const char *hit = strstr(text, key);
    int rc = -1;
    if (hit) {
        size_t a = (size_t)(hit - text), b = a + sizeof key - 1;
        *lo = *hi = -1;
        for (int i = 0; i < n_context; i++) {
            if (*lo < 0 && off[i + 1] > a) *lo = i;
            if (off[i] < b) *hi = i + 1;
        }
        rc = *lo >= 0 && *hi > *lo ? 0 : -1;
    }
    free(off), free(text);
    return rc;
}

/* Span sp holds a token of the needle's answer words [lo, hi). */
static int on_needle(sekv_span sp, int lo, int hi) { return sp.start < hi && sp.start + sp.len > lo; }

/* After a decode step: the expansions of every (layer, head) against the needle's spans. */
static void count_zoom(const kv_state *st, const kv_model_config *cf, int lo, int hi, probe_acc *a, int32_t *buf) {
    for (int l = 0; l < cf->n_layer; l++)
        for (int h = 0; h < cf->n_head; h++) {
            int n = sekv_expanded(st, l, h, buf), any = 0;
            for (int i = 0; i < n; i++) {
                sekv_span sp = sekv_span_at(st, l, buf[i]);
                int on = on_needle(sp, lo, hi);
                a->hit += on, any |= on;
            }
            for (int s = 0; s < sekv_span_count(st, l); s++) {
                sekv_span sp = sekv_span_at(st, l, s);
                if (on_needle(sp, lo, hi)) a->why[sekv_why(st, l, h, s)]++;
            }
            a->exp += n;
            a->rec_hit += any, a->rec_all++;
            int P, R;
            sekv_resident(st, l, h / (cf->n_head / cf->n_head_kv), &P, &R);
            a->rows += P + R, a->n_rows++;
        }
}

/* The queries of the last decode step, [L][H][d], recorded by tap_attend on their way to
 * sekv's own attend (the probe drives one state at a time, on this thread). */
static float *tap_q;
static int tap_hd;   /* H * d */
static void tap_attend(kv_state *st, int layer, const float *q, float *out) {
    memcpy(tap_q + (size_t)layer * tap_hd, q, (size_t)tap_hd * sizeof *q);
    kv_sekv.attend(st, layer, q, out);
}

/* After a decode step: the teacher's span masses for each (layer, head), from the
 * recorded queries and the prefill's keys, against the needle's spans and the router. */
static void count_teacher(const kv_state *st, const kv_model_config *cf, const kv_prefill_out *pf, int lo, int hi,
                          probe_acc *a, int32_t *buf, double *sc, double *mass, uint8_t *y) {
    int n = pf->n, d = cf->head_dim, g = cf->n_head / cf->n_head_kv;
    double isd = 1.0 / sqrt((double)d);
    for (int l = 0; l < cf->n_layer; l++) {
        int ns = 0, needle = 0;
        while (ns < sekv_span_count(st, l)) {   /* prompt spans come first */
            sekv_span sp = sekv_span_at(st, l, ns);
            if (sp.start + sp.len > n) break;
            needle |= on_needle(sp, lo, hi);
            ns++;
        }
        if (!ns || !needle) continue;
        for (int h = 0; h < cf->n_head; h++) {
            const float *q = tap_q + ((size_t)l * cf->n_head + h) * d;
            const float *K = pf->K + ((size_t)l * cf->n_head_kv + h / g) * n * d;
            double mx = -INFINITY, tot = 0, on = 0;
            for (int i = 0; i < n; i++) {
                double x = 0;
                for (int c = 0; c < d; c++) x += (double)q[c] * K[(size_t)i * d + c];
                sc[i] = x * isd;
                mx = sc[i] > mx ? sc[i] : mx;
            }
            int top = 0;
            for (int s = 0; s < ns; s++) {
                sekv_span sp = sekv_span_at(st, l, s);
                mass[s] = 0;
                for (int i = sp.start; i < sp.start + sp.len; i++) mass[s] += exp(sc[i] - mx);
                tot += mass[s];
                top = mass[s] > mass[top] ? s : top;
            }
            sekv_coverage(mass, ns, 0.9, y);
            int k = 0, cov = 0;
            for (int s = 0; s < ns; s++) {
                int is = on_needle(sekv_span_at(st, l, s), lo, hi);
                k += y[s], cov |= is && y[s], on += is ? mass[s] : 0;
            }
            int ne = sekv_expanded(st, l, h, buf), agree = 0;
            for (int i = 0; i < ne; i++) agree |= buf[i] == top;
            int top_needle = on_needle(sekv_span_at(st, l, top), lo, hi);
            a->t_dec++;
            a->t_top += top_needle, a->t_top_agree += top_needle && agree;
            a->t_cov += cov, a->t_density += (double)k / ns, a->t_mass += tot > 0 ? on / tot : 0;
            a->t_agree += agree;
        }
    }
}

/* One setting on one prefilled case. */
static void probe_one(kv_model *m, const kv_prefill_out *pf, const int32_t *ids, int n, int n_pf, const int32_t *ans,
                      int n_ans, int lo, int hi, double budget, const char *params, uint64_t hash, probe_acc *a,
                      int ci) {
    const kv_model_config *cf = model_config(m);
    kv_setup s = {.n_layers = cf->n_layer, .n_heads = cf->n_head, .n_kv_heads = cf->n_head_kv,
                  .head_dim = cf->head_dim, .n_prompt = n_pf, .max_decode = n - n_pf + n_ans + 1,
                  .params = params, .model_hash = hash};
    if (budget <= 1) s.budget_frac = budget;
    else s.budget_tokens = (int)budget;
    char err[512];
    kv_state *st = kv_sekv.init(&s, err, sizeof err);
    float *logits = malloc((size_t)cf->n_vocab * sizeof *logits);
    int32_t *buf = malloc(((size_t)n + n_ans + 64) * sizeof *buf);
    double *sc = malloc((size_t)pf->n * sizeof *sc), *mass = malloc((size_t)pf->n * sizeof *mass);
    uint8_t *y = malloc((size_t)pf->n);
    kv_method tap = kv_sekv;
    tap.attend = tap_attend;
    tap_hd = cf->n_head * cf->head_dim;
    tap_q = malloc((size_t)cf->n_layer * tap_hd * sizeof *tap_q);
    double case_nll = 0, hit0 = a->hit, exp0 = a->exp, rh0 = a->rec_hit, ra0 = a->rec_all;
    int case_n = 0;   /* ci: this case's index */
    a->c_nll[ci] = a->c_prec[ci] = a->c_rec[ci] = NAN;
    if (!st || !logits || !buf || !sc || !mass || !y || !tap_q) {
        fprintf(stderr, "kvbench sekv-probe: %s\n", st ? "out of memory" : err);
        a->infeasible++;
        goto done;
    }
    for (int l = 0; l < cf->n_layer; l++) {
        kv_prefill p = prefill_layer(pf, l);
        if (kv_sekv.ingest(st, &p, err, sizeof err)) {
            fprintf(stderr, "kvbench sekv-probe: [%s] %s\n", params, err);
            a->infeasible++;
            goto done;
        }
    }
    if (!a->desc[0]) sekv_describe(st, a->desc, sizeof a->desc);
    memcpy(logits, pf->last_logits, (size_t)cf->n_vocab * sizeof *logits);
    for (int pos = n_pf; pos < n + n_ans; pos++) {   /* question tokens (question-after), then the answer */
        int id = pos < n ? ids[pos] : ans[pos - n];
        if (pos > n) {
            double s = model_surprisal(m, logits, id);
            a->nll += s, a->n_nll++, case_nll += s, case_n++;
        }
        if (pos == n + n_ans - 1) break;              /* the last answer token is only scored */
        kv_token info = {pos, (float)model_surprisal(m, logits, id), model_sent_end(m, id)};
        if (model_decode(m, &tap, st, id, pos, &info, logits)) {
            fprintf(stderr, "kvbench sekv-probe: decode failed at %d\n", pos);
            a->infeasible++;
            goto done;
        }
        if (pos >= n) {
            count_zoom(st, cf, lo, hi, a, buf);
            count_teacher(st, cf, pf, lo, hi, a, buf, sc, mass, y);
        }
    }
    if (case_n) {
        double c = case_nll / case_n;
        a->case_sum += c, a->case_sq += c * c, a->n_case++;
        a->c_nll[ci] = c;
        if (a->exp > exp0) a->c_prec[ci] = (a->hit - hit0) / (a->exp - exp0);
        if (a->rec_all > ra0) a->c_rec[ci] = (a->rec_hit - rh0) / (a->rec_all - ra0);
    }
done:
    if (st) kv_sekv.free(st);
    free(logits), free(buf), free(sc), free(mass), free(y), free(tap_q);
    tap_q = NULL;
}

/* Paired comparison of x against y over the cases where both are numbers: mean of
 * x - y, how often x is better / worse, and the two-sided p of the paired sign-flip
 * (permutation) test of the mean difference (st_perm_p: exact up to 20 non-zero
 * differences). */
static void paired(const char *what, const double *x, const double *y, int n_all, int lower_better) {
    double d[MAX_LIST * MAX_LIST], sum = 0;
    int n = 0, win = 0, loss = 0;
    for (int i = 0; i < n_all; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            d[n] = x[i] - y[i];
            win += lower_better ? d[n] < 0 : d[n] > 0, loss += lower_better ? d[n] > 0 : d[n] < 0;
            sum += d[n++];
        }
    if (!n) {
        printf("  %-15s no case with both values\n", what);
        return;
    }
    printf("  %-15s mean difference %+.4f over %d cases (%s is better); better in %d, worse in %d, tied in %d; "
           "sign-flip p = %.4g\n",
           what, sum / n, n, lower_better ? "lower" : "higher", win, loss, n - win - loss,
           st_perm_p(d, n, ST_PERM_B, ST_SEED));
}

int sekv_probe_main(int argc, char **argv) {
    sekv_probe_opts o;
    int prc = sekv_probe_parse(argc, argv, &o);
    if (prc == 1) return usage(stdout), 0;
    if (prc) return prc;
    const char *model_path = o.model_path, *hay_path = o.hay_path, *const *sets = o.sets;
    const int *ctxs = o.ctxs, n_ctx = o.n_ctx, n_depth = o.n_depth, n_sets = o.n_sets, qa = o.question_after,
              split = o.split;
    const double *depths = o.depths, budget = o.budget;
    char err[512];
    kv_model *m = model_load(model_path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "kvbench sekv-probe: %s\n", err);
        return 1;
    }
    char *dir = hay_path ? NULL : haystack_default_dir();
    size_t hay_len = 0;
    char *hay = haystack_load(hay_path ? hay_path : dir, &hay_len, err, sizeof err);
    free(dir);
    if (!hay) {
        fprintf(stderr, "kvbench sekv-probe: %s\n", err);
        model_free(m);
        return 1;
    }
    const kv_tokenizer *tok = model_tokenizer(m);
    uint64_t hash = model_content_hash(m);
    /* a setting sekv refuses (a bad value, a params file of another model) is a usage
     * error before the first case, as in kvbench run (kv_init_refused) */
    for (int k = 0; k < n_sets; k++) {
        const kv_model_config *cf = model_config(m);
        kv_setup s = {.n_layers = cf->n_layer, .n_heads = cf->n_head, .n_kv_heads = cf->n_head_kv,
                      .head_dim = cf->head_dim, .n_prompt = 256, .max_decode = 64, .budget_frac = 0.5,
                      .params = sets[k], .model_hash = hash};
        kv_state *st = kv_sekv.init(&s, err, sizeof err);
        if (!st) {   /* any other failure here (out of memory) would only print a table of NaNs */
            fprintf(stderr, "kvbench sekv-probe: --params \"%s\": %s\n", sets[k], err);
            free(hay);
            model_free(m);
            return kv_init_refused(err) ? 2 : 1;
        }
        kv_sekv.free(st);
    }
    niah_opts no;
    niah_defaults(&no);
    no.tok = tok, no.haystack = hay, no.haystack_len = hay_len, no.question_after = qa, no.split = split;
    int max_ctx = 0;
    for (int i = 0; i < n_ctx; i++) max_ctx = ctxs[i] > max_ctx ? ctxs[i] : max_ctx;
    niah_builder *nb = niah_open(&no, max_ctx, err, sizeof err);
    probe_acc acc[MAX_SETS] = {0};
    int rc = nb ? 0 : 1, n_cases = 0;
    if (!nb) fprintf(stderr, "kvbench sekv-probe: %s\n", err);
    int32_t ans[64];
    const char *answer = " eat a sandwich and sit in Dolores Park on a sunny day.";
    int n_ans = tok_encode(tok, answer, strlen(answer), 0, ans, 64);
    for (int ci = 0; !rc && ci < n_ctx; ci++)
        for (int di = 0; !rc && di < n_depth; di++) {
            tc_case tc;
            int32_t *ids = NULL;
            int n = 0, n_context = 0, lo, hi;
            if (niah_build(nb, ctxs[ci], depths[di], &tc, err, sizeof err) ||
                tc_tokenize(tok, &tc, &ids, &n, &n_context) || needle_tokens(tok, ids, n_context, &lo, &hi)) {
                fprintf(stderr, "kvbench sekv-probe: case ctx %d depth %g: %s\n", ctxs[ci], depths[di],
                        *err ? err : "no needle in the tokens");
                rc = 1;
                break;
            }
            kv_prefill_out pf;
            kv_needs needs = {0};
            int n_pf = qa ? n_context : n;
            if (model_prefill(m, ids, n_pf, &needs, &pf, err, sizeof err)) {
                fprintf(stderr, "kvbench sekv-probe: %s\n", err);
                rc = 1;
            } else {
                for (int k = 0; k < n_sets; k++)
                    probe_one(m, &pf, ids, n, n_pf, ans, n_ans, lo, hi, budget, sets[k], hash, &acc[k], n_cases);
                prefill_out_free(&pf);
                n_cases++;
                fprintf(stderr, "kvbench sekv-probe: case ctx %d depth %g done (needle tokens %d..%d of %d)\n",
                        ctxs[ci], depths[di], lo, hi, n);
            }
            free(ids);
            tc_case_free(&tc);
        }
    for (int k = 0; !rc && k < n_sets; k++) {
        const probe_acc *a = &acc[k];
        /* 95% Student-t half-width of the mean over cases (each case's NLL is its mean) */
        double cm = a->n_case ? a->case_sum / a->n_case : NAN, cv = 0;
        if (a->n_case > 1) cv = (a->case_sq - a->n_case * cm * cm) / (a->n_case - 1);
        double half = a->n_case > 1 ? st_t_quantile(0.975, a->n_case - 1) * sqrt(cv > 0 ? cv : 0) / sqrt(a->n_case) : NAN;
        double nw = 0;
        for (int w = 0; w <= SEKV_WHY_OFF; w++) nw += a->why[w];
        nw = nw > 0 ? nw : NAN;
        printf("params \"%s\": cases %d, infeasible %d, nll %.4f, precision %.4f, recall %.4f, rows %.1f\n  %s\n"
               "  answer NLL per case: mean %.3f +- %.3f (95%%, Student t, n = %d)\n"
               "  needle spans: zoomed %.3f, below tau %.3f, longer than the room %.3f, outranked %.3f, no routing %.3f\n"
               "  teacher (exact attention, %.0f decisions): needle span on top %.3f, a coverage target %.3f; targets "
               "%.3f of the spans; needle mass share %.3f; router expanded the top span %.3f, the needle's when on top %.3f\n",
               sets[k], n_cases, a->infeasible, a->n_nll ? a->nll / a->n_nll : NAN, a->exp ? a->hit / a->exp : NAN,
               a->rec_all ? a->rec_hit / a->rec_all : NAN, a->n_rows ? a->rows / a->n_rows : NAN,
               a->desc[0] ? a->desc : "(no case got past ingest)", cm, half, a->n_case, a->why[SEKV_WHY_ZOOMED] / nw,
               a->why[SEKV_WHY_BELOW] / nw, a->why[SEKV_WHY_TOO_LONG] / nw, a->why[SEKV_WHY_NO_ROOM] / nw,
               a->why[SEKV_WHY_OFF] / nw, a->t_dec, a->t_top / a->t_dec, a->t_cov / a->t_dec, a->t_density / a->t_dec,
               a->t_mass / a->t_dec, a->t_agree / a->t_dec, a->t_top_agree / a->t_top);
    }
    int n_run = n_cases;   /* cases prefilled: per-case arrays are indexed 0..n_run */
    for (int k = 0; !rc && k < n_sets; k++) {
        printf("params \"%s\" per case (nll / precision / recall):", sets[k]);
        for (int c = 0; c < n_run; c++) printf(" [%.3f %.3f %.3f]", acc[k].c_nll[c], acc[k].c_prec[c], acc[k].c_rec[c]);
        printf("\n");
    }
    for (int j = 0; !rc && j < n_sets; j++)   /* every pair of settings, each later one against each earlier */
        for (int k = j + 1; k < n_sets; k++) {
            printf("paired: \"%s\" against \"%s\", case by case:\n", sets[k], sets[j]);
            paired("answer NLL", acc[k].c_nll, acc[j].c_nll, n_run, 1);
            paired("zoom precision", acc[k].c_prec, acc[j].c_prec, n_run, 0);
            paired("zoom recall", acc[k].c_rec, acc[j].c_rec, n_run, 0);
        }
    if (nb) niah_close(nb);
    free(hay);
    model_free(m);
    return rc;
}
