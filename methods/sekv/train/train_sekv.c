/* kvbench train-sekv: teacher data for every corpus document (cached), then AdamW steps
 * over the documents in shuffled epochs, one document's mined positions per step. */
#include "train_sekv.h"
#include "sekv_teacher.h"
#include "train_ckpt.h"
#include "../../../kernels/core.h"
#include "../../../kernels/utf8.h"
#include "../../../kernels/host.h"
#include "../../../kernels/cli_opt.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { HELD_OUT_DEFAULT = 4, MAX_STAGES = TRAIN_MAX_STAGES, MAX_FIT_BUDGETS = TRAIN_MAX_FIT_BUDGETS };

static void usage(FILE *f) {
    sekv_teacher_cfg t = sekv_teacher_defaults();
    fprintf(f,
            "usage: kvbench train-sekv [--model F] [--corpus DIR] --out params.bin [--steps N]\n"
            "                          [--seed S] [--rank R] [--threads N] [--max-docs N] [--ctx N]\n"
            "                          [--candidates N] [--keep N] [--window N] [--alpha A|fit]\n"
            "                          [--fit-budgets B,..] [--p-max P] [--alpha-grid LO:HI:STEP]\n"
            "                          [--local N] [--l-max N|none] [--cache DIR|none] [--budget-norm row|span]\n"
            "                          [--gate-norm sum|mean]\n"
            "                          [--lambda-budget X] [--lambda-order X] [--held-out N]\n"
            "                          [--eval-every K]\n"
            "                          [--log FILE.csv] [--checkpoint FILE] [--time-limit S]\n"
            "\n"
            "Trains SeKV's zoom-in (routing projections W, thresholds tau, rank gate; the model\n"
            "stays frozen) to match the model's full attention at mined positions of long\n"
            "documents, and writes the parameter file for the sekv method (params_file=FILE).\n"
            "\n"
            "  --model F        GGUF file (default %s)\n"
            "  --corpus DIR     directory of .txt documents (default: where `make corpus` writes,\n"
            "                   $KVBENCH_CORPUS, $KVBENCH_CACHE/corpus or ~/.cache/kvbench/corpus)\n"
            "  --out FILE       parameter file to write (required)\n"
            "  --steps N        optimiser steps, one document per step (default 300)\n"
            "  --seed S         initial parameters and document order (default 1)\n"
            "  --rank R         rank cap of the span factors: 8, 32 or 64 (default %d)\n"
            "  --threads N      worker threads (default: all CPUs)\n"
            "  --max-docs N     documents used, evenly spread over the sorted list (default 40)\n"
            "  --ctx N[,M..]    tokens per document; longer ones are cut (default 2048). A list is a\n"
            "                   curriculum: the documents sorted by length are split into as many\n"
            "                   groups (the longest last), group k cut to the k-th length and trained\n"
            "                   on in the k-th equal share of the steps\n"
            "  --candidates N   evenly spaced candidate positions per document (default %d)\n"
            "  --keep N         positions kept per document, most far-reaching first (default %d)\n"
            "  --window N       a candidate's far share counts attention more than N tokens back\n"
            "                   (default 0 = a sixteenth of the document; the authors' code: 512)\n"
            "  --alpha A|fit    anchor threshold mu + A*sigma for the segmentation (default %g);\n"
            "                   fit = per document, as the sekv method fits it per prompt: the\n"
            "                   smallest alpha on --alpha-grid with P <= p_max*B at a budget drawn\n"
            "                   from --fit-budgets (document i takes budget i mod count)\n"
            "  --fit-budgets B  budget fractions for --alpha fit (default 0.05,0.1,0.2)\n"
            "  --p-max P        share of B the persistent part may take (default 0.2, the sekv default)\n"
            "  --alpha-grid G   LO:HI:STEP (default 0.5:8:0.25, the sekv default)\n"
            "  --local N        most recent tokens at full resolution (default 0; sekv uses 32)\n"
            "  --l-max N|none   spans longer than N tokens split into balanced pieces of at most N\n"
            "                   (sekv's l_max; default none = maximal runs between anchors, the\n"
            "                   paper); 32 trains at the capped operating point of sekv-spread\n"
            "  --cache DIR      teacher data per document, reused across runs (default\n"
            "                   $KVBENCH_CACHE/sekv-train or ~/.cache/kvbench/sekv-train; none = off);\n"
            "                   past 1.5 GB of data, documents are read from it at each use\n"
            "  --budget-norm M  the z budget: row = expanded spans per (position, layer, head),\n"
            "                   averaged over rows (default); span = the expansion rate, on the\n"
            "                   zoom BCE's scale\n"
            "  --gate-norm M    the rank gate's reconstruction and m-budget terms: sum = sums of\n"
            "                   s^2 and m over spans and directions (default; their scale follows\n"
            "                   the model's key and value norms); mean = the share of each span's\n"
            "                   energy dropped and the mean gate, averaged over spans (on the\n"
            "                   KL's and BCE's scale for any model)\n"
            "  --lambda-budget X  weight of the budget term once ramped in (default %g)\n"
            "  --lambda-order X weight of the span-order term [kvbench] (default 0 = off, the\n"
            "                   reference's loss): per row, the cross-entropy of the softmax of the\n"
            "                   routing logits over the visible spans against the teacher's share\n"
            "                   of attention on each span, so that spans are ranked as the teacher\n"
            "                   ranks them (sekv expands them best-first until the room is full)\n"
            "  --held-out N     documents of the selection held out of training (every\n"
            "                   (documents/N)-th one; default %d, off with fewer than 2N\n"
            "                   documents; 0 = off): every K steps the loss on them (budget\n"
            "                   at full weight) is measured and the parameters with the\n"
            "                   lowest one are written (early stopping)\n"
            "  --eval-every K   steps between held-out checks (default: steps/20)\n"
            "  --log FILE       loss curve as CSV, one line per step (appended to on resume)\n"
            "  --checkpoint F   parameters, optimiser moments, step, document order and the best\n"
            "                   held-out state, written at every held-out check and at the end;\n"
            "                   when F exists and was written by the same configuration, training\n"
            "                   resumes from it (a different configuration is an error)\n"
            "  --time-limit S   stop after S seconds of optimiser steps, writing the checkpoint\n"
            "                   (needs --checkpoint; exit status 3: rerun the command to go on)\n"
            "\n"
            "Loss (reference §8): KL(teacher || student attention) + BCE zoom targets + gated\n"
            "reconstruction error + a budget term ramped in over the first half; AdamW lr 1e-3,\n"
            "weight decay 0.01, cosine schedule with 10%% warm-up, gradient clipping at 1.\n",
            model_default_path(), t.rank, t.candidates, t.keep, t.alpha, sekv_loss_defaults().lambda_budget,
            HELD_OUT_DEFAULT);
}

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kb_vcomplain("train-sekv", fmt, ap);
    va_end(ap);
    return -1;
}

