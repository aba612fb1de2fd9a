#include "run_args.h"
#include "../../model/model.h"
#include "shard.h"
#include "../../kernels/host.h"
#include "../../kernels/cli_opt.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int run_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kb_vcomplain("run", fmt, ap);
    va_end(ap);
    return -1;
}

int run_unknown(const char *flag) { return run_fail("unknown option '%s' (see kvbench run --help)", flag); }

static const char *const common_bare[] = {"--quiet", "--help", "-h"};

/* argv[*i] as "--flag value" (advancing *i) or "--flag=value" into flag[0..cap) and *val
 * (NULL for a bare flag), by the one rule of every command (kernels/cli_opt.h). 0 or -1
 * (error printed). */
static int split_flag(const run_flag_syntax *syn, int argc, char **argv, int *i, char *flag, size_t cap,
                      const char **val) {
    const char *bare[40];
    int n = 0;
    for (size_t k = 0; k < sizeof common_bare / sizeof common_bare[0]; k++) bare[n++] = common_bare[k];
    for (int k = 0; k < syn->n_bare && n + 1 < (int)(sizeof bare / sizeof bare[0]); k++) bare[n++] = syn->bare[k];
    bare[n] = NULL;
    switch (kb_opt_next(argc, argv, i, bare, flag, cap, val)) {
    case KB_OPT_OK: return 0;
    case KB_OPT_WORD: return run_fail("unexpected argument '%s' (see kvbench run --help)", argv[*i]);
    case KB_OPT_BARE_VALUE: return run_fail("%s takes no value", flag);
    case KB_OPT_NO_VALUE:
        if (!run_flag_documented(syn->usage, flag)) return syn->unknown(flag);
        return run_fail("%s needs a value", flag);
    default: return syn->unknown(argv[*i]);
    }
}

/* One option of run_common: 1 taken, 0 not one of them, -1 error printed. */
static int common_flag(run_common *c, const char *flag, const char *val) {
    if (!strcmp(flag, "--quiet")) c->quiet = 1;
    else if (!strcmp(flag, "--workload") || !strcmp(flag, "--workloads")) c->workload = val;
    else if (!strcmp(flag, "--methods") || !strcmp(flag, "--method")) c->methods = val;
    else if (!strcmp(flag, "--budget") || !strcmp(flag, "--budgets")) c->budgets = val;
    else if (!strcmp(flag, "--ctx")) c->ctxs = val;
    else if (!strcmp(flag, "--depths") || !strcmp(flag, "--depth")) c->depths = val;
    else if (!strcmp(flag, "--db")) c->db_path = val;
    else if (!strcmp(flag, "--params")) c->params = val;
    else if (!strcmp(flag, "--backend")) {
        if (strcmp(val, "cpu") && strcmp(val, "cuda")) return run_fail("--backend '%s': expected cpu or cuda", val);
        c->backend = val;
    } else if (!strcmp(flag, "--seed")) {
        if (run_parse_seed(flag, val, &c->seed)) return -1;
        c->seed_given = 1;
    }
    else if (!strcmp(flag, "--split")) {
        if (run_parse_split(flag, val, &c->split)) return -1;
        c->split_given = 1;
    } else if (!strcmp(flag, "--kv-type")) return run_parse_kv_type(flag, val, &c->kv_type) ? -1 : 1;
    else if (!strcmp(flag, "--decode")) {
        if (kv_decode_parse(val, &c->decode_rule))
            return run_fail("--decode '%s': expected append or hold (the step count is --steps N; through the model, "
                            "--max-new N)", val);
    } else if (!strcmp(flag, "--threads")) return run_parse_int(flag, val, 1, 256, &c->threads) ? -1 : 1;
    else if (!strcmp(flag, "--shard")) return shard_parse(flag, val, &c->shard) ? -1 : 1;
    else return 0;
    return 1;
}

int run_parse(const run_flag_syntax *syn, int argc, char **argv, run_common *c, void *ctx) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            syn->usage(stdout);
            return 1;
        }
        char flag[64];
        const char *val = NULL;
        if (split_flag(syn, argc, argv, &i, flag, sizeof flag, &val)) return -1;
        int r = common_flag(c, flag, val);
        if (r == 0) r = syn->own(ctx, flag, val);
        if (r == 0) return syn->unknown(flag);
        if (r < 0) return -1;
    }
    return 0;
}

