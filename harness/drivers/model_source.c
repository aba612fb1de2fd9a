/* The text workloads through the model as a case source of `kvbench run` (case_loop.h):
 * niah, ruler, longbench, infinitebench and gsm8k over methods and budgets.
 *
 * Per case: tokenize the prompt, prefill it once with the statistics every missing pair
 * asked for (shared by all methods and budgets; streamed layer by layer into the methods
 * when nothing ingests it again), then for every (method, budget) the case lacks: init,
 * ingest every layer (compression), greedy decode through the method until a stop token
 * (the pairs together, one batched forward pass a step, with --batch 1), score the text
 * with the workload's official metric. One run; FullKV runs once per case, at budget 1. */
#include "run_sources.h"
#include "model_case.h"
#include "fidelity.h"
#include "model_workload.h"
#include "rss.h"
#include "../identity/run_ident.h"
#include "../../kernels/core.h"
#include "../../workloads/niah.h"
#include "../../workloads/sha256.h"
#include "../../methods/method.h"
#include "../../model/model.h"
#include "../../results/db.h"
#include "../../results/query.h"
#include "../../kernels/host.h"
#ifdef KB_CUDA
#include "../../kernels/cuda_backend.h"
#include "../../kernels/cuda_mem.h"
#include "../../model/cuda_model.h"
#endif

#include <libgen.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_LIST = 64, MAX_PAIRS = MAX_LIST * MAX_LIST, MAX_JOBS = 64 };

typedef struct {
    const char *model_path, *workload, *db_path, *backend;
    run_trained trained[8];    /* run_ident_trained: part of the run key */
    int n_trained;
    mw_spec wl;
    const kv_method *methods[MAX_LIST];
    int n_methods;
    double budgets[MAX_LIST];
    int n_budgets;
    int ctxs[MAX_LIST];
    int n_ctx, ctx_given;
    double depths[MAX_LIST];   /* % */
    int n_depths, depths_given;
    int threads, jobs, job_index, quiet;
    int decode_rule;           /* kv_decode_rule, the same for every method */
    int kv_type;               /* kb_kvtype of every method's K/V rows */
    int q8_act;                /* --activations q8: decode mat-vecs on 8-bit activations */
    int print_prompts;         /* --print-prompts N: write the first N prompts, run nothing */
    shard_spec shard;   /* --shard K/N: only the cases of shard K */
    int fidelity, repeat;      /* --fidelity K (0 off), --repeat N */
    int batch;                 /* --batch: 1 (default) the pairs of a case decode together */
    method_params params;
    /* (method, budget) pairs to run per case; fullkv ignores the budget and runs once at 1 */
    const kv_method *pair_m[MAX_PAIRS];
    double pair_b[MAX_PAIRS];
    int n_pairs;
} rm_opts;

static void model_options(FILE *f) {
    /* the methods that keep every layer until the surprisal exists (kv_method.needs_surprisal) */
    char keep[512] = "";
    for (int i = 0; i < kv_method_count(); i++)
        if (kv_method_at(i)->needs_surprisal)
            snprintf(keep + strlen(keep), sizeof keep - strlen(keep), "%s%s", *keep ? ", " : "", kv_method_at(i)->name);
    fprintf(f,
            "  --workload W       niah                 needle in a haystack (Paul Graham essays)\n"
            "                     ruler[:TASK,..]      RULER tasks: the 11 synthetic ones by default, all 13\n"
            "                                          with --qa-data (qa_1, qa_2 need it)\n"
            "                     longbench:DIR        LongBench v1 JSONL files in DIR\n"
            "                     infinitebench:DIR    InfiniteBench JSONL files in DIR\n"
            "                     gsm8k:FILE           GSM8K test JSONL (few-shot)\n"
            "  --model F          GGUF file or Hugging Face directory (default %s)\n"
            "  --ctx LIST         niah, ruler: prompt lengths in tokens (default niah 1024,2048,4096,\n"
            "                     ruler 4096); longbench, infinitebench: one value, the prompt budget\n"
            "                     before the chat template, cut in the middle (default: the model's\n"
            "                     context - the longest generation - 64)\n"
            "  --depths LIST      niah: needle depths in %% of the context (default 0,10,..,100)\n"
            "  --limit N          niah: first N cases; ruler: samples per task and length (default 1);\n"
            "                     longbench, infinitebench: cases per task; gsm8k: test cases\n"
            "  --tasks LIST       longbench, infinitebench: these tasks only (default: every file)\n"
            "  --haystack PATH    niah, ruler: essay text file or directory of .txt (default: the\n"
            "                     `make haystack` cache)\n"
            "  --shots N          gsm8k: worked examples in the prompt (default 50)\n"
            "  --shots-file F     gsm8k: where the examples come from (default train.jsonl beside FILE)\n"
            "  --question-after   prefill and compress the context only, then feed the question\n"
            "                     tokens through decode steps into the compressed cache (default:\n"
            "                     question-aware, the whole prompt is prefilled and compressed)\n"
            "  --max-new N        generate at most N tokens (default: the task's own length)\n"
            "  --activations A    f32 (default: logits equal transformers' within 2e-6) or q8 (decode\n"
            "                     mat-vecs on 8-bit activation blocks with int8 dot products, as\n"
            "                     llama.cpp does: faster, logits off by about 1e-2 relative). Part of\n"
            "                     the run's identity. q8: CPU backend only\n"
            "  --samples N        niah: haystack starts per (length, depth) cell, 1..16 (default 1)\n"
            "  --needles N        niah: the needle plus N-1 distractor needles about other cities\n"
            "                     (multi-key retrieval), 1..8 (default 1)\n"
            "  --needle TEXT      niah: another needle; needs --question and --answer\n"
            "  --question TEXT    niah: the question about it\n"
            "  --answer LIST      niah: comma-separated keywords; the answer scores when it holds all\n"
            "                     (case-insensitive); each must occur in the needle\n"
            "  --answer-prefix T  niah: text the answer starts with, after the chat template (default\n"
            "                     none, as the original test; KVCache-Factory uses \"%s\")\n"
            "  --fidelity K       graded fidelity against the reference method per result (default 16,\n"
            "                     0 = off): the teacher-forced NLL of the reference answer, and on the\n"
            "                     first K steps of the reference's greedy answer the mean KL(reference ||\n"
            "                     method), top-1 agreement and per-layer attention-output error. Costs per\n"
            "                     case K reference steps, per result two more compressions and K + answer\n"
            "                     steps\n"
            "  --repeat N         run each method N times and keep the median compression and decode\n"
            "                     times, with their spread (default 1; the shared prefill runs once)\n"
            "  --batch 1|0        1 (default): a case's method/budget pairs generate together, each\n"
            "                     step one batched forward pass that reads each weight once for all\n"
            "                     (the same results; decode times are the batch's); 0: one at a time, for\n"
            "                     per-method latency (so is --repeat N > 1, and the CUDA backend)\n"
            "  --qa-data DIR      ruler qa_1, qa_2: DIR/squad.json (SQuAD 2.0 dev, dev-v2.0.json) and\n"
            "                     DIR/hotpotqa.json (HotpotQA dev distractor, hotpot_dev_distractor_v1.json),\n"
            "                     which you download; sample i asks question i\n"
            "  --print-prompts N  write the exact text, token count and SHA-256 of the first N cases'\n"
            "                     prompts to stdout and stop (no run; the results file keeps each\n"
            "                     case's prompt SHA-256 and token count)\n"
            "  --jobs N           run N processes, each taking every N-th case (default 1)\n"
            "\n"
            "With --fidelity 0 and --repeat 1 the prefill streams: every method ingests each layer\n"
            "as it is computed and the layer is dropped; otherwise every layer is kept for the case.\n"
            "%s%s%s",
            model_default_path(), NIAH_ANSWER_PREFIX, *keep ? "Methods that read the surprisal keep every layer until the last one gives it: " : "",
            keep, *keep ? ".\n" : "");
}