static int parse_int(const char *flag, const char *s, long lo, long hi, long *out) {
    if (kb_parse_long(s, lo, hi, out)) return fail("%s '%s': expected an integer in %ld..%ld", flag, s, lo, hi);
    return 0;
}

/* A loss weight: a finite number in 0..100. */
static int parse_weight(const char *flag, const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0 || v > 100) return fail("%s '%s': expected a number in 0..100", flag, s);
    *out = v;
    return 0;
}

/* $env, else the cache's leaf. */
static const char *default_dir(const char *env, const char *leaf, char *buf, size_t len) {
    const char *e = getenv(env);
    return e && *e ? e : kb_cache_path(leaf, buf, len);
}

int train_sekv_parse(int argc, char **argv, train_opts *o, int *help) {
    static char corpus[1024], cache[1024];
    *o = (train_opts){.model = model_default_path(), .steps = 300, .threads = 0, .max_docs = 40,
                      .ctx = 2048, .n_stages = 1, .stage_ctx = {2048}, .n_fit = 3,
                      .fit_budgets = {0.05, 0.1, 0.2}, .seed = 1, .tc = sekv_teacher_defaults(), .mem_mb = 1536,
                      .held_out = HELD_OUT_DEFAULT, .lambda_budget = sekv_loss_defaults().lambda_budget};
    o->corpus = default_dir("KVBENCH_CORPUS", "corpus", corpus, sizeof corpus);
    o->cache = default_dir("KVBENCH_SEKV_CACHE", "sekv-train", cache, sizeof cache);
    o->rank = o->tc.rank;
    static const char *const bare[] = {"--help", "-h", NULL};
    for (int i = 1; i < argc; i++) {
        char a[64], why[160];
        const char *v;
        int r = kb_opt_next(argc, argv, &i, bare, a, sizeof a, &v);   /* --flag value, --flag=value */
        if (r != KB_OPT_OK) return fail("%s (see --help)", kb_opt_problem(r, a, why, sizeof why));
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help = 1;
            return 0;
        }
        long x = 0;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--corpus")) o->corpus = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--cache")) o->cache = v;
        else if (!strcmp(a, "--log")) o->log = v;
        else if (!strcmp(a, "--budget-norm")) {
            if (strcmp(v, "row") && strcmp(v, "span")) return fail("--budget-norm '%s': expected row or span", v);
            o->budget_per_span = !strcmp(v, "span");
        } else if (!strcmp(a, "--gate-norm")) {
            if (strcmp(v, "sum") && strcmp(v, "mean")) return fail("--gate-norm '%s': expected sum or mean", v);
            o->gate_norm = !strcmp(v, "mean");
        }
        else if (!strcmp(a, "--lambda-budget")) {
            if (parse_weight(a, v, &o->lambda_budget)) return -1;
        } else if (!strcmp(a, "--lambda-order")) {
            if (parse_weight(a, v, &o->lambda_order)) return -1;
        } else if (!strcmp(a, "--held-out")) {
            if (parse_int(a, v, 0, 1000, &x)) return -1;
            o->held_out = (int)x, o->held_out_given = 1;
        } else if (!strcmp(a, "--eval-every")) {
            if (parse_int(a, v, 1, 10000000, &x)) return -1;
            o->eval_every = (int)x;
        } else if (!strcmp(a, "--alpha") && !strcmp(v, "fit")) {
            o->fit_alpha = 1;
        } else if (!strcmp(a, "--alpha")) {
            char *end;
            o->fit_alpha = 0;
            o->tc.alpha = strtod(v, &end);
            if (end == v || *end || !isfinite(o->tc.alpha) || o->tc.alpha < 0 || o->tc.alpha > 10)
                return fail("--alpha '%s': expected a number in 0..10, or fit", v);
        } else if (!strcmp(a, "--fit-budgets")) {
            o->n_fit = 0;
            for (const char *q = v; *q;) {
                char *end;
                double b = strtod(q, &end);
                if (end == q || !isfinite(b) || b <= 0 || b > 1 || o->n_fit == MAX_FIT_BUDGETS || (*end && *end != ','))
                    return fail("--fit-budgets '%s': expected up to %d fractions in (0, 1], comma-separated", v,
                                MAX_FIT_BUDGETS);
                o->fit_budgets[o->n_fit++] = b;
                q = *end ? end + 1 : end;
            }
            if (!o->n_fit) return fail("--fit-budgets '': expected at least one fraction");
        } else if (!strcmp(a, "--p-max")) {
            char *end;
            o->tc.p_max = strtod(v, &end);
            if (end == v || *end || !isfinite(o->tc.p_max) || o->tc.p_max <= 0 || o->tc.p_max > 1)
                return fail("--p-max '%s': expected a number in (0, 1]", v);
        } else if (!strcmp(a, "--alpha-grid")) {
            double lo, hi, st;
            char tail;
            if (sscanf(v, "%lf:%lf:%lf%c", &lo, &hi, &st, &tail) != 3 || !(lo > 0) || !(hi >= lo) || !(st > 0) ||
                hi > 10 || (hi - lo) / st > 1000)
                return fail("--alpha-grid '%s': expected LO:HI:STEP with 0 < LO <= HI <= 10, STEP > 0, at most 1000 "
                            "values", v);
            o->tc.grid_lo = lo, o->tc.grid_hi = hi, o->tc.grid_step = st;
        } else if (!strcmp(a, "--local")) {
            if (parse_int(a, v, 0, 4096, &x)) return -1;
            o->tc.local = (int)x;
        } else if (!strcmp(a, "--l-max")) {
            if (!strcmp(v, "none")) o->tc.l_max = SEKV_LMAX_NONE;
            else if (kb_parse_long(v, o->tc.l_min, 4096, &x))
                return fail("--l-max '%s': expected none or an integer in %d..4096", v, o->tc.l_min);
            else o->tc.l_max = (int)x;
        } else if (!strcmp(a, "--window")) {
            if (parse_int(a, v, 0, 1 << 20, &x)) return -1;
            o->tc.window = (int)x;
        } else if (!strcmp(a, "--checkpoint")) {
            o->checkpoint = v;
        } else if (!strcmp(a, "--time-limit")) {
            char *end;
            o->time_limit = strtod(v, &end);
            if (end == v || *end || !isfinite(o->time_limit) || o->time_limit <= 0)
                return fail("--time-limit '%s': expected seconds > 0", v);
        } else if (!strcmp(a, "--seed")) {
            if (parse_int(a, v, 0, 0x7fffffffL, &x)) return -1;
            o->seed = (uint64_t)x;
        } else if (!strcmp(a, "--steps")) {
            if (parse_int(a, v, 1, 10000000, &x)) return -1;
            o->steps = (int)x;
        } else if (!strcmp(a, "--rank")) {
            if (parse_int(a, v, 1, 64, &x)) return -1;
            if (x != 8 && x != 32 && x != 64) return fail("--rank %ld: expected 8, 32 or 64", x);
            o->rank = (int)x;
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(a, v, 1, 1024, &x)) return -1;
            o->threads = (int)x;
        } else if (!strcmp(a, "--max-docs")) {
            if (parse_int(a, v, 1, 1000000, &x)) return -1;
            o->max_docs = (int)x;
        } else if (!strcmp(a, "--ctx")) {
            o->n_stages = 0;
            char buf[128];
            if (strlen(v) >= sizeof buf) return fail("--ctx '%.40s...': too long, expected N or N,M,..", v);
            snprintf(buf, sizeof buf, "%s", v);
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o->n_stages == MAX_STAGES) return fail("--ctx '%s': at most %d lengths", v, MAX_STAGES);
                if (parse_int(a, t, 64, 1 << 20, &x)) return -1;
                if (o->n_stages && x <= o->stage_ctx[o->n_stages - 1])
                    return fail("--ctx '%s': a curriculum's lengths must ascend", v);
                o->stage_ctx[o->n_stages++] = (int)x;
            }
            if (!o->n_stages || strchr(",", v[strlen(v) - 1])) return fail("--ctx '%s': expected N or N,M,..", v);
            o->ctx = o->stage_ctx[o->n_stages - 1];
        } else if (!strcmp(a, "--candidates")) {
            if (parse_int(a, v, 1, 100000, &x)) return -1;
            o->tc.candidates = (int)x;
        } else if (!strcmp(a, "--keep")) {
            if (parse_int(a, v, 1, 100000, &x)) return -1;
            o->tc.keep = (int)x;
        } else
            return fail("unknown option '%s' (see --help)", a);
    }
    if (!o->out) return fail("--out FILE is required (see --help)");
    if (o->held_out_given && o->held_out * 2 > o->max_docs)
        return fail("--held-out %d: needs at least twice as many documents (--max-docs %d)", o->held_out, o->max_docs);
    if (o->tc.keep > o->tc.candidates)
        return fail("--keep %d exceeds --candidates %d", o->tc.keep, o->tc.candidates);
    if (o->time_limit > 0 && !o->checkpoint) return fail("--time-limit needs --checkpoint FILE (to resume from)");
    if (o->n_stages > o->steps) return fail("--ctx: %d lengths need at least as many --steps", o->n_stages);
    o->tc.rank = o->rank;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted *.txt names of dir; NULL (message printed) when there are none. */
