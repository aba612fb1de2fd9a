/* kvbench sim: what method M at budget B costs on model X at context N, by tier, and a
 * decode-latency estimate, computed by the methods' own code (sim.h) without loading the
 * model's weights. Results go to a results file like any run (workload "sim"; one case
 * per context), with the terms outside the methods in table sim_mem, so report --table
 * memory and plot --figure memory read them. */
#include "../cli/commands.h"
#include "../drivers/method_params.h"
#include "../identity/provenance.h"
#include "../identity/run_ident.h"
#include "sim.h"
#include "../../kernels/kvtype.h"
#include "../../results/db.h"
#include "../../results/sim_mem.h"
#include "../../kernels/host.h"
#include "../../kernels/cli_opt.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LIST 32

typedef struct {
    const char *model, *out, *corpus, *check_run;
    int ctx[MAX_LIST], n_ctx;
    const kv_method *methods[MAX_LIST];
    int n_methods;
    double budgets[MAX_LIST];
    int n_budgets;
    int decode, elem_bytes, kvt, layers, quiet, measure, chunks, tokens, decode_rule, chunk;
    double weight_bytes;        /* per parameter; 0 = as stored in the GGUF file */
    const char *kv_type, *weights;
    double bw_host, bw_device, bw_pcie;
    uint64_t seed;
    method_params params;
} sim_opts;

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kb_vcomplain("sim", fmt, ap);
    va_end(ap);
    return -1;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench sim [--model PATH|random:PRESET] [--ctx LIST] [--methods all|LIST] [--budget LIST]\n"
            "                   [--decode N] [--kv-type bf16|f16|f32] [--weights bf16|f16|f32|file] [--out FILE]\n"
            "\n"
            "Memory by tier at any context (up to 1M tokens) for every method, by the methods' own\n"
            "code: each method ingests synthetic K/V of the full context for as many layers as fit\n"
            "in memory (the rest scaled by layers; per-layer schedules such as PyramidKV's run every\n"
            "layer), then appends and attends --decode tokens. Also weights, activations, totals and\n"
            "a decode ms/token estimate from bandwidths. Nothing of the model but its shapes is read.\n"
            "\n"
            "  --model SPEC       GGUF file (metadata only), Hugging Face directory or random:PRESET (%s);\n"
            "                     default the default model\n"
            "  --ctx LIST         prompt lengths, K = 1024 (default 8K,32K,128K; at most 1M)\n"
            "  --methods LIST     method names or groups: all, paper, kvpress (default all)\n"
            "  --budget LIST      fractions in (0,1] or token counts (default 0.1)\n"
            "  --decode N         decode tokens appended after the prompt (default 8)\n"
            "  --kv-type T        stored K/V element: bf16 (default, as on the paper's GPUs), f16, f32\n"
            "  --weights T        weight bytes: bf16, f16, f32 per parameter, or file (as stored in the\n"
            "                     GGUF); default file for a GGUF, bf16 for a random preset\n"
            "  --params P         per-method parameters, as kvbench run's\n"
            "  --prefill-chunk N  tokens per prefill chunk for the activations (default 512; 0 = the\n"
            "                     whole prompt at once, as an unchunked prefill)\n"
            "  --layers N         layers run through each method's code, at most what half of\n"
            "                     MemAvailable holds (default 2); the rest are scaled\n"
            "  --bw-host GBPS     host memory bandwidth (default: make bench's measurement)\n"
            "  --bw-device GBPS   device memory bandwidth (default: the H200's published 4.8 TB/s)\n"
            "  --bw-pcie GBPS     host-to-device bandwidth (default: PCIe Gen5 x16's published 64 GB/s)\n"
            "  --decode-rule R    append (default) or hold, as kvbench run's --decode\n"
            "  --seed S           synthetic inputs' seed (default 1)\n"
            "  --out FILE         also record into this results file (report/plot read it)\n"
            "  --quiet            no progress lines\n"
            "  --check-run DB     the CPU engine's memory model against the peak RSS a model run (kvbench\n"
            "                     run --model ...) measured in DB, per case and result, with the error\n"
            "  --measure-inputs   write the measured input tables (harness/sim/sim_stats_table.c) to\n"
            "                     stdout, from the model over --corpus DIR (--chunks N, --tokens N)\n",
            "smollm2-135m, llama3.2-1b, llama3-8b, llama3.1-8b, mistral-7b, qwen2.5-7b");
}

