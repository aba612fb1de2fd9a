/* Batched decode against one sequence, side by side in one run: tokens/s of batches of N
 * sequences (default 8 and 33; 33 is a grid's 11 methods x 3 budgets) stepping together
 * through model_decode_batch, and of one sequence through model_decode, after the same prefill
 * (default 4096 tokens) on the default model, 2 threads, f32 activations (the default).
 * Every sequence is its own cache of one method (default snapkv) at one budget (default
 * 0.1: a compressed cache, as most of a grid's pairs; 1 with fullkv is the full 4K
 * attention per sequence), built from the shared prefill. The batch's tokens/s counts
 * every sequence's token; the ratio is batch / one.
 *
 * usage: bench_batch [--n N[,N...]] [--ctx N] [--steps N] [--method NAME] [--budget B] [--q8 | --both] [--model F]
 *   env KVBENCH_THREADS (default 2 here) */
#include "../kernels/core.h"
#include "../kernels/host.h"
#include "../model/model.h"
#include "../methods/method.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* CPU seconds of the whole process (every thread): on a loaded machine a steadier
 * measure of the work than the wall clock. */
static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static const char *TEXT =
    "The harbour town woke slowly. Fishing boats rocked against the pier while gulls argued over "
    "scraps, and the baker on the corner pulled the first loaves from his oven. Nobody noticed the "
    "stranger who stepped off the morning ferry with a leather case and a map folded into quarters. ";

static int arg_int(const char *s, int lo, int hi, const char *flag) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "bench_batch: %s '%s': expected an integer in %d..%d\n", flag, s, lo, hi);
        exit(2);
    }
    return (int)v;
}

/* One cache of the method, ingesting the shared prefill; NULL (said) on failure. */
static kv_state *new_cache(const kv_method *meth, const kv_setup *s, kv_prefill_out *pf, int n_layer) {
    char err[512];
    kv_state *st = meth->init(s, err, sizeof err);
    if (!st) {
        fprintf(stderr, "bench_batch: %s: %s\n", meth->name, err);
        return NULL;
    }
    for (int l = 0; l < n_layer; l++) {
        kv_prefill p = prefill_layer(pf, l);
        if (meth->ingest(st, &p, err, sizeof err)) {
            fprintf(stderr, "bench_batch: %s ingest: %s\n", meth->name, err);
            meth->free(st);
            return NULL;
        }
    }
    return st;
}

