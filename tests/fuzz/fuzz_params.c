/* Fuzz target: --params parsing ("METHOD:key=value,...;METHOD2:...") and each named
 * method's init on a small shape with the parsed overrides (where the values are read
 * and checked). Inputs naming a file (params_file) are skipped: they would read
 * arbitrary paths. */
#include "fuzz.h"
#include "../../harness/drivers/method_params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n > 4096) return 0;
    char *spec = fuzz_str(data, n), err[512];
    method_params mp;
    if (!strstr(spec, "file") && mparams_parse(&mp, spec, err, sizeof err) == 0) {
        char canon[MPARAMS_MAX * 300];
        mparams_canon(&mp, canon, sizeof canon);
        for (int i = 0; i < mp.n; i++) {
            kv_setup s = {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .n_prompt = 96,
                          .max_decode = 4, .budget_frac = 0.25, .params = mp.p[i]};
            kv_state *st = mp.m[i]->init(&s, err, sizeof err);
            if (st) mp.m[i]->free(st);
        }
    }
    free(spec);
    return 0;
}