static int parse_ctx(const char *s, int *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s) return -1;
    if (*end == 'K' || *end == 'k') v *= 1024, end++;
    else if (*end == 'M' || *end == 'm') v *= 1048576, end++;
    if (*end || v < 16 || v > 1048576 || v != floor(v)) return -1;
    *out = (int)v;
    return 0;
}

/* Splits a comma list into items; each through fn. 0 or -1. */
static int each(const char *flag, const char *list, int (*fn)(const char *flag, const char *item, sim_opts *o),
                sim_opts *o) {
    char buf[2048];
    if (!*list || strlen(list) >= sizeof buf) return fail("%s '%s': expected a non-empty list", flag, list);
    strcpy(buf, list);
    for (char *s = buf, *next; s; s = next) {
        next = strchr(s, ',');
        if (next) *next++ = 0;
        if (!*s) return fail("%s '%s': empty item in the list", flag, list);
        if (fn(flag, s, o)) return -1;
    }
    return 0;
}

static int add_ctx(const char *flag, const char *s, sim_opts *o) {
    int v;
    if (parse_ctx(s, &v)) return fail("%s '%s': expected a token count in 16..1M (K and M suffixes allowed)", flag, s);
    if (o->n_ctx == MAX_LIST) return fail("%s: at most %d contexts", flag, MAX_LIST);
    for (int i = 0; i < o->n_ctx; i++)
        if (o->ctx[i] == v) return 0;
    o->ctx[o->n_ctx++] = v;
    return 0;
}

static int add_method(const char *flag, const char *s, sim_opts *o) {
    const kv_method *group[256];   /* a group (all, paper, kvpress) or one method */
    int ng = kv_method_group(s, group, 256);
    if (ng < 0 && (group[0] = kv_method_find(s))) ng = 1;
    for (int i = 0; i < ng && i < 256; i++) {
        int dup = 0;
        for (int k = 0; k < o->n_methods; k++) dup |= o->methods[k] == group[i];
        if (!dup && o->n_methods < MAX_LIST) o->methods[o->n_methods++] = group[i];
    }
    if (ng >= 0) return 0;
    char valid[1024] = "";
    for (int i = 0; i < kv_method_count(); i++)
        snprintf(valid + strlen(valid), sizeof valid - strlen(valid), "%s%s", i ? ", " : "", kv_method_at(i)->name);
    return fail("%s: unknown method '%s' (methods: %s, %s)", flag, s, KV_METHOD_GROUPS, valid);
}

static int add_budget(const char *flag, const char *s, sim_opts *o) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || (v > 1 && v != floor(v)) || v > 1e9)
        return fail("%s '%s': expected a fraction in (0,1] or a token count", flag, s);
    if (o->n_budgets == MAX_LIST) return fail("%s: at most %d budgets", flag, MAX_LIST);
    o->budgets[o->n_budgets++] = v;
    return 0;
}

static int elem_of(const char *s) { return !strcmp(s, "bf16") || !strcmp(s, "f16") ? 2 : !strcmp(s, "f32") ? 4 : 0; }