/* 1: a case's pairs generate together (mc_run_pairs); not for --repeat > 1 (per-method
 * times) nor on the device (no batched decode there). */
static int rm_batched(const rm_opts *o, const char *backend) {
    return o->batch && o->repeat <= 1 && strcmp(backend, "cuda");
}

/* 1: the prefill streams layer by layer into the methods (model_prefill_stream); 0: it is
 * kept whole, because it is ingested again (--repeat, the fidelity metrics) or the test hook
 * KVBENCH_TEST_KEEP_PREFILL=1 asks (tests compare the two). Recorded in the run's config. */
static int rm_streams(const rm_opts *o) {
    const char *keep = getenv("KVBENCH_TEST_KEEP_PREFILL");
    return o->fidelity <= 0 && o->repeat <= 1 && !(keep && *keep == '1');
}

/* ---------------------------------------------------------------- parsing */

static int add_method(const char *flag, const char *s, void *ctx) {
    rm_opts *o = ctx;
    return run_add_method(flag, s, o->methods, &o->n_methods, MAX_LIST);
}

static int add_budget(const char *flag, const char *s, void *ctx) {
    rm_opts *o = ctx;
    return run_add_budget(flag, s, o->budgets, &o->n_budgets, MAX_LIST);
}

static int add_ctx(const char *flag, const char *s, void *ctx) {
    rm_opts *o = ctx;
    int v = 0;
    if (run_parse_int(flag, s, 64, 1 << 24, &v)) return -1;
    for (int i = 0; i < o->n_ctx; i++)
        if (o->ctxs[i] == v) return 0;
    if (o->n_ctx == MAX_LIST) return run_fail("%s: more than %d values", flag, MAX_LIST);
    o->ctxs[o->n_ctx++] = v;
    return 0;
}

static int add_depth(const char *flag, const char *s, void *ctx) {
    rm_opts *o = ctx;
    double v = 0;
    if (run_parse_double(s, &v) || v < 0 || v > 100)
        return run_fail("%s '%s': a depth is a percentage of the context, in [0,100]", flag, s);
    for (int i = 0; i < o->n_depths; i++)
        if (o->depths[i] == v) return 0;
    if (o->n_depths == MAX_LIST) return run_fail("%s: more than %d depths", flag, MAX_LIST);
    o->depths[o->n_depths++] = v;
    return 0;
}


/* The model run's own options (run_parse takes the shared ones): 1, 0 or -1. niah_only
 * remembers the last niah-only option given, checked once the workload is known. */
typedef struct {
    rm_opts *o;
    const char *niah_only;
} model_ctx;

static int model_flag(void *ctx, const char *flag, const char *val) {
    model_ctx *mc = ctx;
    rm_opts *o = mc->o;
    if (!strcmp(flag, "--question-after")) o->wl.question_after = 1;
    else if (!strcmp(flag, "--model")) o->model_path = val;
    else if (!strcmp(flag, "--activations")) return run_parse_activations(flag, val, &o->q8_act) ? -1 : 1;
    else if (!strcmp(flag, "--tasks")) o->wl.tasks = val;
    else if (!strcmp(flag, "--haystack")) o->wl.haystack = val;
    else if (!strcmp(flag, "--qa-data")) o->wl.qa_data = val;
    else if (!strcmp(flag, "--shots-file")) o->wl.shots_file = val;
    else if (!strcmp(flag, "--shots")) return run_parse_int(flag, val, 0, 1000, &o->wl.shots) ? -1 : 1;
    else if (!strcmp(flag, "--print-prompts")) return run_parse_int(flag, val, 1, 1 << 30, &o->print_prompts) ? -1 : 1;
    else if (!strcmp(flag, "--limit")) return run_parse_int(flag, val, 1, 1 << 30, &o->wl.limit) ? -1 : 1;
    else if (!strcmp(flag, "--max-new")) return run_parse_int(flag, val, 1, 1 << 20, &o->wl.max_new) ? -1 : 1;
    else if (!strcmp(flag, "--fidelity")) return run_parse_int(flag, val, 0, 4096, &o->fidelity) ? -1 : 1;
    else if (!strcmp(flag, "--repeat")) return run_parse_int(flag, val, 1, 1000, &o->repeat) ? -1 : 1;
    else if (!strcmp(flag, "--batch")) return run_parse_batch(flag, val, &o->batch) ? -1 : 1;
    else if (!strcmp(flag, "--jobs")) return run_parse_int(flag, val, 1, MAX_JOBS, &o->jobs) ? -1 : 1;
    else if (!strcmp(flag, "--job-index")) return run_parse_int(flag, val, 0, MAX_JOBS - 1, &o->job_index) ? -1 : 1;
    else if (!strcmp(flag, "--samples")) {
        mc->niah_only = "--samples";
        return run_parse_int(flag, val, 1, NIAH_MAX_SAMPLES, &o->wl.samples) ? -1 : 1;
    } else if (!strcmp(flag, "--needles")) {
        mc->niah_only = "--needles";
        return run_parse_int(flag, val, 1, NIAH_MAX_NEEDLES, &o->wl.needles) ? -1 : 1;
    } else if (!strcmp(flag, "--needle")) o->wl.needle = val, mc->niah_only = "--needle";
    else if (!strcmp(flag, "--question")) o->wl.question = val, mc->niah_only = "--question";
    else if (!strcmp(flag, "--answer")) o->wl.answers = val, mc->niah_only = "--answer";
    else if (!strcmp(flag, "--answer-prefix")) o->wl.answer_prefix = val, mc->niah_only = "--answer-prefix";
    else return 0;
    return 1;
}

