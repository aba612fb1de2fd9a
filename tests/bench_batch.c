/* Batched decode against one sequence, side by side in one run: tokens/s of N sequences
 * (default 33, a grid's 11 methods x 3 budgets) stepping together through
 * model_decode_batch, and of one sequence through model_decode, after the same prefill
 * (default 4096 tokens) on the default model, 2 threads, f32 activations (the default).
 * Every sequence is its own cache of one method (default snapkv) at one budget (default
 * 0.1: a compressed cache, as most of a grid's pairs; 1 with fullkv is the full 4K
 * attention per sequence), built from the shared prefill. The batch's tokens/s counts
 * every sequence's token; the ratio is batch / one.
 *
 * usage: bench_batch [--n N] [--ctx N] [--steps N] [--method NAME] [--budget B] [--q8] [--model F]
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

int main(int argc, char **argv) {
    int nseq = 33, ctx = 4096, steps = 8, q8 = 0;
    const char *mname = "snapkv", *path = model_default_path();
    double budget = 0.1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: bench_batch [--n N] [--ctx N] [--steps N] [--method NAME] [--budget B] [--q8] [--model F]\n"
                   "tokens/s of N sequences decoding together (model_decode_batch) against one sequence,\n"
                   "each its own cache of METHOD at BUDGET after a shared prefill of ctx tokens on the\n"
                   "default model (defaults: 33, 4096, 8 steps, snapkv, 0.1, f32 activations; --model\n"
                   "also takes random:NAME specs)\n");
            return 0;
        } else if (!strcmp(a, "--q8")) q8 = 1;
        else if (!v) {
            fprintf(stderr, "bench_batch: unknown argument or missing value '%s' (see --help)\n", a);
            return 2;
        } else if (!strcmp(a, "--n")) nseq = arg_int(v, 1, 256, a), i++;
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
    model_set_f32_activations(m, !q8);
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
    /* nseq + 1 caches: [0] decodes alone, [1..nseq] together */
    kv_state **st = calloc((size_t)nseq + 1, sizeof *st);
    float *logits = malloc(sizeof(float) * c->n_vocab * ((size_t)nseq + 1));
    kv_decode_seq *seq = calloc((size_t)nseq, sizeof *seq);
    for (int i = 0; i <= nseq; i++) {
        st[i] = meth->init(&s, err, sizeof err);
        if (!st[i]) {
            fprintf(stderr, "bench_batch: %s: %s\n", mname, err);
            return 1;
        }
        for (int l = 0; l < c->n_layer; l++) {
            kv_prefill p = prefill_layer(&pf, l);
            if (meth->ingest(st[i], &p, err, sizeof err)) {
                fprintf(stderr, "bench_batch: %s ingest: %s\n", mname, err);
                return 1;
            }
        }
    }
    int id0 = model_argmax(pf.last_logits, c->n_vocab);
    /* one sequence alone */
    double t0 = kb_now_s(), c0 = cpu_s();
    int id = id0;
    for (int k = 0; k < steps; k++) {
        if (model_decode(m, meth, st[0], id, ctx + k, NULL, logits)) return fprintf(stderr, "bench_batch: decode\n"), 1;
        id = model_argmax(logits, c->n_vocab);
    }
    double one = steps / (kb_now_s() - t0), one_cpu = steps / (cpu_s() - c0);
    /* nseq together */
    for (int i = 0; i < nseq; i++) seq[i] = (kv_decode_seq){meth, st[i + 1], id0, ctx, NULL, logits + (size_t)c->n_vocab * (i + 1), NULL, 0, 0};
    t0 = kb_now_s(), c0 = cpu_s();
    double attend = 0;
    for (int k = 0; k < steps; k++) {
        if (model_decode_batch(m, seq, nseq)) return fprintf(stderr, "bench_batch: batched decode\n"), 1;
        for (int i = 0; i < nseq; i++) {
            seq[i].id = model_argmax(seq[i].logits, c->n_vocab);
            seq[i].pos = ctx + k + 1;
            attend += seq[i].attend_s, seq[i].attend_s = 0;
        }
    }
    double wall = kb_now_s() - t0, batch = (double)nseq * steps / wall, batch_cpu = (double)nseq * steps / (cpu_s() - c0);
    printf("model %s, %d threads, %s activations; %s at budget %g after a %d-token prefill, %d steps\n", c->name,
           kb_threads(), q8 ? "q8" : "f32", mname, budget, ctx, steps);
    printf("%-16s %14s %24s\n", "", "tokens/s", "tokens per CPU second");
    printf("%-16s %14.1f %24.1f\n", "1 sequence", one, one_cpu);
    printf("%-16s %14.1f %24.1f   (methods' own attention: %.0f%% of the wall time)\n", "batch", batch, batch_cpu,
           100 * attend / wall);
    printf("batch of %d / 1 sequence: %.2fx (wall), %.2fx (CPU time)\n", nseq, batch / one, batch_cpu / one_cpu);
    for (int i = 0; i <= nseq; i++) meth->free(st[i]);
    prefill_out_free(&pf);
    free(st), free(logits), free(seq), free(ids);
    model_free(m);
    return 0;
}