int main(int argc, char **argv) {
    int sizes[16] = {8, 33}, n_sizes = 2, ctx = 4096, steps = 8, q8 = 0;
    const char *mname = "snapkv", *path = model_default_path();
    double budget = 0.1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: bench_batch [--n N[,N...]] [--ctx N] [--steps N] [--method NAME] [--budget B] [--q8 | --both] [--model F]\n"
                   "tokens/s of batches of N sequences decoding together (model_decode_batch) against\n"
                   "one sequence, each its own cache of METHOD at BUDGET after a shared prefill of ctx\n"
                   "tokens on the default model (defaults: 8,33, 4096, 8 steps, snapkv, 0.1, f32\n"
                   "activations; --q8: 8-bit activations, --both: f32 then q8 after one prefill;\n"
                   "--model also takes random:NAME specs)\n");
            return 0;
        } else if (!strcmp(a, "--q8")) q8 = 1;
        else if (!strcmp(a, "--both")) q8 = 2;
        else if (!v) {
            fprintf(stderr, "bench_batch: unknown argument or missing value '%s' (see --help)\n", a);
            return 2;
        } else if (!strcmp(a, "--n")) {
            char buf[128], *tok, *save = NULL;
            snprintf(buf, sizeof buf, "%s", v);
            n_sizes = 0;
            for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (n_sizes == 15) {
                    fprintf(stderr, "bench_batch: --n: at most 15 sizes\n");
                    return 2;
                }
                sizes[n_sizes++] = arg_int(tok, 1, 256, a);
            }
            if (!n_sizes) sizes[n_sizes++] = arg_int(v, 1, 256, a);
            i++;
        }
        else if (!strcmp(a, "--ctx")) ctx = arg_int(v, 16, 1 << 20, a), i++;
        else if (!strcmp(a, "--steps")) steps = arg_int(v, 1, 4096, a), i++;
        else if (!strcmp(a, "--method")) mname = v, i++;
        else if (!strcmp(a, "--budget")) budget = atof(v), i++;
        else if (!strcmp(a, "--model")) path = v, i++;
        else {
            fprintf(stderr, "bench_batch: unknown argument '%s' (see --help)\n", a);
            return 2;
        }
    }
    const kv_method *meth = kv_method_find(mname);
    if (!meth) {
        fprintf(stderr, "bench_batch: no method '%s'\n", mname);
        return 2;
    }
    char err[512];
    if (strncmp(path, "random:", 7) && access(path, R_OK)) {
        fprintf(stderr, "bench_batch: no model at %s: run `make model`\n", path);
        return 1;
    }
    if (!getenv("KVBENCH_THREADS")) kb_set_threads(2);
    kv_model *m = model_load(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_batch: %s\n", err);
        return 1;
    }
    const kv_model_config *c = model_config(m);
    if (ctx > c->n_ctx_train - steps - 1) ctx = c->n_ctx_train - steps - 1;
    int32_t piece[256], *ids = malloc((size_t)ctx * sizeof *ids);
    int np = tok_encode(model_tokenizer(m), TEXT, strlen(TEXT), 0, piece, 256);
    for (int i = 0; i < ctx; i++) ids[i] = piece[i % np];

    kv_setup s = {.n_layers = c->n_layer, .n_heads = c->n_head, .n_kv_heads = c->n_head_kv, .head_dim = c->head_dim,
                  .n_prompt = ctx, .max_decode = steps + 1, .budget_frac = budget,
                  .model_hash = kv_model_hash(model_gguf(m)->base, model_gguf(m)->size)};
    kv_needs needs = {0};
    meth->needs(&s, &needs);
    kv_prefill_out pf;
    if (model_prefill(m, ids, ctx, &needs, &pf, err, sizeof err)) {
        fprintf(stderr, "bench_batch: prefill: %s\n", err);
        return 1;
    }
    int id0 = model_argmax(pf.last_logits, c->n_vocab), most = 1;
    for (int k = 0; k < n_sizes; k++) most = sizes[k] > most ? sizes[k] : most;
    kv_state **st = calloc((size_t)most, sizeof *st);
    float *logits = malloc(sizeof(float) * c->n_vocab * (size_t)most);
    kv_decode_seq *seq = calloc((size_t)most, sizeof *seq);
    for (int mode = q8 == 1; mode <= (q8 ? 1 : 0); mode++) {
        model_set_f32_activations(m, !mode);
        printf("model %s, %d threads, %s activations; %s at budget %g after a %d-token prefill, %d steps\n", c->name,
               kb_threads(), mode ? "q8" : "f32", mname, budget, ctx, steps);
        printf("%-22s %10s %24s %16s %16s\n", "", "tokens/s", "tokens per CPU second", "ratio (wall)", "ratio (CPU)");
        /* one sequence through model_decode, before and after the batches (the mean is the
         * base: the load of a shared machine drifts), then each batch size, every run on
         * fresh caches from the same prefill */
        double one = 0, one_cpu = 0, rate[17], rate_cpu[17], attend_share[17];
        for (int k = -1; k <= n_sizes; k++) {
            int nseq = k < 0 || k == n_sizes ? 1 : sizes[k];
            for (int i = 0; i < nseq; i++)
                if (!(st[i] = new_cache(meth, &s, &pf, c->n_layer))) return 1;
            double t0 = kb_now_s(), c0 = cpu_s(), attend = 0;
            if (k < 0 || k == n_sizes) {
                int id = id0;
                for (int t = 0; t < steps; t++) {
                    if (model_decode(m, meth, st[0], id, ctx + t, NULL, logits)) return fprintf(stderr, "bench_batch: decode\n"), 1;
                    id = model_argmax(logits, c->n_vocab);
                }
            } else {
                for (int i = 0; i < nseq; i++)
                    seq[i] = (kv_decode_seq){meth, st[i], id0, ctx, NULL, logits + (size_t)c->n_vocab * i, NULL, 0, 0};
                for (int t = 0; t < steps; t++) {
                    if (model_decode_batch(m, seq, nseq)) return fprintf(stderr, "bench_batch: batched decode\n"), 1;
                    for (int i = 0; i < nseq; i++) {
                        seq[i].id = model_argmax(seq[i].logits, c->n_vocab);
                        seq[i].pos = ctx + t + 1;
                        attend += seq[i].attend_s, seq[i].attend_s = 0;
                    }
                }
            }
            double wall = kb_now_s() - t0, cpu = cpu_s() - c0;
            int slot = k < 0 ? 16 : k;
            rate[slot] = (double)nseq * steps / wall, rate_cpu[slot] = (double)nseq * steps / cpu, attend_share[slot] = attend / wall;
            if (k == n_sizes) one = (rate[16] + rate[n_sizes]) / 2, one_cpu = (rate_cpu[16] + rate_cpu[n_sizes]) / 2;
            for (int i = 0; i < nseq; i++) meth->free(st[i]);
        }
        printf("%-22s %10.1f %24.1f %16s %16s   (before the batches %.1f / %.1f, after %.1f / %.1f)\n",
               "1 sequence", one, one_cpu, "1", "1", rate[16], rate_cpu[16], rate[n_sizes], rate_cpu[n_sizes]);
        for (int k = 0; k < n_sizes; k++) {
            char name[32];
            snprintf(name, sizeof name, "batch of %d", sizes[k]);
            printf("%-22s %10.1f %24.1f %15.2fx %15.2fx   (methods' own attention: %.0f%% of the wall time)\n", name,
                   rate[k], rate_cpu[k], rate[k] / one, rate_cpu[k] / one_cpu, 100 * attend_share[k]);
        }
    }
    prefill_out_free(&pf);
    free(st), free(logits), free(seq), free(ids);
    model_free(m);
    return 0;
}