/* 0 ok, -1 error printed. */
static int parse_opts(const run_common *c, const run_given *own, int n_own, rm_opts *o) {
    memset(o, 0, sizeof *o);
    o->model_path = model_default_path();
    o->jobs = 1;
    o->job_index = -1;
    o->wl.shots = -1;
    o->fidelity = 16;
    o->repeat = 1;
    o->batch = 1;
    /* An unknown workload is the first thing to report, before options it lacks. */
    char err[1024];
    if (c->workload && mw_parse(c->workload, &o->wl, err, sizeof err)) return run_fail("%s", err);
    model_ctx mc = {o, NULL};
    if (run_apply_own(own, n_own, model_flag, &mc)) return -1;
    const char *methods = c->methods, *budgets = c->budgets, *ctxs = c->ctxs, *depths = c->depths, *params = c->params,
               *niah_only = mc.niah_only;
    int split_given = c->split_given;
    o->workload = c->workload, o->db_path = c->db_path, o->backend = c->backend, o->quiet = c->quiet;
    o->kv_type = c->kv_type, o->decode_rule = c->decode_rule, o->threads = c->threads, o->shard = c->shard;
    o->wl.seed = c->seed_given ? c->seed : 42, o->wl.split = c->split;
    if (!o->workload) return run_fail("--workload is required with --model (niah, ruler, longbench:DIR, ...)");
    if (mw_parse(o->workload, &o->wl, err, sizeof err)) return run_fail("%s", err);
    if ((!o->db_path || !*o->db_path) && !o->print_prompts) return run_fail("--db FILE is required (the results file to write)");
    if (!*o->model_path) return run_fail("--model: empty path");
    if (o->job_index >= o->jobs) return run_fail("--job-index %d: must be below --jobs %d", o->job_index, o->jobs);
    if (run_each_item("--methods", methods, add_method, o) || run_each_item("--budget", budgets, add_budget, o)) return -1;
    if (mparams_parse(&o->params, params, err, sizeof err)) return run_fail("%s", err);
    if (o->n_methods == 0) return run_fail("--methods: no methods are built into this kvbench");
    if (ctxs) {
        if (run_each_item("--ctx", ctxs, add_ctx, o)) return -1;
        o->ctx_given = 1;
        if (!mw_ctx_is_length(o->wl.kind) && o->n_ctx != 1)
            return run_fail("--ctx: %s takes one value, the prompt budget in tokens", o->wl.name);
    }
    if (depths) {
        if (o->wl.kind != MW_NIAH) return run_fail("--depths applies to niah only (%s places its own needles)", o->wl.name);
        if (run_each_item("--depths", depths, add_depth, o)) return -1;
        o->depths_given = 1;
    } else {
        for (int i = 0; i <= 10; i++) o->depths[o->n_depths++] = 10.0 * i;
    }
    if (o->wl.tasks && o->wl.kind != MW_LONGBENCH && o->wl.kind != MW_INFINITEBENCH)
        return run_fail("--tasks applies to longbench and infinitebench (ruler takes ruler:TASK,..)");
    if (mw_tasks_check(&o->wl, err, sizeof err)) return run_fail("%s", err);
    if ((o->wl.shots >= 0 || o->wl.shots_file) && o->wl.kind != MW_GSM8K) return run_fail("--shots applies to gsm8k only");
    if (o->wl.haystack && o->wl.kind != MW_NIAH && o->wl.kind != MW_RULER)
        return run_fail("--haystack applies to niah and ruler only");
    if (split_given && o->wl.kind != MW_NIAH && o->wl.kind != MW_RULER)
        return run_fail("--split applies to the generated workloads (niah, ruler, synthetic-*), not %s", o->wl.name);
    if (niah_only && o->wl.kind != MW_NIAH) return run_fail("%s applies to niah only", niah_only);
    if (o->wl.qa_data && o->wl.kind != MW_RULER) return run_fail("--qa-data applies to ruler only (its qa_1 and qa_2)");
    if (o->wl.kind == MW_RULER && mw_qa_check(&o->wl, err, sizeof err)) return run_fail("%s", err);
    o->wl.log_notes = o->job_index < 0 && !o->quiet;
    if (o->wl.kind == MW_NIAH) {
        if (o->wl.needle && (!o->wl.question || !o->wl.answers))
            return run_fail("--needle needs --question (what to ask) and --answer (the keywords that score)");
        if (!o->wl.needle && (o->wl.question || o->wl.answers))
            return run_fail("--question and --answer go with --needle (the classic needle has its own)");
        if (o->wl.needle && !*o->wl.needle) return run_fail("--needle: empty text");
        if (o->wl.question && !*o->wl.question) return run_fail("--question: empty text");
        if (mw_niah_check(&o->wl, err, sizeof err)) return run_fail("%s", err);
    }
    for (int i = 0; i < o->n_methods; i++) {
        int once = o->methods[i]->keeps_all;   /* the reference: one budget tells all */
        for (int b = 0; b < (once ? 1 : o->n_budgets); b++) {
            o->pair_m[o->n_pairs] = o->methods[i];
            o->pair_b[o->n_pairs++] = once ? 1.0 : o->budgets[b];
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- small helpers */

/* A JSON string literal (control characters escaped). */
static size_t json_str(char *buf, size_t cap, size_t n, const char *s) {
#define PUTC(c) (n + 1 < cap ? (buf[n] = (c), buf[n + 1] = 0) : 0, n++)
    PUTC('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            PUTC('\\');
            PUTC((char)c);
        } else if (c < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            for (char *e = esc; *e; e++) PUTC(*e);
        } else {
            PUTC((char)c);
        }
    }
    PUTC('"');
#undef PUTC
    return n;
}

/* ---------------------------------------------------------------- the cases */

typedef struct {
    tc_list list;
    int32_t **ids;             /* [n] */
    int *n_tok, *n_ctx_part, *max_new;
    char **key;                /* case_key: "task/id" */
    char (*sha)[65];           /* SHA-256 hex of each prompt's text */
    double *cost;              /* relative prefill cost, for the ETA and the shards */
} case_set;

static void cases_free(case_set *cs) {
    for (int i = 0; i < cs->list.n; i++) {
        if (cs->ids) free(cs->ids[i]);
        if (cs->key) free(cs->key[i]);
    }
    free(cs->ids), free(cs->n_tok), free(cs->n_ctx_part), free(cs->max_new), free(cs->key), free(cs->cost), free(cs->sha);
    tc_list_free(&cs->list);
    memset(cs, 0, sizeof *cs);
}

/* Tokenizes every case and checks that prompt + generation fit the model: the error
 * comes before any prefill. */
static int cases_prepare(case_set *cs, const rm_opts *o, const kv_model *model) {
    const kv_model_config *cf = model_config(model);
    const kv_tokenizer *tok = model_tokenizer(model);
    int n = cs->list.n;
    cs->ids = calloc((size_t)n, sizeof *cs->ids);
    cs->n_tok = calloc((size_t)n, sizeof *cs->n_tok);
    cs->n_ctx_part = calloc((size_t)n, sizeof *cs->n_ctx_part);
    cs->max_new = calloc((size_t)n, sizeof *cs->max_new);
    cs->key = calloc((size_t)n, sizeof *cs->key);
    cs->cost = calloc((size_t)n, sizeof *cs->cost);
    cs->sha = calloc((size_t)n, sizeof *cs->sha);
    if (!cs->ids || !cs->n_tok || !cs->n_ctx_part || !cs->max_new || !cs->key || !cs->cost || !cs->sha)
        return run_fail("out of memory for %d cases", n);
    for (int i = 0; i < n; i++) {
        tc_case *c = &cs->list.v[i];
        if (tc_tokenize(tok, c, &cs->ids[i], &cs->n_tok[i], &cs->n_ctx_part[i]))
            return run_fail("case %s: out of memory tokenizing the prompt", c->id);
        int want = c->max_new_tokens > 0 ? c->max_new_tokens : 64;
        if (o->wl.max_new > 0 && o->wl.max_new < want) want = o->wl.max_new;
        int nt = cs->n_tok[i];
        if (nt + want > cf->n_ctx_train)
            return run_fail("case %s/%s: %d prompt tokens + %d new tokens are beyond the model's context of %d "
                        "tokens%s (%s)%s", c->task, c->id, nt, want, cf->n_ctx_train, model_ctx_note(cf), o->model_path,
                        o->wl.kind == MW_GSM8K ? "; use fewer --shots" : mw_ctx_is_length(o->wl.kind) ? "" : "; lower --ctx");
        if (o->wl.question_after && cs->n_ctx_part[i] < 1)
            return run_fail("case %s/%s: --question-after needs a context before the question", c->task, c->id);
        cs->max_new[i] = want;
        sha256_hex(c->prompt, strlen(c->prompt), cs->sha[i]);
        size_t klen = strlen(c->task) + strlen(c->id) + 2;
        cs->key[i] = malloc(klen);
        if (!cs->key[i]) return run_fail("out of memory");
        snprintf(cs->key[i], klen, "%s/%s", c->task, c->id);
        double pf = o->wl.question_after ? cs->n_ctx_part[i] : nt;
        cs->cost[i] = pf * (1 + pf / 4096.0);   /* GEMMs linear, attention quadratic */
    }
    return 0;
}

/* --print-prompts: each prompt between a header line and an end line; the header gives
 * the byte count, so the text in between is exact (and `sha256sum` of it is the hash). */
static void print_prompts(const case_set *cs, int n) {
    if (n > cs->list.n) n = cs->list.n;
    for (int i = 0; i < n; i++) {
        const char *p = cs->list.v[i].prompt;
        size_t len = strlen(p);
        printf("=== prompt %d/%d: %s, %d tokens, %zu bytes, sha256 %s ===\n", i + 1, n, cs->key[i], cs->n_tok[i], len,
               cs->sha[i]);
        fwrite(p, 1, len, stdout);
        printf("\n=== end of prompt %d ===\n", i + 1);
    }
}

/* ---------------------------------------------------------------- run identity */

static void model_ident(const char *path, const kv_model *model, char *buf, size_t n) {
    if (!strncmp(path, "random:", 7)) {   /* random weights: the spec is the identity */
        snprintf(buf, n, "%s", path);
        return;
    }
    struct stat st;
    path = model_gguf(model)->path;   /* the file a short model name stands for (model_resolve_name) */
    /* (%.255s below: a file name is at most NAME_MAX bytes) */
    char *copy = strdup(path);
    const char *base = copy ? basename(copy) : path;
    /* a Hugging Face directory: its size says nothing, the hash of its files does */
    const gguf_kv *h = gguf_find(model_gguf(model), "kvbench.hf.content_hash");
    uint64_t hash;
    if (h && h->type == GGUF_U64) {
        memcpy(&hash, h->data, 8);
        snprintf(buf, n, "%.255s:hf-%016llx", base, (unsigned long long)hash);
    } else snprintf(buf, n, "%.255s:%lld", base, stat(path, &st) == 0 ? (long long)st.st_size : -1LL);
    free(copy);
}

/* The ids generation stops at, as the tokenizer reports them. */
static int stop_ids(const kv_tokenizer *tok, int *ids, int cap) {
    int n = 0;
    for (int id = 0; id < tok_vocab(tok) && n < cap; id++)
        if (tok_is_stop(tok, id)) ids[n++] = id;
    return n;
}

/* 0, or -1 when the key does not fit. */
static int run_key(const rm_opts *o, const kv_model *model, const char *ident, const char *backend, const char *code,
                   char *buf, size_t n) {
    char mid[512];
    model_ident(o->model_path, model, mid, sizeof mid);
    char dflt[4096], mp[2048];
    if (run_ident_methods(NULL, dflt, sizeof dflt)) return -1;
    mparams_canon(&o->params, mp, sizeof mp);
    int k = snprintf(buf, n,
             "model/v2;workload=%s;model=%s;%s;seed=%llu;split=%s;max_new=%d;question_after=%d;truncate=%d;"
             "template=%s;kv_type=%s;elem_bytes=%d;activations=%s;backend=%s;decode_rule=%s;code=%s;methods=%s%s%s",
             o->wl.name, mid, ident, (unsigned long long)o->wl.seed, wl_split_name(o->wl.split), o->wl.max_new,
             o->wl.question_after, mw_ctx_is_length(o->wl.kind) ? 0 : o->wl.truncate,
             tc_template_name(model_tokenizer(model)), kb_kvtype_name(o->kv_type), kb_kvtype_bytes(o->kv_type), o->q8_act ? "q8" : "f32", backend, kv_decode_name(o->decode_rule), code, dflt,
             *mp ? ";params=" : "", mp);
    if (k < 0 || (size_t)k >= n) return -1;
    for (int i = 0; i < o->n_trained; i++) {
        k += snprintf(buf + k, n - (size_t)k, ";%s_params_sha256=%s", o->trained[i].method, o->trained[i].hex);
        if (k < 0 || (size_t)k >= n) return -1;
    }
    if (o->wl.kind == MW_NIAH) {
        char ni[256];
        mw_niah_ident(&o->wl, ni, sizeof ni);
        k += snprintf(buf + k, n - (size_t)k, ";niah=%s", ni);
    }
    return k >= 0 && (size_t)k < n ? 0 : -1;
}

static void config_json(const rm_opts *o, const kv_model *model, const case_set *cs, const char *ident,
                        const char *backend, char *buf, size_t cap) {
    const kv_model_config *cf = model_config(model);
    const kv_tokenizer *tok = model_tokenizer(model);
    size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__))
#define STR(s) (n = json_str(buf, cap, n, (s)))
    PUT("{\"workload\":"), STR(o->workload);
    PUT(",\"model\":"), STR(o->model_path);
    PUT(",\"model_name\":"), STR(cf->name);
    PUT(",\"arch\":"), STR(cf->arch);
    PUT(",\"n_ctx_train\":%d,\"inputs\":", cf->n_ctx_train), STR(ident);
    PUT(",\"template\":"), STR(tc_template_name(tok));
    PUT(",\"templates_used\":[");
    int first = 1;
    for (int i = 0; i < cs->list.n; i++) {   /* distinct template names of the cases */
        const char *t = cs->list.v[i].settings.template_name;
        int seen = 0;
        for (int k = 0; k < i && !seen; k++) seen = !strcmp(cs->list.v[k].settings.template_name, t);
        if (seen) continue;
        PUT("%s", first ? "" : ","), STR(t);
        first = 0;
    }
    int ids[16], ns = stop_ids(tok, ids, 16);
    PUT("],\"add_bos\":%d,\"bos\":%d,\"eos\":%d,\"stop_ids\":[", tok_add_bos(tok), tok_bos(tok), tok_eos(tok));
    for (int i = 0; i < ns; i++) PUT("%s%d", i ? "," : "", ids[i]);
    PUT("],\"stop\":\"greedy until a stop id, a newline for tasks that stop there, or max_new\"");
    PUT(",\"question_after\":%d,\"question_mode\":", o->wl.question_after);
    STR(o->wl.question_after ? "context prefilled and compressed, question tokens then decoded into the cache"
                             : "question-aware: the whole prompt prefilled and compressed");
    PUT(",\"max_new\":%d,\"seed\":%llu,\"limit\":%d,\"truncate\":%d,\"shots\":%d", o->wl.max_new,
        (unsigned long long)o->wl.seed, o->wl.limit, o->wl.truncate, o->wl.shots);
    PUT(",\"kv_type\":\"%s\",\"elem_bytes\":%d,\"activations\":\"%s\",\"backend\":", kb_kvtype_name(o->kv_type),
        kb_kvtype_bytes(o->kv_type), o->q8_act ? "q8" : "f32");
    STR(backend);
    PUT(",\"decode_rule\":"), STR(kv_decode_name(o->decode_rule));
    PUT(",\"prefill\":\"%s\"", rm_streams(o) ? "streamed" : "kept");
    PUT(",\"decode_pairs\":\"%s\"", rm_batched(o, backend) ? "batched" : "one at a time");
    /* the prefill attention's arithmetic: on the device, KB_PREFILL_TC picks the path */
    const char *pa = "f32";
#ifdef KB_CUDA
    if (!strcmp(backend, "cuda") && kb_cuda_prefill_tc()) pa = "bf16 tensor cores, f32 accumulation";
#endif
    PUT(",\"prefill_attention\":"), STR(pa);
    PUT(",\"threads\":%d,\"jobs\":%d,\"fullkv_budget\":1,\"methods\":[", kb_threads(), o->jobs);
    for (int i = 0; i < o->n_methods; i++) PUT("%s", i ? "," : ""), STR(o->methods[i]->name);
    char mp[4096];
    mparams_canon(&o->params, mp, sizeof mp);
    PUT("],\"params\":"), STR(mp);
    run_ident_methods(&o->params, mp, sizeof mp);
    PUT(",\"method_params\":"), STR(mp);
    for (int i = 0; i < o->n_trained; i++) PUT(",\"%s_params_sha256\":", o->trained[i].method), STR(o->trained[i].hex);
    PUT(",\"split\":"), STR(wl_split_name(o->wl.split));
    PUT(",\"budgets\":[");
    for (int i = 0; i < o->n_budgets; i++) PUT("%s%.10g", i ? "," : "", o->budgets[i]);
    PUT("],\"ctx\":[");
    for (int i = 0; i < o->n_ctx; i++) PUT("%s%d", i ? "," : "", o->ctxs[i]);
    PUT("],\"depths_pct\":[");
    for (int i = 0; o->wl.kind == MW_NIAH && i < o->n_depths; i++) PUT("%s%.10g", i ? "," : "", o->depths[i]);
    PUT("]");
    if (o->wl.kind == MW_RULER) PUT(",\"qa_data\":"), STR(o->wl.qa_data ? o->wl.qa_data : "");
    if (o->wl.kind == MW_NIAH) {
        PUT(",\"niah\":{\"needle\":"), STR(o->wl.needle ? o->wl.needle : NIAH_NEEDLE);
        PUT(",\"question\":"), STR(o->wl.question ? o->wl.question : NIAH_QUESTION);
        PUT(",\"answer_keywords\":"), STR(o->wl.answers ? o->wl.answers : NIAH_ANSWERS);
        PUT(",\"answer_prefix\":"), STR(o->wl.answer_prefix ? o->wl.answer_prefix : "");
        PUT(",\"needles\":%d,\"samples\":%d}", o->wl.needles > 0 ? o->wl.needles : 1, o->wl.samples > 0 ? o->wl.samples : 1);
    }
    PUT("}");
#undef PUT
#undef STR
}

