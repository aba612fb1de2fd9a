/* Fuzz target: train-sekv's option parser (train_sekv_parse, methods/sekv/train/): the
 * input split at NUL bytes into argv after "train-sekv". Parsing opens and writes nothing
 * (--out and --checkpoint are checked by the command afterwards). It must return 0 or -1
 * (its one-line error on stderr), and a 0 without --help must hand back a configuration
 * within the documented ranges, the curriculum ascending and no longer than the steps. */
#include "fuzz.h"
#include "../../methods/sekv/train/train_sekv.h"

#include <math.h>

enum { MAX_ARGS = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n > 4096) return 0;
    char *buf = fuzz_str(data, n), *argv[MAX_ARGS + 1] = {"train-sekv"};
    int argc = 1;
    for (size_t i = 0; i <= n && argc < MAX_ARGS; i++) {   /* pieces between NULs */
        argv[argc++] = buf + i;
        i += strlen(buf + i);
    }
    argv[argc] = NULL;
    train_opts o;
    int help = 0, rc = train_sekv_parse(argc, argv, &o, &help);
    if (rc == 0 && !help) {
        if (!o.out || o.steps < 1 || o.steps > 10000000 || (o.rank != 8 && o.rank != 32 && o.rank != 64) ||
            o.tc.rank != o.rank || o.n_stages < 1 || o.n_stages > TRAIN_MAX_STAGES || o.n_stages > o.steps ||
            o.ctx != o.stage_ctx[o.n_stages - 1] || o.n_fit < 1 || o.n_fit > TRAIN_MAX_FIT_BUDGETS ||
            o.tc.keep > o.tc.candidates || o.tc.keep < 1 || o.held_out < 0 || o.held_out > 1000 ||
            (o.held_out_given && o.held_out * 2 > o.max_docs) || o.eval_every < 0 ||
            !(o.time_limit >= 0 && isfinite(o.time_limit)) || (o.time_limit > 0 && !o.checkpoint) ||
            !(o.lambda_budget >= 0 && o.lambda_budget <= 100) || !(o.tc.alpha >= 0 && o.tc.alpha <= 10))
            abort();
        for (int k = 0; k < o.n_stages; k++)
            if (o.stage_ctx[k] < 64 || o.stage_ctx[k] > 1 << 20 || (k && o.stage_ctx[k] <= o.stage_ctx[k - 1])) abort();
        for (int k = 0; k < o.n_fit; k++)
            if (!(o.fit_budgets[k] > 0 && o.fit_budgets[k] <= 1)) abort();
        if (!(o.tc.grid_lo > 0 && o.tc.grid_hi >= o.tc.grid_lo && o.tc.grid_hi <= 10 && o.tc.grid_step > 0)) abort();
    } else if (rc != 0 && rc != -1) {
        abort();
    }
    free(buf);
    return 0;
}