static char **list_docs(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fail("%s: cannot open corpus directory (%s; `make corpus` builds it)", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt")) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) break;
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (!n) {
        free(names);
        fail("%s: no .txt documents (`make corpus` builds the corpus)", dir);
        return NULL;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    *count = n;
    return names;
}

static int mkdirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0755);
            *p = '/';
        }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

static void fmt_time(double s, char *buf, size_t len) {
    if (s < 60) snprintf(buf, len, "%.0fs", s);
    else if (s < 3600) snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, len, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

/* One prepared document: resident, or in its cache file. */
typedef struct {
    char name[256], path[1100];
    sekv_tdoc doc;
    int resident;
    int n, stage;          /* tokens used; curriculum stage */
    double budget, alpha;  /* --alpha fit: the budget drawn and the alpha fitted */
    uint64_t key;          /* teacher-data key (the checkpoint's configuration hash covers it) */
} train_doc;

static int cmp_len(const void *a, const void *b) {   /* (length, index) pairs, ascending */
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The loss (and, with g, its gradient) on one document, loading it when not resident. */
static int doc_loss(const train_doc *d, const sekv_tparams *th, const sekv_loss_cfg *lc, double lb,
                    sekv_tparams *g, sekv_loss_parts *parts) {
    sekv_tdoc tmp;
    const sekv_tdoc *doc = &d->doc;
    char err[512];
    if (!d->resident) {
        if (sekv_tdoc_load(&tmp, d->path, err, sizeof err)) return fail("%s", err);
        doc = &tmp;
    }
    int rc = sekv_train_loss(th, doc, NULL, 0, lc, lb, g, parts, NULL);
    if (!d->resident) sekv_tdoc_free(&tmp);
    if (rc) return fail("%s: loss failed (shape mismatch or out of memory)", d->name);
    return 0;
}

/* Mean loss parts over the held-out documents, the budget term at its full weight (so
 * checks at any step compare). 0 or -1. */
static int held_out_loss(const train_doc *docs, const int *idx, int n, const sekv_tparams *th,
                         const sekv_loss_cfg *lc, sekv_loss_parts *mean) {
    *mean = (sekv_loss_parts){0};
    for (int i = 0; i < n; i++) {
        sekv_loss_parts q;
        if (doc_loss(&docs[idx[i]], th, lc, lc->lambda_budget, NULL, &q)) return -1;
        mean->total += q.total / n, mean->kl += q.kl / n, mean->zoom += q.zoom / n;
        mean->budget += q.budget / n, mean->expand += q.expand / n, mean->order += q.order / n,
        mean->order_floor += q.order_floor / n;
        mean->recall += q.recall / n, mean->precision += q.precision / n;
    }
    return 0;
}

static uint64_t sm_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Tokenizes, prepares (or loads) every selected document. Returns the count kept. */
static int prepare_docs(kv_model *m, const train_opts *o, uint64_t mhash, train_doc **out_docs) {
    int nall;
    char **names = list_docs(o->corpus, &nall);
    if (!names) return -1;
    int nd = nall < o->max_docs ? nall : o->max_docs;
    train_doc *docs = calloc((size_t)nd, sizeof *docs);
    int32_t *ids = malloc(((size_t)o->ctx + 1) * sizeof *ids);
    int use_cache = strcmp(o->cache, "none") != 0, kept = 0;
    if (!docs || !ids) {
        fail("out of memory");
        nd = -1;
    } else if (use_cache && mkdirs(o->cache)) {
        fail("--cache %s: cannot create directory (%s)", o->cache, strerror(errno));
        nd = -1;
    }
    /* Every document is text before any is prepared: a binary or non-UTF-8 file (a stray
     * archive, a latin1 export) would train on byte tokens without a word. */
    for (int i = 0; nd > 0 && i < nd; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", o->corpus, names[(size_t)i * nall / nd]);
        size_t len = 0, at;
        char *text = kb_read_file(path, &len);
        if (!text) fail("%s: cannot read", path), nd = -1;
        else if (memchr(text, 0, len)) fail("%s: contains a NUL byte: not a text document", path), nd = -1;
        else if ((at = utf8_invalid_at(text, len)) < len)
            fail("%s: not UTF-8 text (byte 0x%02x at offset %zu); convert it or remove it from the corpus", path,
                 (unsigned char)text[at], at), nd = -1;
        free(text);
    }
    /* Lengths first: the curriculum gives the longest documents to the last stage. */
    int *len_idx = nd > 0 ? malloc((size_t)nd * 2 * sizeof *len_idx) : NULL, *stage_of = NULL;
    if (nd > 0 && !len_idx) fail("out of memory"), nd = -1;
    for (int i = 0; i < nd; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", o->corpus, names[(size_t)i * nall / nd]);
        size_t len;
        char *text = kb_read_file(path, &len);
        int n = text ? tok_encode(model_tokenizer(m), text, len, 0, ids, o->ctx) : -1;
        free(text);
        len_idx[2 * i] = n > o->ctx ? o->ctx : n, len_idx[2 * i + 1] = i;
    }
    if (nd > 0) {
        qsort(len_idx, (size_t)nd, 2 * sizeof *len_idx, cmp_len);
        stage_of = malloc((size_t)nd * sizeof *stage_of);
        if (!stage_of) fail("out of memory"), nd = -1;
        for (int r = 0; nd > 0 && r < nd; r++) stage_of[len_idx[2 * r + 1]] = (int)((long)r * o->n_stages / nd);
    }
    free(len_idx);
    double t_start = kb_now_s(), resident_mb = 0;
    for (int i = 0; i < nd; i++) {
        const char *name = names[(size_t)i * nall / nd];
        char path[1100], err[512];
        snprintf(path, sizeof path, "%s/%s", o->corpus, name);
        size_t len;
        char *text = kb_read_file(path, &len);
        if (!text) {
            fail("%s: cannot read", path);
            continue;
        }
        int cut = o->stage_ctx[stage_of[i]];
        int n = tok_encode(model_tokenizer(m), text, len, 0, ids, cut);
        free(text);
        if (n > cut) n = cut;
        if (n < 256) {
            fprintf(stderr, "train-sekv: skip %s (%d tokens, need 256)\n", name, n < 0 ? 0 : n);
            continue;
        }
        train_doc *d = &docs[kept];
        snprintf(d->name, sizeof d->name, "%s", name);
        sekv_teacher_cfg tc = o->tc;
        tc.fit_budget = o->fit_alpha ? o->fit_budgets[i % o->n_fit] : 0;
        d->n = n, d->stage = stage_of[i], d->budget = tc.fit_budget, d->alpha = tc.alpha;
        uint64_t key = d->key = sekv_teacher_key(mhash, ids, n, &tc);
        if (use_cache) snprintf(d->path, sizeof d->path, "%s/%016llx.tdoc", o->cache, (unsigned long long)key);
        double t0 = kb_now_s();
        const char *how = "cached";
        sekv_teacher_stats ts = {0};
        if (!use_cache || sekv_tdoc_load(&d->doc, d->path, err, sizeof err)) {
            how = "built";
            if (sekv_teacher_doc(m, ids, n, &tc, &d->doc, &ts, err, sizeof err)) {
                fail("%s: %s", name, err);
                continue;
            }
            if (use_cache && sekv_tdoc_save(&d->doc, d->path, err, sizeof err))
                fprintf(stderr, "train-sekv: note: %s (continuing without caching)\n", err);
        }
        double mb = sekv_tdoc_bytes(&d->doc) / 1048576.0;
        int spans = d->doc.n_spans, npos = d->doc.n_pos;
        d->resident = !use_cache || resident_mb + mb <= o->mem_mb;
        if (d->resident) resident_mb += mb;
        else sekv_tdoc_free(&d->doc);   /* loaded from its cache file at each use */
        double el = kb_now_s() - t_start;
        char eta[32];
        fmt_time(el / (i + 1) * (nd - i - 1), eta, sizeof eta);
        fprintf(stderr, "train-sekv: doc %d/%d %s: stage %d, %d tokens, %d spans, %d positions, %.0f MB, %s in %.1fs",
                i + 1, nd, name, d->stage + 1, n, spans, npos, mb, how, kb_now_s() - t0);
        if (ts.n_cand) {
            d->alpha = ts.alpha;
            fprintf(stderr, " (prefill %.1fs, %d candidates %.1fs, far share %.2f..%.2f", ts.prefill_s, ts.n_cand,
                    ts.decode_s, ts.far_last, ts.far_best);
            if (ts.fit_cap)
                fprintf(stderr, "; budget %g: alpha %g, P %d%s p_max*B %d", d->budget, ts.alpha, ts.persistent,
                        ts.persistent <= ts.fit_cap ? " <=" : " > (none fits; the grid's largest)", ts.fit_cap);
            fprintf(stderr, ")");
        }
        fprintf(stderr, "  ETA %s\n", eta);
        kept++;
    }
    for (int i = 0; i < nall; i++) free(names[i]);
    free(names), free(ids), free(stage_of);
    if (nd < 0 || kept == 0) {
        free(docs);
        if (nd >= 0) fail("%s: no usable document", o->corpus);
        return -1;
    }
    *out_docs = docs;
    return kept;
}

/* First step of curriculum stage k of S over `steps`: the smallest s with s*S/steps >= k. */
static int stage_begin(int k, int S, int steps) { return (int)(((long)k * steps + S - 1) / S); }

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    for (const unsigned char *b = p; n--; b++) h = (h ^ *b) * 0x100000001b3ULL;
    return h;
}

int cmd_train_sekv(int argc, char **argv) {
    train_opts o;
    int help = 0;
    if (train_sekv_parse(argc, argv, &o, &help)) return 2;
    if (help) {
        usage(stdout);
        return 0;
    }
    char werr[1200];   /* the files written later are checked now, not after minutes of training */
    if (sekv_params_check_writable(o.out, werr, sizeof werr)) return fail("--out %s", werr), 2;
    if (o.checkpoint && sekv_params_check_writable(o.checkpoint, werr, sizeof werr))
        return fail("--checkpoint %s", werr), 2;
    /* a checkpoint's steps checked now; its hash, which covers the documents, after the data step */
    if (o.checkpoint && train_ckpt_peek(o.checkpoint, o.steps, werr, sizeof werr) < 0) return fail("%s", werr), 2;
    if (o.threads) kb_set_threads(o.threads);
    char err[1024];
    double t_begin = kb_now_s();
    clock_t c_begin = clock();
    kv_model *m = model_load(o.model, err, sizeof err);
    if (!m) {
        fail("%s", err);
        return 1;
    }
    const kv_model_config *mc = model_config(m);
    uint64_t mhash = model_content_hash(m);

    train_doc *docs = NULL;
    int nd = prepare_docs(m, &o, mhash, &docs);
    if (nd < 0) {
        model_free(m);
        return 1;
    }
    double t_data = kb_now_s() - t_begin;

    sekv_params p = {0};
    sekv_tparams th = {0}, g = {0}, mo = {0}, vo = {0}, best = {0};
    int rc = 1, *order = NULL, *held = NULL, *pool = NULL, n_train = nd, n_held = 0;
    FILE *logf = NULL;
    if (sekv_params_init(&p, mc->n_layer, mc->n_head, mc->head_dim, o.rank, o.seed, err, sizeof err)) {
        fail("%s", err);
        goto done;
    }
    if (sekv_tparams_from(&th, &p) || sekv_tparams_alloc(&g, th.L, th.H, th.d, th.R) ||
        sekv_tparams_alloc(&mo, th.L, th.H, th.d, th.R) || sekv_tparams_alloc(&vo, th.L, th.H, th.d, th.R) ||
        sekv_tparams_alloc(&best, th.L, th.H, th.d, th.R)) {
        fail("out of memory");
        goto done;
    }
    size_t np = sekv_params_count(&p);
    fprintf(stderr, "train-sekv: %d documents ready in %.0fs; %zu trainable parameters (%.3f%% of the model's %.1fM)\n",
            nd, t_data, np, 100.0 * np / (double)mc->n_params, mc->n_params / 1e6);

    sekv_loss_cfg lc = sekv_loss_defaults();
    lc.budget_per_span = o.budget_per_span;
    lc.gate_norm = o.gate_norm;
    lc.lambda_budget = o.lambda_budget;
    lc.lambda_order = o.lambda_order;
    sekv_optim_cfg oc = sekv_optim_defaults(o.steps);
    order = malloc((size_t)nd * sizeof *order);
    held = malloc((size_t)nd * sizeof *held);
    if (!order || !held) {
        fail("out of memory");
        goto done;
    }
    /* Early stopping on a held-out slice of the corpus: every (nd/N)-th document; the
     * rest train. order[] then indexes the training documents only. */
    if (o.held_out > 0 && o.held_out * 2 > nd && !o.held_out_given) {
        fprintf(stderr, "train-sekv: note: %d usable documents, too few to hold %d out: no early stopping\n", nd,
                o.held_out);
        o.held_out = 0;
    }
    if (o.held_out > 0) {
        if (o.held_out * 2 > nd) {
            fail("--held-out %d: needs at least twice as many documents (%d usable)", o.held_out, nd);
            goto done;
        }
        int stride = nd / o.held_out, *train = order;
        n_train = 0;
        for (int i = 0; i < nd; i++)
            if (i % stride == stride - 1 && n_held < o.held_out) held[n_held++] = i;
            else train[n_train++] = i;
        fprintf(stderr, "train-sekv: %d documents train, %d held out for early stopping:", n_train, n_held);
        for (int i = 0; i < n_held; i++) fprintf(stderr, " %s", docs[held[i]].name);
        fprintf(stderr, "\n");
    }
    pool = malloc((size_t)nd * sizeof *pool);
    if (!pool) {
        fail("out of memory");
        goto done;
    }
    if (o.held_out > 0) memcpy(pool, order, (size_t)n_train * sizeof *pool);
    else
        for (int i = 0; i < nd; i++) pool[i] = i;
    /* The curriculum: stage k trains on steps [stage_begin(k), stage_begin(k+1)) over its
     * own documents; pool[] sorted by stage, stage k at pool[pool_at[k] .. + pool_n[k]). */
    int pool_n[MAX_STAGES] = {0}, pool_at[MAX_STAGES] = {0};
    {
        int w = 0;
        for (int k = 0; k < o.n_stages; k++) {
            pool_at[k] = w;
            for (int i = 0; i < n_train; i++)
                if (docs[pool[i]].stage == k) order[w++] = pool[i], pool_n[k]++;
            if (!pool_n[k]) {
                fail("curriculum stage %d (%d tokens) has no training document: use fewer --ctx lengths or more "
                     "--max-docs", k + 1, o.stage_ctx[k]);
                goto done;
            }
        }
        memcpy(pool, order, (size_t)n_train * sizeof *pool);
        for (int k = 0; k < o.n_stages && o.n_stages > 1; k++) {
            long toks = 0;
            for (int i = 0; i < pool_n[k]; i++) toks += docs[pool[pool_at[k] + i]].n;
            fprintf(stderr, "train-sekv: curriculum stage %d: %d documents of up to %d tokens (mean %ld), steps %d..%d\n",
                    k + 1, pool_n[k], o.stage_ctx[k], toks / pool_n[k], stage_begin(k, o.n_stages, o.steps) + 1,
                    stage_begin(k + 1, o.n_stages, o.steps));
        }
    }
    int eval_every = o.eval_every > 0 ? o.eval_every : (o.steps / 20 > 1 ? o.steps / 20 : 1), best_step = -1;
    double best_held = INFINITY;
    uint64_t rng = o.seed ^ 0x5eb7ULL;
    /* What a checkpoint must match to be resumed: everything the steps depend on. */
    uint64_t cfg_hash = 0xcbf29ce484222325ULL;
    {
        double dv[] = {lc.lambda_zoom, lc.lambda_recon, lc.lambda_budget, lc.beta, lc.w_pos, lc.temp, oc.lr,
                       oc.weight_decay, oc.beta1, oc.beta2, oc.eps, oc.warmup_frac, oc.clip};
        long iv[] = {o.steps, (long)o.seed, o.rank, lc.budget_per_span, lc.gate_norm, eval_every, n_held, n_train, o.n_stages,
                     (long)th.n};
        cfg_hash = fnv(cfg_hash, dv, sizeof dv);
        cfg_hash = fnv(cfg_hash, iv, sizeof iv);
        if (lc.lambda_order > 0)   /* only when on, so checkpoints of the reference loss still resume */
            cfg_hash = fnv(cfg_hash, &lc.lambda_order, sizeof lc.lambda_order);
        for (int i = 0; i < nd; i++) {
            cfg_hash = fnv(cfg_hash, &docs[i].key, sizeof docs[i].key);
            cfg_hash = fnv(cfg_hash, &docs[i].stage, sizeof docs[i].stage);
        }
        cfg_hash = fnv(cfg_hash, held, (size_t)n_held * sizeof *held);
    }
    int start = 0, n_order = 0;
    if (o.checkpoint) {
        int r = train_ckpt_load(o.checkpoint, cfg_hash, &start, &rng, &best_step, &best_held, &th, &mo, &vo, &best, order,
                          nd, o.steps, &n_order, err, sizeof err);
        if (r < 0) {   /* bad input: exit 2, as for a bad option */
            fail("%s", err);
            rc = 2;
            goto done;
        }
        if (r > 0)
            fprintf(stderr, "train-sekv: resuming from %s at step %d of %d (best held-out %.4f after step %d)\n",
                    o.checkpoint, start + 1, o.steps, best_held, best_step + 1);
    }
    if (start >= o.steps) {
        fprintf(stderr, "train-sekv: %s holds a finished run (%d steps): writing its parameters\n", o.checkpoint,
                o.steps);
    }
    if (o.log && !(logf = fopen(o.log, start > 0 ? "a" : "w"))) {
        fail("--log %s: cannot write", o.log);
        goto done;
    }
    if (logf && start == 0)
        fprintf(logf, "step,doc,total,kl,zoom,recon,budget,lambda_budget,expand,pos_rate,recall,precision,eff_rank,lr,"
                      "grad_norm,seconds,order,heldout\n");
    double t_train = kb_now_s(), first_total = NAN;
    sekv_loss_parts last = {0};
    int every = o.steps / 40 > 1 ? o.steps / 40 : 1;
    for (int s = start; s < o.steps; s++) {
        int k = (int)((long)s * o.n_stages / o.steps), j = s - stage_begin(k, o.n_stages, o.steps);
        if (j % pool_n[k] == 0 || n_order != pool_n[k]) {   /* a new epoch of the stage: shuffle */
            n_order = pool_n[k];
            for (int i = 0; i < n_order; i++) order[i] = pool[pool_at[k] + i];
            for (int i = n_order - 1; i > 0; i--) {
                int jj = (int)(sm_next(&rng) % (uint64_t)(i + 1)), t = order[i];
                order[i] = order[jj], order[jj] = t;
            }
        }
        train_doc *d = &docs[order[j % pool_n[k]]];
        double lb = sekv_budget_at(lc.lambda_budget, s, o.steps), lr = sekv_lr_at(&oc, s);
        sekv_loss_parts parts;
        if (doc_loss(d, &th, &lc, lb, &g, &parts)) goto done;
        if (!isfinite(parts.total)) {
            fail("step %d: loss is not finite (%g) on %s", s, parts.total, d->name);
            goto done;
        }
        double gn = sekv_clip(&g, oc.clip);
        sekv_adamw(&th, &g, &mo, &vo, &oc, lr, s + 1);
        if (s == start) first_total = parts.total;
        last = parts;
        double el = kb_now_s() - t_train;
        double ho = NAN;
        int check = (s + 1) % eval_every == 0 || s == o.steps - 1;
        if (n_held && check) {
            sekv_loss_parts hp;
            if (held_out_loss(docs, held, n_held, &th, &lc, &hp)) goto done;
            ho = hp.total;
            fprintf(stderr,
                    "held-out after step %d: loss %.4f (kl %.4f zoom %.4f budget %.2f order %.4f, floor %.4f) expand %.2f"
                    " recall %.2f precision %.2f%s\n",
                    s + 1, hp.total, hp.kl, hp.zoom, hp.budget, hp.order, hp.order_floor, hp.expand, hp.recall, hp.precision,
                    hp.total < best_held ? "  (best)" : "");
            if (hp.total < best_held) {
                best_held = hp.total, best_step = s;
                memcpy(best.W, th.W, th.n * sizeof *th.W);
            }
        }
        if (logf) {
            fprintf(logf, "%d,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.4f,%.4f,%.4f,%.4f,%.3f,%.4g,%.4g,%.2f,", s, d->name,
                    parts.total, parts.kl, parts.zoom, parts.recon, parts.budget, lb, parts.expand, parts.pos_rate,
                    parts.recall, parts.precision, parts.eff_rank, lr, gn, el);
            fprintf(logf, "%.6g,", parts.order);
            if (isfinite(ho)) fprintf(logf, "%.6g", ho);
            fprintf(logf, "\n");
            fflush(logf);
        }
        int out_of_time = o.time_limit > 0 && el > o.time_limit && s + 1 < o.steps;
        if (o.checkpoint && (check || out_of_time) &&
            train_ckpt_save(o.checkpoint, cfg_hash, s + 1, rng, best_step, best_held, &th, &mo, &vo, &best, order, n_order,
                      err, sizeof err)) {
            fail("%s", err);
            goto done;
        }
        if (s % every == 0 || s == o.steps - 1) {
            char eta[32];
            fmt_time(el / (s + 1 - start) * (o.steps - s - 1), eta, sizeof eta);
            fprintf(stderr,
                    "step %d/%d  loss %.4f = kl %.4f + zoom %.4f + %.1f*recon %.3f + %.3f*budget %.2f"
                    " + %.1f*order %.3f  expand %.2f (recall %.2f precision %.2f) rank %.1f  lr %.2e |g| %.2g  %.2fs/step  ETA %s\n",
                    s + 1, o.steps, parts.total, parts.kl, parts.zoom, lc.lambda_recon, parts.recon, lb,
                    parts.budget, lc.lambda_order, parts.order, parts.expand, parts.recall, parts.precision, parts.eff_rank, lr, gn,
                    el / (s + 1 - start), eta);
        }
        if (out_of_time) {
            fprintf(stderr, "train-sekv: --time-limit %.0fs reached after step %d of %d: state in %s; rerun the same "
                            "command to go on\n", o.time_limit, s + 1, o.steps, o.checkpoint);
            rc = 3;
            goto done;
        }
    }
    if (best_step >= 0) {
        fprintf(stderr, "train-sekv: early stopping: the parameters after step %d of %d (held-out loss %.4f)\n",
                best_step + 1, o.steps, best_held);
        memcpy(th.W, best.W, th.n * sizeof *th.W);
    }
    sekv_tparams_to(&th, &p);
    p.model_hash = mhash;
    p.trained = 1;
    p.train_steps = best_step >= 0 ? best_step + 1 : o.steps;
    if (sekv_params_save(&p, o.out, err, sizeof err)) {
        fail("%s", err);
        goto done;
    }
    double total = kb_now_s() - t_begin;
    fprintf(stderr,
            "train-sekv: wrote %s: %zu parameters (%.3f%% of %.1fM), %d steps over %d documents; loss %.4f -> %.4f;"
            " %.0fs (data %.0fs, training %.0fs), CPU %.0fs\n",
            o.out, np, 100.0 * np / (double)mc->n_params, mc->n_params / 1e6, o.steps, nd, first_total, last.total,
            total, t_data, kb_now_s() - t_train, (double)(clock() - c_begin) / CLOCKS_PER_SEC);
    rc = 0;
done:
    if (logf) fclose(logf);
    for (int i = 0; i < nd; i++) sekv_tdoc_free(&docs[i].doc);
    free(docs);
    free(order), free(held), free(pool);
    sekv_params_free(&p);
    sekv_tparams_free(&th), sekv_tparams_free(&g), sekv_tparams_free(&mo), sekv_tparams_free(&vo);
    sekv_tparams_free(&best);
    model_free(m);
    return rc;
}