/* ---------------------------------------------------------------- the summary */

static void print_summary(kv_db *db, int64_t run_id, int decode_rule) {
    sqlite3_stmt *st = kvq_run_summary(kvdb_sqlite(db), run_id);
    if (!st) return;
    typedef struct {
        char method[64];
        double budget, score, peak, pf, comp, ms, steady, rss, nll, kl;
        int n, ok, order;
    } row;
    row rows[MAX_PAIRS];
    int nr = 0;
    while (sqlite3_step(st) == SQLITE_ROW && nr < MAX_PAIRS) {
        row *r = &rows[nr++];
        snprintf(r->method, sizeof r->method, "%s", (const char *)sqlite3_column_text(st, 0));
        r->budget = sqlite3_column_double(st, 1);
        r->n = sqlite3_column_int(st, 2);
        r->ok = sqlite3_column_int(st, 3);
        double *v[] = {&r->score, &r->peak, &r->pf, &r->comp, &r->ms, &r->steady, &r->rss, &r->nll, &r->kl};
        for (int k = 0; k < 9; k++)
            *v[k] = sqlite3_column_type(st, 4 + k) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 4 + k);
        const kv_method *m = kv_method_find(r->method);
        r->order = kv_method_count();
        for (int k = 0; m && k < kv_method_count(); k++)
            if (kv_method_at(k) == m) r->order = k;
    }
    sqlite3_finalize(st);
    for (int i = 1; i < nr; i++)   /* registry order, then budget */
        for (int j = i; j > 0 && (rows[j].order < rows[j - 1].order ||
                                  (rows[j].order == rows[j - 1].order && rows[j].budget < rows[j - 1].budget));
             j--) {
            row t = rows[j];
            rows[j] = rows[j - 1];
            rows[j - 1] = t;
        }
    printf("\ndecode rule: %s. fast KV decode: the most fast-tier bytes from compression through decode;\n"
           "fast KV peak (the headline in reports): with the prefill's transient full layer; RSS: the\n"
           "process's measured peak over the method's run (weights and what the case still holds included;\n"
           "the whole case's peak, prefill included, is cases.rss_peak).\n",
           kv_decode_name(decode_rule));
    printf("\n%-14s %-7s %7s %7s %7s %7s %14s %12s %10s %10s %11s %12s\n", "method", "budget", "cases", "score",
           "nll", "kl", "fast KV decode", "fast KV peak", "RSS", "prefill", "compress", "decode");
    for (int i = 0; i < nr; i++) {
        row *r = &rows[i];
        char b[32], peak[32], cases[32], pf[32], comp[32], ms[32], steady[32], rss[32];
        snprintf(b, sizeof b, "%.10g", r->budget);
        snprintf(cases, sizeof cases, r->ok == r->n ? "%d" : "%d/%d", r->ok, r->n);
        if (!r->ok) {
            printf("%-14s %-7s %7s %6.1f%% %7s %7s %12s\n", r->method, b, cases, 0.0, "-", "-", "infeasible/error");
            continue;
        }
        cl_fmt_bytes(peak, sizeof peak, r->peak);
        if (isnan(r->steady)) snprintf(steady, sizeof steady, "-");
        else cl_fmt_bytes(steady, sizeof steady, r->steady);
        if (isnan(r->rss)) snprintf(rss, sizeof rss, "-");
        else cl_fmt_bytes(rss, sizeof rss, r->rss);
        snprintf(pf, sizeof pf, "%.2f s", r->pf);
        snprintf(comp, sizeof comp, "%.3f s", r->comp);
        if (isnan(r->ms)) snprintf(ms, sizeof ms, "-");
        else snprintf(ms, sizeof ms, "%.1f ms/tok", r->ms);
        char nll[16] = "-", kl[16] = "-";
        if (!isnan(r->nll)) snprintf(nll, sizeof nll, "%.3f", r->nll);
        if (!isnan(r->kl)) snprintf(kl, sizeof kl, "%.3f", r->kl);
        printf("%-14s %-7s %7s %6.1f%% %7s %7s %14s %12s %10s %10s %11s %12s\n", r->method, b, cases, 100 * r->score, nll,
               kl, steady, peak, rss, pf, comp, ms);
    }
}