/* The wording of the options of every run. Method-dependent parts come from the
 * registry (the reference, the methods that evict while decoding), never by name. */
void run_common_usage(FILE *f) {
    const kv_method *ref = kv_method_reference();
    const char *ev[32];
    int n_ev = 0;
    for (int i = 0; i < kv_method_count() && n_ev < 32; i++)
        if (kv_method_at(i)->evicts_decoding) ev[n_ev++] = kv_method_at(i)->name;
    char budget[256] = "", evict[512] = "";
    if (ref)
        snprintf(budget, sizeof budget, ";\n                     %s ignores it and runs once per case, recorded at budget 1",
                 ref->name);
    for (int k = 0; k < n_ev; k++) {
        size_t len = strlen(evict);
        snprintf(evict + len, sizeof evict - len, "%s%s", !k ? ";\n                     " : k + 1 < n_ev ? ", " : " and ", ev[k]);
    }
    if (n_ev) snprintf(evict + strlen(evict), sizeof evict - strlen(evict), " still evict while decoding (their papers)");
    fprintf(f,
            "  --methods LIST     method names (kvbench methods lists them) or groups: all; paper (the paper's\n"
            "                     rows and baselines); kvpress (the methods kvpress has) (default all)\n"
            "  --budget LIST      kept per layer and kv head: fractions of the prompt in (0,1], or token\n"
            "                     counts (integers > 1) (default 0.1)%s\n"
            "  --params SPEC      per-method overrides METHOD:key=value[,..][;METHOD:..] (kvbench methods\n"
            "                     lists each method's keys and defaults); part of the run's identity\n"
            "  --db FILE          results file (created if missing; required, except with --print-prompts)\n"
            "  --seed N           generator seed of the generated workloads (default: 1 for synthetic-*,\n"
            "                     42 for ruler), an integer in 0..%llu\n"
            "  --split S          test (default: reported numbers) or dev (for tuning) of the generated\n"
            "                     workloads (synthetic-*, niah, ruler): disjoint generator seeds (2*seed\n"
            "                     and 2*seed+1), and for niah disjoint haystack text (test sample 1 is the\n"
            "                     classic prompt from the essays' start, dev starts in their second half)\n"
            "  --decode RULE      append (default): every method compresses the prompt once and keeps\n"
            "                     decoded (and --question-after) tokens at full resolution%s.\n"
            "                     hold: every method keeps its fast-tier rows within the budget at\n"
            "                     every step, by its own rule. Part of the run's identity\n"
            "  --kv-type T        K/V rows stored as f32, f16 or bf16 by every method (the --fidelity\n"
            "                     reference too); rounded to nearest even, attention computes in f32, the\n"
            "                     prefill stays f32; memory counts the type's bytes. Part of the run's\n"
            "                     identity. Default f32, and bf16 with --backend cuda\n"
            "  --backend NAME     cpu or cuda (default cpu); cuda needs a make CUDA=1 build and a device\n"
            "                     (through the model, without one: a note, then the CPU)\n"
            "  --threads N        worker threads, 1..256 (default: online CPUs, divided among --jobs)\n"
            "  --shard K/N        run only shard K (0..N-1) of the cases, split by estimated cost\n"
            "                     (synthetic: ctx^2; through the model: prompt length); every shard records\n"
            "                     the same run and the whole plan, `kvbench merge` joins the shard files\n"
            "                     (kvbench slurm-script)\n"
            "  --quiet            no progress lines\n"
            "  --help             this text\n",
            budget, (unsigned long long)WL_SPLIT_SEED_MAX, evict);
}

int run_parse_seed(const char *flag, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || v > WL_SPLIT_SEED_MAX)
        return run_fail("%s '%s': expected an integer in 0..%llu", flag, s, (unsigned long long)WL_SPLIT_SEED_MAX);
    *out = v;
    return 0;
}