static int parse_args(int argc, char **argv, sim_opts *o) {
    static const char *const bare[] = {"--help", "-h", "--quiet", "--measure-inputs", NULL};
    for (int i = 1; i < argc; i++) {
        char a[64], why[128];
        const char *v;
        int r = kb_opt_next(argc, argv, &i, bare, a, sizeof a, &v);
        if (r != KB_OPT_OK) {
            fprintf(stderr, "kvbench sim: %s\n", kb_opt_problem(r, a, why, sizeof why));
            usage(stderr);
            return -1;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 1;
        if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        if (!strcmp(a, "--measure-inputs")) {
            o->measure = 1;
            continue;
        }
        char err[512];
        int bad = 0;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--corpus")) o->corpus = v;
        else if (!strcmp(a, "--check-run")) o->check_run = v;
        else if (!strcmp(a, "--ctx")) bad = each(a, v, add_ctx, o);
        else if (!strcmp(a, "--methods")) bad = each(a, v, add_method, o);
        else if (!strcmp(a, "--budget")) bad = each(a, v, add_budget, o);
        else if (!strcmp(a, "--params")) {
            if (mparams_parse(&o->params, v, err, sizeof err)) bad = fail("--params: %s", err);
        } else if (!strcmp(a, "--kv-type")) {
            o->kv_type = v;
            if (kb_kvtype_parse(v, &o->kvt)) bad = fail("--kv-type '%s': expected bf16, f16 or f32", v);
            else o->elem_bytes = kb_kvtype_bytes(o->kvt);
        } else if (!strcmp(a, "--weights")) {
            o->weights = v;
            if (strcmp(v, "file") && !elem_of(v)) bad = fail("--weights '%s': expected bf16, f16, f32 or file", v);
        } else if (!strcmp(a, "--decode-rule")) {
            if (kv_decode_parse(v, &o->decode_rule)) bad = fail("--decode-rule '%s': expected append or hold", v);
        } else if (!strcmp(a, "--bw-host") || !strcmp(a, "--bw-device") || !strcmp(a, "--bw-pcie")) {
            double *dst = !strcmp(a, "--bw-host") ? &o->bw_host : !strcmp(a, "--bw-device") ? &o->bw_device : &o->bw_pcie;
            char *end;
            errno = 0;
            *dst = strtod(v, &end);
            if (errno || end == v || *end || !(*dst > 0) || *dst > 1e6) bad = fail("%s '%s': expected GB/s > 0", a, v);
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            o->seed = strtoull(v, &end, 10);
            if (errno || *end || !*v || *v == '-') bad = fail("--seed '%s': expected a non-negative integer", v);
        } else {
            int *dst = !strcmp(a, "--decode") ? &o->decode : !strcmp(a, "--layers") ? &o->layers
                     : !strcmp(a, "--prefill-chunk") ? &o->chunk
                     : !strcmp(a, "--chunks") ? &o->chunks : !strcmp(a, "--tokens") ? &o->tokens : NULL;
            if (!dst) {
                fprintf(stderr, "kvbench sim: unknown option '%s'\n", a);
                usage(stderr);
                return -1;
            }
            char *end;
            errno = 0;
            long x = strtol(v, &end, 10);
            if (errno || *end || !*v || x < (dst == &o->decode || dst == &o->chunk ? 0 : 1) || x > 1048576)
                bad = fail("%s '%s': expected an integer in %d..1048576", a, v, dst == &o->decode || dst == &o->chunk ? 0 : 1);
            else *dst = (int)x;
        }
        if (bad) return -1;
    }
    return 0;
}

/* ------------------------------------------------ memory available, layers held */

static double mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb > 0 ? kb * 1024.0 : 4.0 * (1 << 30);
}

/* The statistics every (method, budget) asks for at this context. */
static kv_needs union_needs(const sim_opts *o, const sim_shape *sh, int ctx) {
    kv_needs all = {0};
    for (int i = 0; i < o->n_methods; i++)
        for (int b = 0; b < o->n_budgets; b++) {
            const kv_model_config *c = &sh->cfg;
            kv_setup s = {.n_layers = c->n_layer, .n_heads = c->n_head, .n_kv_heads = c->n_head_kv,
                          .head_dim = c->head_dim, .n_prompt = ctx, .max_decode = o->decode + 1,
                          .kv_type = o->kvt, .params = mparams_get(&o->params, o->methods[i]),
                          .model_hash = sh->model_hash, .decode_rule = o->decode_rule};
            if (o->budgets[b] <= 1) s.budget_frac = o->budgets[b];
            else s.budget_tokens = (int)o->budgets[b];
            char err[256];
            kv_state *st = o->methods[i]->init(&s, err, sizeof err);
            if (!st) continue;
            kv_needs nd = {0};
            o->methods[i]->needs(&s, &nd);
            o->methods[i]->free(st);
            kv_needs_union(&all, &nd);
        }
    return all;
}