static double result_cost(int n_prompt, int max_new) { return 1.0 + n_prompt / 2048.0 + max_new / 32.0; }

#ifdef KB_CUDA
/* The device measurements of a case's shared prefill (CUDA backend): the allocator's peak
 * (peak), cudaMemGetInfo's used bytes at the prefill's peak or now (the larger), the
 * driver's sampled peak (drv_peak; 0: no sample) and the prefill's time by CUDA events. */
static void record_gpu(kv_db *db, int64_t case_id, const kv_model *model, size_t peak, size_t drv_peak,
                       const char *prefix, const char *key, int quiet) {
    size_t fr = 0, tot = 0;
    cuda_model_info info;
    int have = cuda_model_info_get(model, &info) == 0, mem = kb_cuda_mem_stats(NULL, NULL, &fr, &tot) == 0;
    size_t used = mem ? tot - fr : 0;
    if (have && info.used_bytes > used) used = info.used_bytes;
    if (kvdb_case_gpu(db, case_id, mem ? (int64_t)peak : -1, mem || have ? (int64_t)used : -1,
                      have ? info.prefill_ms : NAN))
        fprintf(stderr, "%skvbench run: device measurements not recorded: %s\n", prefix, kvdb_errmsg(db));
    if (kvdb_case_gpu_driver(db, case_id, (int64_t)drv_peak))
        fprintf(stderr, "%skvbench run: device driver peak not recorded: %s\n", prefix, kvdb_errmsg(db));
    if (!quiet) {
        char pk[32], us[32];
        cl_fmt_bytes(pk, sizeof pk, (double)peak);
        cl_fmt_bytes(us, sizeof us, (double)used);
        char dp[32];
        cl_fmt_bytes(dp, sizeof dp, (double)drv_peak);
        fprintf(stderr, "%s[case] %s: device prefill %.1f ms (CUDA events), allocator peak %s, device in use %s, "
                "driver peak %s (cudaMemGetInfo, sampled)\n", prefix, key, have ? info.prefill_ms : -1.0, pk, us, dp);
    }
}
#endif
/* ---------------------------------------------------------------- the case source */