int run_parse_split(const char *flag, const char *s, wl_split *out) {
    if (wl_split_parse(s, out)) return run_fail("%s '%s': expected dev or test", flag, s);
    return 0;
}

int run_parse_int(const char *flag, const char *s, int lo, int hi, int *out) {
    long v;
    if (kb_parse_long(s, lo, hi, &v)) return run_fail("%s '%s': expected an integer in %d..%d", flag, s, lo, hi);
    *out = (int)v;
    return 0;
}

int run_parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int run_each_item(const char *flag, const char *list, int (*item)(const char *flag, const char *s, void *ctx),
                  void *ctx) {
    if (!*list) return run_fail("%s: empty list", flag);
    char buf[4096];
    if (strlen(list) >= sizeof buf) return run_fail("%s: list too long", flag);
    strcpy(buf, list);
    char *s = buf;
    for (;;) {
        char *comma = strchr(s, ',');
        if (comma) *comma = 0;
        if (!*s) return run_fail("%s '%s': empty item in the list", flag, list);
        if (item(flag, s, ctx)) return -1;
        if (!comma) return 0;
        s = comma + 1;
    }
}

int run_add_method(const char *flag, const char *s, const kv_method **list, int *n, int cap) {
    const kv_method *group[256];   /* a group (all, paper, kvpress) or one method */
    int ng = kv_method_group(s, group, 256);
    if (ng < 0 && (group[0] = kv_method_find(s))) ng = 1;
    if (ng < 0) {
        char valid[1024] = "";
        for (int i = 0; i < kv_method_count(); i++) {
            size_t len = strlen(valid);
            snprintf(valid + len, sizeof valid - len, "%s%s", i ? ", " : "", kv_method_at(i)->name);
        }
        return run_fail("%s: unknown method '%s' (valid: %s, %s)", flag, s, KV_METHOD_GROUPS, valid);
    }
    for (int i = 0; i < ng && i < 256; i++) {
        const kv_method *m = group[i];
        int dup = 0;
        for (int k = 0; k < *n; k++) dup |= list[k] == m;
        if (dup) continue;
        if (*n == cap) return run_fail("%s: more than %d methods", flag, cap);
        list[(*n)++] = m;
    }
    return 0;
}

int run_add_budget(const char *flag, const char *s, double *list, int *n, int cap) {
    double v = 0;
    if (run_parse_double(s, &v) || v <= 0 || (v > 1 && (v != floor(v) || v > 1e9)))
        return run_fail("%s '%s': expected a fraction in (0,1] or a token count (integer > 1)", flag, s);
    for (int i = 0; i < *n; i++)
        if (list[i] == v) return 0;
    if (*n == cap) return run_fail("%s: more than %d budgets", flag, cap);
    list[(*n)++] = v;
    return 0;
}

int run_flag_documented(void (*usage)(FILE *), const char *flag) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return 0;
    usage(f);
    fclose(f);
    int found = 0;
    size_t L = strlen(flag);
    for (const char *p = text; p && !found && (p = strstr(p, flag)); p += L)
        found = p > text && (p[-1] == ' ' || p[-1] == ',') && (p[L] == ' ' || p[L] == ',' || p[L] == '\n');
    free(text);
    return found;
}

int run_parse_kv_type(const char *flag, const char *s, int *out) {
    if (kb_kvtype_parse(s, out)) return run_fail("%s '%s': expected f32, f16 or bf16", flag, s);
    return 0;
}

int run_parse_activations(const char *flag, const char *s, int *q8) {
    if (!model_activations_parse(s, q8)) return 0;
    return run_fail("%s '%s': expected f32 or q8", flag, s);
}

int run_parse_batch(const char *flag, const char *s, int *batch) {
    if (!strcmp(s, "0") || !strcmp(s, "1")) return *batch = s[0] == '1', 0;
    return run_fail("%s '%s': expected 1 (the pairs of a case decode together) or 0 (one at a time)", flag, s);
}

int run_kv_type_backend(int *kv_type, const char *backend) {
    if (*kv_type < 0) *kv_type = backend && !strcmp(backend, "cuda") ? KB_BF16 : KB_F32;
    return 0;
}