/* Layers held at once: --layers (default 2: the synthetic layers are drawn alike, so more
 * only average more draws and cost time), at most what fits in half of MemAvailable with
 * each layer's inputs plus, in the worst case (FullKV), the method's f32 copy of it. */
static int layers_to_hold(const sim_opts *o, const sim_shape *sh, int ctx, const kv_needs *nd) {
    const kv_model_config *c = &sh->cfg;
    double per = sim_layer_bytes(ctx, c->n_head, c->n_head_kv, c->head_dim, nd) +
                 2.0 * ctx * c->n_head_kv * c->head_dim * sizeof(float) * 1.25;
    int m = (int)(0.5 * mem_available() / per);
    if (m < 1) m = 1;
    if (m > c->n_layer) m = c->n_layer;
    if (o->layers < m) m = o->layers;
    return m;
}

/* ------------------------------------------------ results file */

typedef struct {
    double total_steady, total_peak, cpu_ms, gpu_ms;
} sim_totals;

static int sim_put(kv_db *db, int64_t case_id, const kv_method *m, double budget, const sim_result *r,
                   const sim_other *ot, const sim_totals *t) {
    kvdb_result row = {.method = m->name, .params = *r->params ? r->params : NULL, .status = r->status,
                       .budget = m->keeps_all ? 1 : budget, .budget_tokens = r->budget_tokens, .score = NAN,
                       .rel_err = NAN, .mem = r->mem, .fast_decode_peak = (int64_t)llround(r->fast_decode_peak),
                       .output = strcmp(r->status, "ok") ? r->why : NULL, .n_layers = 0, .n_heads = 0,
                       .ans_nll = NAN, .kl = NAN, .top1 = NAN, .compress_spread = NAN, .decode_spread = NAN};
    int rc = kvdb_result_put(db, case_id, &row);
    if (rc < 0) return -1;
    if (rc == 1 || strcmp(r->status, "ok")) return 0;
    kvdb_sim_mem sm = {.case_id = case_id, .method = m->name, .budget = row.budget, .weights = ot->weights,
                       .act_prefill = ot->act_prefill, .act_decode = ot->act_decode, .stats = ot->stats,
                       .fast_prefill_peak = r->fast_prefill_peak, .total_steady = t->total_steady,
                       .total_peak = t->total_peak, .measured_layers = r->measured, .n_layers = r->n_layers_model,
                       .batched = r->batched, .kv_read = r->fast_kv_read, .slow_read = r->slow_read,
                       .cpu_ms = t->cpu_ms, .gpu_ms = t->gpu_ms};
    return kvdb_sim_mem_put(db, &sm);
}

/* ------------------------------------------------ the command */

static double gib(double b) { return b / (1024.0 * 1024 * 1024); }