typedef struct {
    rm_opts o;
    kv_model *model;
    case_set cs;
    cl_case *cases;
    char ident[1536];          /* the workload inputs' identity (mw_load) */
    char mid[512];             /* the model's identity (model_ident), for the run's row */
    const char *backend;       /* the backend really used: cuda, or cpu (also when cuda was asked for) */
    int gpu, gpu_loaded;       /* the CUDA engine runs the model; its weights are on the device */
} model_source;

/* A prepared case: the shared prefill, FullKV's fidelity reference, the results of the
 * last run_pairs call and what is recorded beside the case when it ends. */
typedef struct {
    mc_case mc;
    fid_ref ref;
    int have_ref;              /* ref was built: every result gets the fidelity metrics */
    mc_result *res;            /* [n_res] */
    int n_res;
    char label[320];
    const char *key;
    double load0;              /* the 1-minute load average at the case's start */
    int64_t case_rss;          /* the most of the prefill's and each result's peak RSS */
    size_t gpu_peak, gpu_drv;  /* the prefill's device peaks (CUDA) */
} model_case_run;

static void clear_results(model_case_run *mr) {
    for (int i = 0; i < mr->n_res; i++) mc_result_clear(&mr->res[i]);
    free(mr->res);
    mr->res = NULL, mr->n_res = 0;
}

static int model_run_row(void *self, int r, const provenance *prov, char *key, size_t key_len, char *json,
                         size_t json_len, kvdb_run *row) {
    (void)r;
    model_source *ms = self;
    const rm_opts *o = &ms->o;
    if (run_key(o, ms->model, ms->ident, ms->backend, prov->code, key, key_len))
        return run_fail("the run key is too long (too many --params)");
    config_json(o, ms->model, &ms->cs, ms->ident, ms->backend, json, json_len);
    model_ident(o->model_path, ms->model, ms->mid, sizeof ms->mid);
    *row = (kvdb_run){.run_key = key, .config_json = json, .workload = o->wl.name, .model = ms->mid,
                      .git_commit = prov->git_commit, .build_flags = KB_BUILD_FLAGS, .host = prov->host,
                      .cpu = prov->cpu, .backend = ms->backend, .seed = o->wl.seed};
    return 0;
}

static int model_prepare(void *self, int c, const char *label, const kv_method *const *methods, const double *budgets,
                         int n, void **prepared, kvdb_case *row) {
    model_source *ms = self;
    const rm_opts *o = &ms->o;
    case_set *cs = &ms->cs;
#ifdef KB_CUDA
    if (ms->gpu && !ms->gpu_loaded) {   /* the weights go to the device once, before (and outside) any case's time */
        char lerr[512];
        if (cuda_model_load(ms->model, lerr, sizeof lerr)) return run_fail("--backend cuda: %s", lerr);
        /* random weights are not read on the host again: free them (4.5 GB for
         * random:llama3-8b in Q4_0), room for the long prefills' K/V and the methods' stores */
        long long freed = cuda_model_drop_host_weights(ms->model);
        if (freed < 0) return run_fail("--backend cuda: the weights did not reach the device");
        if (freed > 0 && !o->quiet)
            fprintf(stderr, "kvbench run: %.1f GB of host weights freed after the upload (random model)\n", freed / 1e9);
        ms->gpu_loaded = 1;
    }
#endif
    model_case_run *mr = cl_xcalloc(1, sizeof *mr);
    const tc_case *tc = &cs->list.v[c];
    mr->key = cs->key[c];
    mr->mc = (mc_case){.model = ms->model, .tc = tc, .ids = cs->ids[c], .n = cs->n_tok[c],
                       .n_context = cs->n_ctx_part[c], .question_after = o->wl.question_after,
                       .max_new = cs->max_new[c], .params = &o->params, .decode_rule = o->decode_rule,
                       .kv_type = o->kv_type, .repeat = o->repeat, .one_at_a_time = !rm_batched(o, ms->backend)};
    mc_case *mc = &mr->mc;
    mc->n_pf = mc->question_after ? mc->n_context : mc->n;
    double load0[1] = {NAN};
    if (getloadavg(load0, 1) != 1) load0[0] = NAN;
    mr->load0 = load0[0];
    kv_needs needs = mc_union_needs(mc, methods, budgets, n);
    int want_surprisal = 0;   /* every position's logits only when a method of the case reads them */
    for (int i = 0; i < n; i++) want_surprisal |= methods[i]->needs_surprisal;
    model_set_prefill_surprisal(ms->model, want_surprisal);
    if (label) {
        snprintf(mr->label, sizeof mr->label, "%s", label);
        fprintf(stderr, "%s: prefill %d tokens%s%s...\n", label, mc->n_pf, needs.col_mass ? ", column mass" : "",
                needs.window ? ", window rows" : "");
        mc->progress = mr->label;
    }
    char err[512];
#ifdef KB_CUDA
    if (ms->gpu) kb_cuda_mem_reset_peak();
#endif
    int rss_rc = rss_reset_peak();
    if (rm_streams(o) ? mc_prefill_streamed(mc, &needs, methods, budgets, n, err, sizeof err)
                      : mc_prefill(mc, &needs, err, sizeof err)) {
        run_fail("case %s: prefill: %s", mr->key, err);
        mc_free(mc);
        free(mr);
        return -1;
    }
    mr->case_rss = rss_peak_since(rss_rc);
#ifdef KB_CUDA
    /* the prefill's peaks, before the methods reset them */
    if (ms->gpu) kb_cuda_mem_stats(NULL, &mr->gpu_peak, NULL, NULL);
    if (ms->gpu && kb_cuda_mem_sample(&mr->gpu_drv)) mr->gpu_drv = 0;   /* no sample: stored NULL */
#endif
    *row = (kvdb_case){.case_key = mr->key, .workload = o->wl.name, .variant = tc->task, .seed = o->wl.seed,
                       .ctx = tc->length > 0 ? tc->length : mc->n, .depth = tc->depth >= 0 ? tc->depth / 100.0 : NAN,
                       .prefill_s = mc->pf.seconds, .prompt_sha256 = cs->sha[c], .prompt_tokens = cs->n_tok[c]};
    *prepared = mr;
    return 0;
}

