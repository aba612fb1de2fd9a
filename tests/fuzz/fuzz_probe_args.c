/* Fuzz target: sekv-probe's option parser (sekv_probe_parse, methods/sekv/tools/): the
 * input split at NUL bytes into argv after "sekv-probe". It must return 0, 1 (--help)
 * or 2 (its one-line error on stderr), and a 0 must hand back only values the probe can
 * use: 1 to 8 settings, 1 to 16 whole contexts in 1..2^20, depths in 0..100, a budget that
 * is a fraction in (0, 1] or a whole token count the int conversion of the run holds.
 * Nothing is loaded or run. */
#include "fuzz.h"
#include "../../methods/sekv/tools/sekv_probe.h"

#include <math.h>

enum { MAX_ARGS = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n > 4096) return 0;
    char *buf = fuzz_str(data, n), *argv[MAX_ARGS + 1] = {"sekv-probe"};
    int argc = 1;
    for (size_t i = 0; i <= n && argc < MAX_ARGS; i++) {   /* pieces between NULs */
        argv[argc++] = buf + i;
        i += strlen(buf + i);
    }
    argv[argc] = NULL;
    sekv_probe_opts o;
    int rc = sekv_probe_parse(argc, argv, &o);
    if (rc == 0) {
        if (o.n_sets < 1 || o.n_sets > SEKV_PROBE_MAX_SETS || o.n_ctx < 1 || o.n_ctx > SEKV_PROBE_MAX_LIST ||
            o.n_depth < 1 || o.n_depth > SEKV_PROBE_MAX_LIST || !o.model_path)
            abort();
        for (int i = 0; i < o.n_ctx; i++)
            if (o.ctxs[i] < 1 || o.ctxs[i] > SEKV_PROBE_MAX_CTX) abort();
        for (int i = 0; i < o.n_depth; i++)
            if (!(o.depths[i] >= 0 && o.depths[i] <= 100)) abort();
        if (!(o.budget > 0) || (o.budget > 1 && (o.budget > SEKV_PROBE_MAX_CTX || o.budget != floor(o.budget))))
            abort();
        volatile int tokens = o.budget > 1 ? (int)o.budget : 0;   /* as probe_one converts it (UBSan) */
        (void)tokens;
    } else if (rc != 1 && rc != 2) {
        abort();
    }
    free(buf);
    return 0;
}
