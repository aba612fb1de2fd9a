/* Fuzz target: each dataset loader on the input as its file, with the default model's
 * tokenizer (loaded once; KVBENCH_MODEL or the cache). The first byte picks the loader:
 * a LongBench task, an InfiniteBench task, GSM8K (the file is its own shots file), or
 * the input as a NIAH haystack (one case built from it). */
#include "fuzz.h"
#include "../../model/model.h"
#include "../../workloads/gsm8k.h"
#include "../../workloads/infinitebench.h"
#include "../../workloads/longbench.h"
#include "../../workloads/niah.h"

static kv_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char err[512];
    if (!(model = model_load(model_default_path(), err, sizeof err))) {
        fprintf(stderr, "fuzz_loaders: needs the default model (make model): %s\n", err);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 1) return 0;
    const kv_tokenizer *tok = model_tokenizer(model);
    int which = data[0] % (LB_N_TASKS + IB_N_TASKS + 2), small = data[0] & 0x80;
    const char *path = fuzz_file(data + 1, n - 1);
    char err[512];
    tc_list l = {0};
    jsonl_stats st;
    if (which < LB_N_TASKS) {
        lb_opts o;
        lb_defaults(&o);
        o.tok = tok;
        o.max_tokens = small ? 48 : 0;          /* exercise the middle cut */
        o.max_ctx = 512;
        o.log = fuzz_null();
        (void)lb_load_task(&o, which, path, &l, &st, err, sizeof err);
    } else if (which < LB_N_TASKS + IB_N_TASKS) {
        ib_opts o;
        ib_defaults(&o);
        o.tok = tok;
        o.max_tokens = small ? 48 : 0;
        o.max_ctx = 512;
        o.log = fuzz_null();
        (void)ib_load_task(&o, which - LB_N_TASKS, path, &l, &st, err, sizeof err);
    } else if (which == LB_N_TASKS + IB_N_TASKS) {
        gsm_opts o;
        gsm_defaults(&o);
        o.tok = tok;
        o.n_shots = small ? 0 : 1;
        o.shots_path = path;
        o.log = fuzz_null();
        (void)gsm_load(&o, path, &l, err, sizeof err);
    } else {
        niah_opts o;
        niah_defaults(&o);
        o.tok = tok;
        o.haystack = (const char *)data + 1;
        o.haystack_len = n - 1;
        niah_builder *b = niah_open(&o, 400, err, sizeof err);
        if (b) {
            tc_case c;
            tc_case_init(&c);
            if (niah_build(b, 400, small ? 0.5 : 1.0, &c, err, sizeof err) == 0) tc_case_free(&c);
            niah_close(b);
        }
    }
    for (int i = 0; i < l.n; i++) {             /* every case tokenises */
        int32_t *ids = NULL;
        int k, nc;
        if (tc_tokenize(tok, &l.v[i], &ids, &k, &nc) == 0) free(ids);
    }
    tc_list_free(&l);
    return 0;
}