/* Recorded with the case's row at once, not after the last method: a run cut during the
 * methods keeps them. Then FullKV's reference for the fidelity metrics (without it the
 * results just lack them). */
static void model_recorded(void *self, void *prepared, kv_db *db, int64_t case_id) {
    model_source *ms = self;
    model_case_run *mr = prepared;
#ifdef KB_CUDA
    if (ms->gpu) {
        record_gpu(db, case_id, ms->model, mr->gpu_peak, mr->gpu_drv, "", mr->key, ms->o.quiet);
        if (!ms->o.quiet)
            fprintf(stderr, "[device] ctx %d prefill: allocator peak %zu B, driver peak %zu B\n",
                    mr->mc.tc->length > 0 ? mr->mc.tc->length : mr->mc.n, mr->gpu_peak, mr->gpu_drv);
    }
#endif
    if (kvdb_case_rss(db, case_id, mr->case_rss))
        fprintf(stderr, "kvbench run: peak RSS not recorded: %s\n", kvdb_errmsg(db));
    if (ms->o.fidelity > 0) {
        char err[512];
        if (fid_ref_build(&mr->mc, ms->o.fidelity, &mr->ref, err, sizeof err))
            fprintf(stderr, "kvbench run: case %s: %s\n", mr->key, err);
        else mr->have_ref = 1;
    }
}

/* Batched (source.batched): every pair of the call generates together (mc_run_pairs); else
 * the loop hands one pair a call, with its own device peak. */
static void model_run_pairs(void *self, void *prepared, const kv_method *const *methods, const double *budgets, int n,
                            const kvdb_result **results) {
    model_source *ms = self;
    model_case_run *mr = prepared;
    clear_results(mr);
    mr->res = cl_xcalloc((size_t)n, sizeof *mr->res);
    mr->n_res = n;
    if (!mr->mc.one_at_a_time) {
        mc_run_pairs(&mr->mc, methods, budgets, n, mr->res);
        /* the fidelity passes of pairs that generated together go together too (the ok ones) */
        if (mr->have_ref && mr->res[0].batched) fid_measure_pairs(&mr->mc, methods, budgets, &mr->ref, mr->res, n);
        else
            for (int i = 0; mr->have_ref && i < n; i++) fid_measure(&mr->mc, methods[i], budgets[i], &mr->ref, &mr->res[i]);
    } else
        for (int i = 0; i < n; i++) {
#ifdef KB_CUDA
            if (ms->gpu) kb_cuda_mem_reset_peak();   /* this method's peak: weights + its KV + decode */
#endif
            mc_run_method(&mr->mc, methods[i], budgets[i], &mr->res[i]);
            if (mr->have_ref) fid_measure(&mr->mc, methods[i], budgets[i], &mr->ref, &mr->res[i]);
#ifdef KB_CUDA
            size_t mpeak = 0, mdrv = 0;
            mc_result *res = &mr->res[i];
            if (ms->gpu && kb_cuda_mem_stats(NULL, &mpeak, NULL, NULL) == 0) res->r.gpu_peak_bytes = (int64_t)mpeak;
            /* the driver's view apart from the allocator's, both stored (and logged:
             * tests/gpu/paper_table.py reads this line) */
            int have_drv = ms->gpu && kb_cuda_mem_sample(&mdrv) == 0;
            if (have_drv) res->r.gpu_driver_peak_bytes = (int64_t)mdrv;
            if (have_drv && !ms->o.quiet)
                fprintf(stderr, "[device] ctx %d %s @ %g: allocator peak %zu B, driver peak %zu B\n",
                        mr->mc.tc->length > 0 ? mr->mc.tc->length : mr->mc.n, methods[i]->name, budgets[i], mpeak,
                        mdrv);
#endif
        }
    (void)ms;
    for (int i = 0; i < n; i++) {
        if (mr->res[i].r.rss_peak > mr->case_rss) mr->case_rss = mr->res[i].r.rss_peak;
        results[i] = &mr->res[i].r;
    }
}

/* What a result keeps beside its row: zoom events and notes, each in its own transaction
 * after the result (a kill -9 in between keeps the result without them). */
static void model_added(void *self, void *prepared, kv_db *db, int64_t case_id, int c, int i, const kvdb_result *r) {
    (void)self, (void)c;
    model_case_run *mr = prepared;
    const mc_result *res = &mr->res[i];
    if (res->n_zoom && kvdb_zoom_put(db, case_id, r->method, r->budget, res->zoom, res->n_zoom))
        fprintf(stderr, "kvbench run: zoom events not recorded: %s\n", kvdb_errmsg(db));
    if (res->chosen[0] && kvdb_note_put(db, case_id, r->method, r->budget, "params_used", res->chosen))
        fprintf(stderr, "kvbench run: params used not recorded: %s\n", kvdb_errmsg(db));
    char as[32];   /* batched: the method's own share of the decode steps (a timing) */
    snprintf(as, sizeof as, "%.6f", res->attend_s);
    if (res->batched && !strcmp(r->status, "ok") && kvdb_note_put(db, case_id, r->method, r->budget, "attend_s", as))
        fprintf(stderr, "kvbench run: attention time not recorded: %s\n", kvdb_errmsg(db));
}

static void model_release(void *self, void *prepared, kv_db *db, int64_t case_id, int finished) {
    (void)self;
    model_case_run *mr = prepared;
    clear_results(mr);
    fid_ref_free(&mr->ref);
    double load1[1] = {NAN};
    if (getloadavg(load1, 1) != 1) load1[0] = NAN;
    if (finished && case_id > 0 && kvdb_case_rss(db, case_id, mr->case_rss))
        fprintf(stderr, "kvbench run: peak RSS not recorded: %s\n", kvdb_errmsg(db));
    if (finished && case_id > 0 && kvdb_case_load(db, case_id, mr->load0, load1[0]))
        fprintf(stderr, "kvbench run: load average not recorded: %s\n", kvdb_errmsg(db));
    mc_free(&mr->mc);
    free(mr);
}

static void model_unload(void *self) {
    model_source *ms = self;
#ifdef KB_CUDA
    if (ms->model) cuda_model_release(ms->model);
#endif
    model_free(ms->model);
    ms->model = NULL;
}

static void model_summary(void *self, kv_db *db, const int64_t *run_ids) {
    const model_source *ms = self;
    print_summary(db, run_ids[0], ms->o.decode_rule);
}