static void print_header(const sim_opts *o, const sim_shape *sh, const sim_bw *bw) {
    const kv_model_config *c = &sh->cfg;
    printf("## kvbench sim: %s (%s, %d layers, %d heads, %d kv heads, head_dim %d, %.2f B params)\n\n", sh->spec,
           c->arch, c->n_layer, c->n_head, c->n_head_kv, c->head_dim, sh->n_params / 1e9);
    printf("KV stored as %s; weights %s; activations in the K/V type, prefill chunk %d; decode %d tokens (rule %s);"
           " inputs: %s.\n", o->kv_type, o->weights, o->chunk, o->decode, kv_decode_name(o->decode_rule), sim_stats_default()->source);
    printf("Bandwidth: host %s; device %s; PCIe %s.\n\n", bw->host_src, bw->device_src, bw->pcie_src);
    printf("| ctx | method | budget | layers run | fast steady GiB | fast peak GiB | slow GiB | weights GiB |"
           " act. peak GiB | total steady GiB | total peak GiB | CPU ms/tok | GPU ms/tok |\n"
           "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
}

int cmd_sim(int argc, char **argv) {
    sim_opts o = {.decode = 8, .layers = 2, .chunk = 512, .kv_type = "bf16", .elem_bytes = 2, .kvt = KB_BF16, .seed = 1, .chunks = 8, .tokens = 2048};
    int pr = parse_args(argc, argv, &o);
    if (pr) return pr > 0 ? 0 : 2;
    if (!o.model) o.model = model_default_path();
    char err[1024];
    if (o.check_run) return sim_check_run(o.check_run, err, sizeof err) ? (fail("%s", err), 1) : 0;
    if (o.measure) {
        char corpus[1024];
        kb_cache_path("corpus", corpus, sizeof corpus);
        if (sim_measure_inputs(o.model, o.corpus ? o.corpus : corpus, o.chunks, o.tokens, stdout, err, sizeof err))
            return fail("%s", err), 1;
        return 0;
    }
    if (!o.n_ctx) o.ctx[0] = 8192, o.ctx[1] = 32768, o.ctx[2] = 131072, o.n_ctx = 3;
    if (!o.n_methods) add_method("--methods", "all", &o);
    if (!o.n_budgets) o.budgets[0] = 0.1, o.n_budgets = 1;
    sim_shape sh;
    if (sim_shape_open(o.model, &sh, err, sizeof err)) return fail("--model %s", err), 2;
    if (!o.weights) o.weights = sh.is_random ? "bf16" : "file";
    if (!strcmp(o.weights, "file") && sh.is_random) return fail("--weights file: %s has no file; give bf16, f16 or f32", o.model), 2;
    o.weight_bytes = strcmp(o.weights, "file") ? elem_of(o.weights) : 0;
    if (!strcmp(o.weights, "f32")) o.weight_bytes = 4;
    if (o.params.n) {   /* a bad value is a configuration error before anything runs */
        const kv_model_config *c = &sh.cfg;
        kv_setup shape = {.n_layers = c->n_layer, .n_heads = c->n_head, .n_kv_heads = c->n_head_kv,
                          .head_dim = c->head_dim, .n_prompt = 256, .max_decode = 1, .budget_frac = 0.5,
                          .kv_type = o.kvt, .model_hash = sh.model_hash};
        if (run_check_methods(o.methods, o.n_methods, &o.params, &shape, err, sizeof err)) return fail("%s", err), 2;
    }
    sim_bw bw;
    sim_bw_get(o.bw_host, o.bw_device, o.bw_pcie, &bw);

    kv_db *db = NULL;
    int64_t run_id = -1;
    if (o.out) {
        if (!(db = kvdb_open(o.out, err, sizeof err))) return fail("%s", err), 2;
        if (kvdb_sim_mem_table(db)) {
            kvdb_close(db);
            return fail("%s: cannot create table sim_mem", o.out), 1;
        }
        provenance prov;
        provenance_get(&prov);
        char dflt[4096], mp[2048], key[16384], json[8192];
        run_ident_methods(&o.params, dflt, sizeof dflt);
        mparams_canon(&o.params, mp, sizeof mp);
        snprintf(key, sizeof key, "sim/v1;model=%s;kv=%s;weights=%s;decode=%d;layers=%d;chunk=%d;decode_rule=%s;seed=%llu;code=%s;"
                 "methods=%s%s%s",
                 o.model, o.kv_type, o.weights, o.decode, o.layers, o.chunk, kv_decode_name(o.decode_rule), (unsigned long long)o.seed,
                 prov.code, dflt, *mp ? ";params=" : "", mp);
        snprintf(json, sizeof json,
                 "{\"workload\":\"sim\",\"model\":\"%s\",\"kv_type\":\"%s\",\"elem_bytes\":%d,\"weights\":\"%s\","
                 "\"decode\":%d,\"layers\":%d,\"prefill_chunk\":%d,\"decode_rule\":\"%s\",\"inputs\":\"%s\",\"bw_host\":\"%s\",\"bw_device\":\"%s\","
                 "\"bw_pcie\":\"%s\"}",
                 o.model, o.kv_type, o.elem_bytes, o.weights, o.decode, o.layers, o.chunk, kv_decode_name(o.decode_rule),
                 sim_stats_default()->source, bw.host_src, bw.device_src, bw.pcie_src);
        kvdb_run run = {.run_key = key, .config_json = json, .workload = "sim", .model = o.model,
                        .git_commit = prov.git_commit, .build_flags = KB_BUILD_FLAGS, .host = prov.host,
                        .cpu = prov.cpu, .backend = "sim", .seed = o.seed};
        int resumed = 0;
        run_id = kvdb_run_begin(db, &run, &resumed);
        if (run_id < 0) {
            fail("%s", kvdb_errmsg(db));
            kvdb_close(db);
            return 1;
        }
    }

    print_header(&o, &sh, &bw);
    fflush(stdout);
    const kv_model_config *c = &sh.cfg;
    int rc = 0;
    for (int ci = 0; ci < o.n_ctx && !rc; ci++) {
        int ctx = o.ctx[ci];
        kv_needs nd = union_needs(&o, &sh, ctx);
        int held = layers_to_hold(&o, &sh, ctx, &nd);
        int64_t case_id = -1;
        if (db) {
            char ck[64];
            snprintf(ck, sizeof ck, "ctx=%d", ctx);
            kvdb_case cs = {.case_key = ck, .workload = "sim", .ctx = ctx, .depth = 0, .variant = "sim", .seed = o.seed};
            if ((case_id = kvdb_case_get(db, run_id, &cs)) < 0) {
                rc = fail("%s", kvdb_errmsg(db));
                break;
            }
        }
        if (!o.quiet)
            fprintf(stderr, "kvbench sim: ctx %d: making %d of %d layers of synthetic K/V (%.2f GiB)\n", ctx, held,
                    c->n_layer, gib(held * sim_layer_bytes(ctx, c->n_head, c->n_head_kv, c->head_dim, &nd)));
        sim_layer *layers = calloc((size_t)held, sizeof *layers);
        float *surp = malloc((size_t)ctx * sizeof *surp);
        uint8_t *send = malloc((size_t)ctx);
        if (!layers || !surp || !send) rc = fail("out of memory at ctx %d", ctx);
        for (int l = 0; !rc && l < held; l++)
            if (sim_layer_make(&layers[l], sim_stats_default(), ctx, c->n_head, c->n_head_kv, c->head_dim, &nd, l,
                               o.seed))
                rc = fail("out of memory for layer %d at ctx %d (try --layers 1)", l, ctx);
        if (!rc) sim_stream(sim_stats_default(), ctx, o.seed, surp, send);
        sim_case sc = {.shape = &sh, .stats = sim_stats_default(), .ctx = ctx, .decode = o.decode,
                       .elem_bytes = o.elem_bytes, .kv_type = o.kvt, .decode_rule = o.decode_rule, .seed = o.seed,
                       .layers = layers, .n_layers_made = held, .surprisal = surp, .sent_end = send};
        for (int mi = 0; !rc && mi < o.n_methods; mi++)
            for (int bi = 0; !rc && bi < o.n_budgets; bi++) {
                const kv_method *m = o.methods[mi];
                if (m->keeps_all && bi > 0) continue;   /* FullKV ignores the budget: once, at 1 */
                double budget = m->keeps_all ? 1 : o.budgets[bi];
                if (db && kvdb_result_exists(db, case_id, m->name, budget) == 1) {
                    if (!o.quiet) fprintf(stderr, "kvbench sim: ctx %d %s %g: already recorded\n", ctx, m->name, budget);
                    continue;
                }
                sc.params = mparams_get(&o.params, m);
                sim_result r;
                if (sim_method_run(&sc, m, budget, &r)) {
                    rc = fail("%s: %s", m->name, r.why);
                    break;
                }
                sim_other ot;
                kv_needs mine = {0};
                {   /* the statistics it asks for, when feasible */
                    kv_setup s = {.n_layers = c->n_layer, .n_heads = c->n_head, .n_kv_heads = c->n_head_kv,
                                  .head_dim = c->head_dim, .n_prompt = ctx, .max_decode = o.decode + 1,
                                  .kv_type = o.kvt, .params = sc.params, .model_hash = sh.model_hash};
                    if (budget <= 1) s.budget_frac = budget;
                    else s.budget_tokens = (int)budget;
                    kv_state *st = m->init(&s, err, sizeof err);
                    if (st) m->free(st), m->needs(&s, &mine);
                }
                sim_other_bytes(&sh, ctx, o.weight_bytes, o.elem_bytes, o.chunk > 0 ? o.chunk : ctx, &mine, &ot);   /* this method's stats */
                sim_totals t;
                t.total_steady = ot.weights + r.fast_decode_peak + ot.act_decode;
                t.total_peak = ot.weights + (double)r.mem.fast_peak + ot.act_prefill + ot.stats;
                double wread = ot.weights;
                t.cpu_ms = sim_latency_ms(&bw, 0, wread, r.fast_kv_read, r.slow_read);
                t.gpu_ms = sim_latency_ms(&bw, 1, wread, r.fast_kv_read, r.slow_read);
                char lay[48];
                snprintf(lay, sizeof lay, r.batched ? "all %d (batches of %d)" : r.measured < c->n_layer ? "%d of %d, scaled"
                                                                                                         : "all %d",
                         r.batched || r.measured == c->n_layer ? c->n_layer : r.measured,
                         r.batched ? r.measured : c->n_layer);
                if (strcmp(r.status, "ok"))
                    printf("| %d | %s | %g | %s | %s: %.200s |||||||||\n", ctx, m->name, budget, lay, r.status, r.why);
                else {
                    char cpu[32] = "-";   /* no host bandwidth known */
                    if (t.cpu_ms >= 0) snprintf(cpu, sizeof cpu, "%.2f", t.cpu_ms);
                    printf("| %d | %s | %g | %s | %.3f | %.3f | %.3f | %.2f | %.2f | %.2f | %.2f | %s | %.3f |\n", ctx,
                           m->name, budget, lay, gib(r.fast_decode_peak), gib((double)r.mem.fast_peak),
                           gib((double)r.mem.slow_peak), gib(ot.weights), gib(ot.act_prefill + ot.stats),
                           gib(t.total_steady), gib(t.total_peak), cpu, t.gpu_ms);
                }
                fflush(stdout);
                if (!o.quiet)
                    fprintf(stderr, "kvbench sim: ctx %d %s %g: %s in %.1f s\n", ctx, m->name, budget, r.status,
                            r.seconds);
                if (db && sim_put(db, case_id, m, budget, &r, &ot, &t)) rc = fail("%s", kvdb_errmsg(db));
            }
        for (int l = 0; layers && l < held; l++) sim_layer_free(&layers[l]);
        free(layers), free(surp), free(send);
    }
    printf("\nfast: the fast tier (GPU) K/V and method state; steady: the most held from the end of compression"
           " through decode; peak: with the prefill's transient uncompressed layer. act. peak: the chunked"
           " prefill's activations and the method's prefill statistics for one layer. total = weights + fast tier +"
           " activations (the slow tier is host memory). Measured: the layers the method's code ran; scaled: the"
           " rest, by layers. ms/tok: (weights + fast-tier bytes read) / bandwidth + slow-tier bytes over PCIe"
           " (GPU), a bandwidth bound, no compute.\n");
    if (db) kvdb_close(db);
    return rc ? 1 : 0;
}
