/* kvbench conformance: the method interface's rules (methods/conformance.h) checked on
 * registered methods, a plugin's included: what tests/test_conformance.c runs on the
 * built-in ones. */
#include "commands.h"
#include "../identity/plugin.h"
#include "../drivers/method_params.h"
#include "../../methods/conformance.h"
#include "../../kernels/cli_opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench [--plugin FILE.so]... conformance [--method NAME]... [--params SPEC] [--seed N]\n"
            "                [--trials N]\n"
            "\n"
            "Runs the conformance checks every method must pass (rows, positions and memory within\n"
            "the decode rule: the check `run` makes after compression and every decode step;\n"
            "memory() consistent with rows(), the same rows under f32/f16/bf16, finite outputs,\n"
            "attend() equal to softmax attention over the rows held where they are at full\n"
            "resolution, in every GQA group; determinism; bad parameters refused with one line)\n"
            "on random scenarios. Each scenario is printed before it runs and runs in a child\n"
            "process: a crash is reported with the method, the scenario and the seed. Without\n"
            "--method: the methods of the plugins given, or every registered method when none is.\n"
            "Exit 0 when every check passes, 1 when one fails, 2 on a usage error.\n"
            "\n"
            "  --method NAME   check this method (repeatable)\n"
            "  --params SPEC   run the scenarios with these parameters instead of the defaults:\n"
            "                  METHOD:key=value[,key=value][;METHOD:...], as `run --params`\n"
            "  --seed N        the scenarios' seed (default: from the clock, printed)\n"
            "  --trials N      random scenarios per decode rule (default 5)\n");
}

int cmd_conformance(int argc, char **argv) {
    const kv_method *pick[64];
    const char *spec = NULL;
    method_params mp = {0};
    int n = 0, trials = 5;
    unsigned long long seed = (unsigned long long)time(NULL) ^ ((unsigned long long)clock() << 20);
    static const char *const bare[] = {"--help", "-h", NULL},
                             *const valued[] = {"--method", "--seed", "--trials", "--params", NULL};
    for (int i = 1; i < argc; i++) {   /* the one rule of every command's options (kernels/cli_opt.h) */
        char a[64];
        const char *v = NULL;
        if (kb_opt_read("conformance", argc, argv, &i, bare, valued, 0, a, sizeof a, &v)) return 2;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        char *end;
        if (!strcmp(a, "--method")) {
            const kv_method *m = kv_method_find(v);
            if (!m) {
                fprintf(stderr, "kvbench conformance: unknown method '%s' (kvbench methods lists them)\n", v);
                return 2;
            }
            if (n < 64) pick[n++] = m;
        } else if (!strcmp(a, "--params")) {
            spec = v;
        } else if (!strcmp(a, "--seed")) {
            seed = strtoull(v, &end, 10);
            if (!*v || *end) return fprintf(stderr, "kvbench conformance: --seed '%s' is not a number\n", v), 2;
        } else {
            long t = strtol(v, &end, 10);
            if (!*v || *end || t < 1 || t > 1000)
                return fprintf(stderr, "kvbench conformance: --trials '%s': expected 1 to 1000\n", v), 2;
            trials = (int)t;
        }
    }
    char err[300];
    if (spec && mparams_parse(&mp, spec, err, sizeof err))
        return fprintf(stderr, "kvbench conformance: %s\n", err), 2;
    for (int i = 0; i < mp.n; i++) {   /* a value the method refuses is a usage error, not a failed check */
        kv_setup s = {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .n_prompt = 200,
                      .max_decode = 8, .budget_frac = 0.3, .params = mp.p[i]};
        char why[300] = "";
        kv_state *st = mp.m[i]->init(&s, why, sizeof why);
        if (!st && kv_init_refused(why))
            return fprintf(stderr, "kvbench conformance: --params: %s\n", *why ? why : mp.m[i]->name), 2;
        if (st) mp.m[i]->free(st);
    }
    if (!n && mp.n)   /* --params alone: the methods it names */
        for (int i = 0; i < mp.n; i++) pick[n++] = mp.m[i];
    if (!n)   /* the plugins' methods, or all of them */
        for (int i = 0; i < kv_method_count() && n < 64; i++)
            if (!kv_plugin_count() || kv_method_origin(kv_method_at(i))) pick[n++] = kv_method_at(i);
    printf("seed %llu (--seed to replay)\n", seed);
    fflush(stdout);   /* before any scenario runs, with stdout a pipe too */
    long bad = 0, total = 0;
    for (int i = 0; i < n; i++) {
        long checks = 0,
             failed = kv_conformance_params(pick[i], mparams_get(&mp, pick[i]), seed + (uint64_t)i, trials, stdout, &checks);
        printf("%s%s%s: %ld checks, %ld failed\n", pick[i]->name, kv_method_origin(pick[i]) ? " from " : "",
               kv_method_origin(pick[i]) ? kv_method_origin(pick[i]) : "", checks, failed);
        bad += failed, total += checks;
    }
    printf("conformance: %d method%s, %ld checks, %ld failed\n", n, n == 1 ? "" : "s", total, bad);
    return bad ? 1 : 0;
}
