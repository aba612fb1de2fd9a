/* Engine speed and memory on the real model, 2 threads: prefill tok/s and FullKV decode
 * tok/s at 512, 2048 and 8192 tokens of context (at 8192 the prompt is shortened so the
 * decoded tokens fit the model's context), decode with 8-bit activations (--activations
 * q8), with f32 activations (kvbench's default) and with 8-bit activations over f16 K/V
 * rows (llama.cpp's defaults), and the process's peak resident memory (VmHWM) after
 * each depth. FullKV reads no surprisal, so its prefill computes the last chunk's logits
 * only, as llama.cpp's does (a case with a SeKV row also pays every position's).
 *
 * usage: bench_model [--csv] [--steps N] [--reps N]
 *   env KVBENCH_BENCH_DEPTHS="512 2048 8192" (the depths), KVBENCH_THREADS (default 2 here)
 * --reps N repeats each (depth, variant) N times, the variants interleaved, and prints the
 * mean tok/s (llama-bench's avg_ts is a mean too). */
#include "../kernels/core.h"
#include "../kernels/kvtype.h"
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

/* One prefill of n tokens and `steps` FullKV decode steps; 0 or -1. */
static int run_once(kv_model *m, const int32_t *ids, int n, int steps, int kv_type, kv_gen_stats *st) {
    char err[512];
    int32_t *out = malloc((size_t)steps * sizeof *out);
    kv_setup s = {.budget_frac = 1.0, .kv_type = kv_type};
    int got = out ? model_generate_method(m, &kv_fullkv, &s, ids, n, steps, out, NULL, NULL, st, err, sizeof err)
                  : -1;
    free(out);
    if (got < 0) fprintf(stderr, "bench_model: %s\n", out ? err : "out of memory");
    return got < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
    int csv = 0, steps = 32, reps = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--csv")) csv = 1;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc && atoi(argv[i + 1]) > 0) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) > 0) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench_model [--csv] [--steps N] [--reps N]\n"
                   "Prefill and FullKV decode tok/s on the default model at each depth of\n"
                   "$KVBENCH_BENCH_DEPTHS (default \"512 2048 8192\"), 2 threads unless\n"
                   "$KVBENCH_THREADS; decode with 8-bit and f32 (default) activations, and 8-bit over\n"
                   "f16 K/V (llama.cpp's defaults); peak RSS. --reps N: the mean of N runs of each\n"
                   "(default 1).\n");
            return 0;
        } else {
            fprintf(stderr, "bench_model: unknown argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    const char *path = model_default_path();
    char err[512];
    if (access(path, R_OK)) {
        fprintf(stderr, "bench_model: no model at %s: run `make model`\n", path);
        return 1;
    }
    int depths[16], nd = 0;
    const char *env = getenv("KVBENCH_BENCH_DEPTHS");
    for (char *p = (char *)(env && *env ? env : "512 2048 8192"), *end; nd < 16; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (v < 2) {
            fprintf(stderr, "bench_model: KVBENCH_BENCH_DEPTHS: depth %ld is below 2\n", v);
            return 2;
        }
        depths[nd++] = (int)v;
    }
    if (!nd) {
        fprintf(stderr, "bench_model: KVBENCH_BENCH_DEPTHS='%s' holds no depth\n", env);
        return 2;
    }
    if (!getenv("KVBENCH_THREADS")) kb_set_threads(2);
    kv_model *m = model_load(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_model: %s\n", err);
        return 1;
    }
    const kv_model_config *c = model_config(m);
    int32_t piece[256];
    int np = tok_encode(model_tokenizer(m), TEXT, strlen(TEXT), 0, piece, 256);
    if (csv) printf("depth,prompt,prefill_tok_s,decode_tok_s,decode_f32_tok_s,decode_f16kv_tok_s,steps,vmhwm_mb\n");
    else {
        printf("model %s, %d threads; FullKV decode of %d tokens after each prefill, mean of %d run(s); peak RSS = "
               "VmHWM so far\n", c->name, kb_threads(), steps, reps);
        printf("decode: 8-bit activations (--activations q8), f32 activations (the default), and 8-bit\n"
               "activations over f16 K/V rows (--kv-type f16: llama.cpp's defaults)\n");
        printf("%6s %7s | %13s | %12s %16s %18s | %11s\n", "depth", "prompt", "prefill tok/s", "decode tok/s",
               "decode f32 tok/s", "decode q8+f16 tok/s", "peak RSS MB");
    }
    for (int k = 0; k < nd; k++) {
        int n = depths[k] < c->n_ctx_train - steps ? depths[k] : c->n_ctx_train - steps;
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        for (int i = 0; i < n; i++) ids[i] = piece[i % np];
        /* tok/s summed over the reps: prefill, decode q8, decode f32, decode q8+f16 */
        double sum[4] = {0, 0, 0, 0};
        int bad = 0, n_steps = steps;
        for (int r = 0; r < reps && !bad; r++) {
            kv_gen_stats q8, f32, h16;
            model_set_f32_activations(m, 1);
            bad = run_once(m, ids, n, steps, KB_F32, &f32);
            model_set_f32_activations(m, 0);
            bad = bad || run_once(m, ids, n, steps, KB_F32, &q8) || run_once(m, ids, n, steps, KB_F16, &h16);
            if (bad) break;
            /* stop tokens could end decoding early: n_steps is what was timed */
            sum[0] += n / q8.prefill_s;
            sum[1] += q8.n_steps / q8.decode_s;
            sum[2] += f32.n_steps / f32.decode_s;
            sum[3] += h16.n_steps / h16.decode_s;
            n_steps = q8.n_steps;
        }
        free(ids);
        if (bad) return 1;
        double pf = sum[0] / reps, dq = sum[1] / reps, df = sum[2] / reps, dh = sum[3] / reps;
        double hwm = status_kb("VmHWM:") / 1024.0;
        if (csv) printf("%d,%d,%.2f,%.2f,%.2f,%.2f,%d,%.1f\n", depths[k], n, pf, dq, df, dh, n_steps, hwm);
        else printf("%6d %7d | %13.1f | %12.1f %16.1f %18.1f | %11.1f\n", depths[k], n, pf, dq, df, dh, hwm);
        fflush(stdout);
    }
    model_free(m);
    return 0;
}
