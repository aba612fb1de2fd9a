/* Engine speed and memory on the real model, 2 threads: prefill and FullKV decode
 * tokens/s at 512, 2048 and 8192 tokens of context (at 8192 the prompt is 8176 tokens so
 * that the 16 decoded ones fit the model's context), and the process's resident memory
 * (VmRSS now, VmHWM peak) after each. */
#include "../kernels/core.h"
#include "../model/model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const kv_method kv_fullkv;

static const char *TEXT =
    "The harbour town woke slowly. Fishing boats rocked against the pier while gulls argued over "
    "scraps, and the baker on the corner pulled the first loaves from his oven. Nobody noticed the "
    "stranger who stepped off the morning ferry with a leather case and a map folded into quarters. ";

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) v = strtol(line + strlen(key) + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

int main(void) {
    const char *path = model_default_path();
    char err[512];
    if (access(path, R_OK)) {
        fprintf(stderr, "bench_model: no model at %s: run `make model`\n", path);
        return 1;
    }
    kb_set_threads(2);
    kv_model *m = model_load(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_model: %s\n", err);
        return 1;
    }
    const kv_model_config *c = model_config(m);
    int32_t piece[256];
    int np = tok_encode(model_tokenizer(m), TEXT, strlen(TEXT), 0, piece, 256);
    const int ctx[] = {512, 2048, 8192}, decode_steps = 16;
    printf("model %s, %d threads, FullKV decode of %d tokens after each prefill\n", c->name, kb_threads(),
           decode_steps);
    printf("%8s %14s %10s %13s %10s %10s\n", "prompt", "prefill tok/s", "prefill s", "decode tok/s",
           "VmRSS MB", "VmHWM MB");
    for (int k = 0; k < 3; k++) {
        int n = ctx[k] < c->n_ctx_train - decode_steps ? ctx[k] : c->n_ctx_train - decode_steps;
        int32_t *ids = malloc((size_t)n * sizeof *ids), out[16];
        for (int i = 0; i < n; i++) ids[i] = piece[i % np];
        kv_setup s = {.budget_frac = 1.0};
        kv_gen_stats st;
        /* stop tokens could end decoding early: the step count below is what was timed */
        int got = model_generate_method(m, &kv_fullkv, &s, ids, n, decode_steps, out, NULL, NULL, &st, err,
                                        sizeof err);
        if (got < 0) {
            fprintf(stderr, "bench_model: %s\n", err);
            return 1;
        }
        printf("%8d %14.1f %10.2f %13.1f %10.1f %10.1f\n", n, n / st.prefill_s, st.prefill_s,
               st.n_steps / st.decode_s, status_kb("VmRSS:") / 1024.0, status_kb("VmHWM:") / 1024.0);
        fflush(stdout);
        free(ids);
    }
    model_free(m);
    return 0;
}