/* ---------------------------------------------------------------- built from the options */

static int model_check_workload(const char *workload) {
    mw_spec wl;
    char err[1024];
    memset(&wl, 0, sizeof wl);
    if (workload && mw_parse(workload, &wl, err, sizeof err)) return run_fail("%s", err);
    return 0;
}

/* Lengths the model cannot hold are refused before anything is built: 0 or -1. */
static int fit_lengths(rm_opts *o, const kv_model_config *cf) {
    int rc = 0;
    if (mw_ctx_is_length(o->wl.kind)) {
        if (!o->ctx_given) {
            if (o->wl.kind == MW_NIAH) o->ctxs[0] = 1024, o->ctxs[1] = 2048, o->ctxs[2] = 4096, o->n_ctx = 3;
            else o->ctxs[0] = 4096, o->n_ctx = 1;
            for (int i = 0; i < o->n_ctx; i++)
                if (o->ctxs[i] > cf->n_ctx_train) o->ctxs[i] = cf->n_ctx_train;
        }
        for (int i = 0; i < o->n_ctx && !rc; i++)
            if (o->ctxs[i] > cf->n_ctx_train)
                rc = run_fail("--ctx %d is beyond the context of the model %s (%d tokens)%s", o->ctxs[i], o->model_path,
                              cf->n_ctx_train, model_ctx_note(cf));
        o->wl.ctxs = o->ctxs;
        o->wl.n_ctx = o->n_ctx;
        o->wl.depths = o->depths;
        o->wl.n_depths = o->n_depths;
    } else {
        int room = cf->n_ctx_train - mw_max_new(&o->wl) - 64;
        o->wl.truncate = o->ctx_given ? o->ctxs[0] : room;
        if (o->wl.truncate > room)
            rc = run_fail("--ctx %d: prompts of up to %d tokens + %d new tokens are beyond the context of the model %s "
                          "(%d tokens); use at most %d", o->wl.truncate, o->wl.truncate, mw_max_new(&o->wl),
                          o->model_path, cf->n_ctx_train, room);
        if (o->wl.truncate < 64) rc = run_fail("--ctx %d: too small a prompt budget", o->wl.truncate);
    }
    return rc;
}

static void model_close(cl_source *src) {
    model_source *ms = src->self;
    if (!ms) return;
    model_unload(ms);
    cases_free(&ms->cs);
    free(ms->cases);
    free(ms);
    src->self = NULL;
}

static int model_open(const run_common *c, const run_given *own, int n_own, int argc, char **argv, cl_source *src,
                      cl_grid *g) {
    model_source *ms = cl_xcalloc(1, sizeof *ms);
    *src = (cl_source){.name = "model", .self = ms};
    rm_opts *o = &ms->o;
    int exit_code = 2;   /* bad input until the inputs are loaded */
    if (parse_opts(c, own, n_own, o)) goto fail;
    /* cuda without a usable device (or a CPU build): one line, then the CPU; the run is
     * recorded with the backend it really used */
    if (run_kv_type_backend(&o->kv_type, o->backend)) goto fail;
    if (o->q8_act && !strcmp(o->backend, "cuda")) {
        run_fail("--activations q8 needs --backend cpu: the CUDA engine's mat-vecs read f32 activations");
        goto fail;
    }
    const char *why = NULL;
    ms->backend = "cpu";
    if (!strcmp(o->backend, "cuda") && kb_select("cuda", &why) == 0) ms->backend = "cuda";
    else if (kb_select("cpu", NULL) == 0 && !strcmp(o->backend, "cuda") && o->job_index < 0)
        fprintf(stderr, "kvbench run: --backend cuda: %s; running on the CPU\n", why ? why : "not available");
#ifdef KB_CUDA
    ms->gpu = cuda_model_selected();
#endif
    if (o->threads) kb_set_threads(o->threads);
    char err[1024];
    ms->model = model_load(o->model_path, err, sizeof err);
    if (!ms->model) {   /* a bad or unsupported file */
        run_fail("--model: %s", err);
        goto fail;
    }
    model_set_f32_activations(ms->model, !o->q8_act);
    const kv_model_config *cf = model_config(ms->model);
    {   /* every method accepts its parameters on this model, or nothing runs (and nothing is stored) */
        int n_chk = cf->n_ctx_train < 1024 ? cf->n_ctx_train : 1024;
        mc_case probe = {.model = ms->model, .n = n_chk, .n_pf = n_chk, .max_new = 32, .params = &o->params,
                         .kv_type = o->kv_type};
        kv_setup shape = mc_setup(&probe, o->methods[0], 0.5);
        if (run_check_methods(o->methods, o->n_methods, &o->params, &shape, err, sizeof err)) {
            run_fail("%s", err);
            goto fail;
        }
        o->n_trained = run_ident_trained(&o->params, &shape, o->trained, 8);
    }
    if (fit_lengths(o, cf)) goto fail;   /* a length the model cannot hold: bad input, nothing was built */
    exit_code = 1;
    if (mw_load(&o->wl, model_tokenizer(ms->model), &ms->cs.list, ms->ident, sizeof ms->ident, err, sizeof err)) {
        run_fail("%s", err);
        goto fail;
    }
    if (cases_prepare(&ms->cs, o, ms->model)) goto fail;
    if (o->print_prompts) {   /* show, then stop: nothing is run or written */
        print_prompts(&ms->cs, o->print_prompts);
        exit_code = 0;
        goto fail;
    }
    ms->cases = cl_xcalloc((size_t)ms->cs.list.n, sizeof *ms->cases);
    for (int i = 0; i < ms->cs.list.n; i++)
        ms->cases[i] = (cl_case){.key = ms->cs.key[i], .run = 0, .cost = ms->cs.cost[i],
                                 .pair_cost = result_cost(ms->cs.n_tok[i], ms->cs.max_new[i])};
    *src = (cl_source){.name = "model", .self = ms, .n_runs = 1, .cases = ms->cases, .n_cases = ms->cs.list.n,
                       .run_row = model_run_row, .batched = rm_batched(o, ms->backend), .prepare = model_prepare,
                       .recorded = model_recorded, .run_pairs = model_run_pairs, .added = model_added,
                       .release = model_release, .unload = model_unload, .summary = model_summary};
    *g = (cl_grid){.methods = o->pair_m, .budgets = o->pair_b, .n_pairs = o->n_pairs, .shard = o->shard,
                   .jobs = o->jobs, .job_index = o->job_index, .threads = o->threads, .argc = argc, .argv = argv,
                   .quiet = o->quiet};
    return RUN_READY;
fail:
    model_close(src);
    return exit_code;
}

static const char *const model_flags[] = {
    "--question-after", "--model", "--activations", "--tasks", "--haystack", "--qa-data", "--shots-file", "--shots",
    "--print-prompts", "--limit", "--max-new", "--fidelity", "--repeat", "--batch", "--jobs", "--job-index",
    "--samples", "--needles", "--needle", "--question", "--answer", "--answer-prefix", NULL};

const run_source_kind model_source_kind = {
    .name = "model",
    .flags = model_flags,
    .bare = (const char *const[]){"--question-after", NULL},
    .where = "text workloads (niah, ruler, ...)",
    .not_these = "a model run",
    .options = model_options,
    .check_workload = model_check_workload,
    .open = model_open,
    .close = model_close,
};
