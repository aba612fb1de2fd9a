/* kvbench run through the model: text workloads over methods and budgets.
 *
 * Per case: tokenize the prompt, prefill it once with the statistics every method asked
 * for (shared by all methods and budgets), then for every (method, budget) not yet in
 * the database: init, ingest every layer (compression), greedy decode through the
 * method until a stop token, score the text with the workload's official metric, and
 * commit the result at once. Rerunning the same command finds the same run and skips
 * what is committed; kill -9 loses only the result being computed.
 *
 * --jobs N starts N copies of this command (re-executed, so no thread pool crosses a
 * fork), each taking every N-th case, all writing to the same results file. */
#include "run_args.h"
#include "run_model.h"
#include "../cli/commands.h"
#include "model_case.h"
#include "fidelity.h"
#include "model_workload.h"
#include "../identity/plugin.h"
#include "../identity/provenance.h"
#include "rss.h"
#include "../identity/run_ident.h"
#include "shard.h"
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

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

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

void run_model_options(FILE *f) {
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

static void run_model_usage(FILE *f) {
    fprintf(f,
            "usage: kvbench run --workload W --db FILE [--model F] [options]\n"
            "\n"
            "Runs a text workload through the model for every method and budget. Each case is\n"
            "prefilled once (shared by all methods); each method then compresses the prefill,\n"
            "generates greedily, and its answer is scored with the workload's official metric.\n"
            "Every result is committed to FILE at once; rerunning the same command resumes.\n"
            "\n");
    run_model_options(f);
    fprintf(f, "\n");
    run_common_usage(f);
    fprintf(f,
            "\n"
            "Generation is greedy and stops at the tokenizer's stop tokens (end of turn and end of\n"
            "text), at a newline for tasks scored on one line (LongBench samsum), or at the limit.\n"
            "The run is identified by the model file, workload inputs and split, generation settings,\n"
            "K/V type, backend, the code (git commit, and a hash of uncommitted edits) and every method's\n"
            "effective parameters (defaults with --params applied); methods, budgets, ctx, depths\n"
            "and limits only select which results to add. A bad --params value or params file\n"
            "stops the run before its first case (exit 2, nothing stored).\n"
            "Latency is split into prefill (shared; with --question-after plus the question\n"
            "tokens), compression (the method's ingest) and decode (tokens/s of the forward passes).\n");
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

/* A flag neither parser takes: the synthetic driver's shape options say where they
 * belong, the rest are unknown. */
static int unknown_flag(const char *flag) {
    static const char *const syn[] = {"--layers", "--heads", "--kv-heads", "--head-dim", "--steps", "--needles",
                                      "--oracle-hints"};
    for (size_t k = 0; k < sizeof syn / sizeof syn[0]; k++)
        if (!strcmp(flag, syn[k]))
            return run_fail("%s applies to the synthetic workloads (synthetic-niah, synthetic-multikey, "
                            "synthetic-multivalue), not to a model run", flag);
    return run_unknown(flag);
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

/* --job-index is internal (the re-executed copies of --jobs) and --question-after takes
 * no value. */
static const char *const bare_flags[] = {"--question-after"};
static const run_flag_syntax model_syntax = {bare_flags, 1, run_model_usage, model_flag, unknown_flag};

int run_model_wanted(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--model") || !strncmp(a, "--model=", 8)) return 1;
        const char *v = NULL;
        if (!strncmp(a, "--workload=", 11)) v = a + 11;
        else if (!strncmp(a, "--workloads=", 12)) v = a + 12;
        else if ((!strcmp(a, "--workload") || !strcmp(a, "--workloads")) && i + 1 < argc) v = argv[++i];
        if (v && strncmp(v, "synthetic-", 10)) return 1;
    }
    return 0;
}

/* 0 ok, 1 help printed, -1 error printed. */
static int parse_args(int argc, char **argv, rm_opts *o) {
    memset(o, 0, sizeof *o);
    o->model_path = model_default_path();
    o->jobs = 1;
    o->job_index = -1;
    o->wl.shots = -1;
    o->fidelity = 16;
    o->repeat = 1;
    o->batch = 1;
    run_common c = {.methods = "all", .budgets = "0.1", .backend = "cpu", .seed = 42, .kv_type = -1};
    /* An unknown workload is the first thing to report, before options it lacks (a
     * synthetic run's --layers is unknown here only because the workload is). */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *w = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) break;
        if (!strncmp(a, "--workload=", 11) || !strncmp(a, "--workloads=", 12)) w = strchr(a, '=') + 1;
        else if ((!strcmp(a, "--workload") || !strcmp(a, "--workloads")) && i + 1 < argc) w = argv[++i];
        char err[512];
        if (w && mw_parse(w, &o->wl, err, sizeof err)) return run_fail("%s", err);
    }
    model_ctx mc = {o, NULL};
    int r = run_parse(&model_syntax, argc, argv, &c, &mc);
    if (r) return r;
    const char *methods = c.methods, *budgets = c.budgets, *ctxs = c.ctxs, *depths = c.depths, *params = c.params,
               *niah_only = mc.niah_only;
    int split_given = c.split_given;
    o->workload = c.workload, o->db_path = c.db_path, o->backend = c.backend, o->quiet = c.quiet;
    o->kv_type = c.kv_type, o->decode_rule = c.decode_rule, o->threads = c.threads, o->shard = c.shard;
    o->wl.seed = c.seed, o->wl.split = c.split;
    if (!o->workload) return run_fail("--workload is required with --model (niah, ruler, longbench:DIR, ...)");
    char err[1024];
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

static void fmt_dur(char *buf, size_t n, double s) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

static void fmt_bytes(char *buf, size_t len, double b) {
    if (b >= 1 << 30) snprintf(buf, len, "%.2f GiB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(buf, len, "%.1f MiB", b / (1 << 20));
    else if (b >= 1 << 10) snprintf(buf, len, "%.1f KiB", b / (1 << 10));
    else snprintf(buf, len, "%.0f B", b);
}

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
    int *slot;                 /* position among this shard's cases, -1: another shard's */
} case_set;

static void cases_free(case_set *cs) {
    for (int i = 0; i < cs->list.n; i++) {
        if (cs->ids) free(cs->ids[i]);
        if (cs->key) free(cs->key[i]);
    }
    free(cs->ids), free(cs->n_tok), free(cs->n_ctx_part), free(cs->max_new), free(cs->key), free(cs->cost), free(cs->sha);
    free(cs->slot);
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
    /* --shard: this shard's cases, numbered in case order (--jobs splits them further) */
    cs->slot = calloc((size_t)n + 1, sizeof *cs->slot);
    int *owner = calloc((size_t)n + 1, sizeof *owner);
    if (!cs->slot || !owner || (o->shard.n && shard_assign((const char *const *)cs->key, cs->cost, n, o->shard.n, owner))) {
        free(owner);
        return run_fail("out of memory for %d cases", n);
    }
    for (int i = 0, mine = 0; i < n; i++) cs->slot[i] = owner[i] == o->shard.k ? mine++ : -1;
    free(owner);
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

/* Whether this process runs case i: the shard's (every case without --shard), and of
 * those every jobs-th when it is job `job` of --jobs (job < 0: all of the shard's). */
static int takes_case(const rm_opts *o, const case_set *cs, int i, int job) {
    return cs->slot[i] >= 0 && (job < 0 || cs->slot[i] % o->jobs == job);
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

/* ---------------------------------------------------------------- database helpers */

/* Which pairs of case i are missing: missing[p] = 1. Returns the count, or -1. */
static int missing_pairs(kv_db *db, int64_t run_id, const rm_opts *o, const char *key, uint8_t *missing,
                         int64_t *case_id) {
    *case_id = kvdb_case_find(db, run_id, key);
    if (*case_id < 0) return run_fail("results db '%s': looking up case %s: %s", o->db_path, key,
                                  sqlite3_errmsg(kvdb_sqlite(db)));
    int n = 0;
    for (int p = 0; p < o->n_pairs; p++) {
        int e = *case_id ? kvdb_result_exists(db, *case_id, o->pair_m[p]->name, o->pair_b[p]) : 0;
        if (e < 0) return run_fail("%s", kvdb_errmsg(db));
        missing[p] = e == 0;
        n += missing[p];
    }
    return n;
}

/* Mean score, memory and latency per (method, budget) of the run, from the database. */
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
        fmt_bytes(peak, sizeof peak, r->peak);
        if (isnan(r->steady)) snprintf(steady, sizeof steady, "-");
        else fmt_bytes(steady, sizeof steady, r->steady);
        if (isnan(r->rss)) snprintf(rss, sizeof rss, "-");
        else fmt_bytes(rss, sizeof rss, r->rss);
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

/* ---------------------------------------------------------------- progress */

typedef struct {
    double start, pf_s, pf_cost, res_s, res_cost;
    double left_pf_cost, left_res_cost;
    int done, total;
    char prefix[32];
} progress;

static double eta(const progress *p) {
    if (p->pf_cost <= 0 && p->res_cost <= 0) return -1;
    double rate_pf = p->pf_cost > 0 ? p->pf_s / p->pf_cost : 0, rate_res = p->res_cost > 0 ? p->res_s / p->res_cost : 0;
    if (p->left_pf_cost > 0 && rate_pf == 0) return -1;
    if (p->left_res_cost > 0 && rate_res == 0) return -1;
    return p->left_pf_cost * rate_pf + p->left_res_cost * rate_res;
}

/* Relative cost of one result: compression ~ prompt, decode ~ generated tokens x cache. */
static double result_cost(int n_prompt, int max_new) { return 1.0 + n_prompt / 2048.0 + max_new / 32.0; }

/* ---------------------------------------------------------------- one worker */

/* Marks the missing (case, pair) results of the cases this job takes (every case when
 * job < 0) and fills their case ids (0: not recorded yet). Returns the count, or -1. */
static int scan_missing(kv_db *db, int64_t run_id, const rm_opts *o, const case_set *cs, int job, uint8_t *missing,
                        int64_t *case_ids) {
    int total = 0;
    for (int i = 0; i < cs->list.n; i++) {
        if (!takes_case(o, cs, i, job)) continue;
        int k = missing_pairs(db, run_id, o, cs->key[i], missing + (size_t)i * o->n_pairs, &case_ids[i]);
        if (k < 0) return -1;
        total += k;
    }
    return total;
}

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
        fmt_bytes(pk, sizeof pk, (double)peak);
        fmt_bytes(us, sizeof us, (double)used);
        char dp[32];
        fmt_bytes(dp, sizeof dp, (double)drv_peak);
        fprintf(stderr, "%s[case] %s: device prefill %.1f ms (CUDA events), allocator peak %s, device in use %s, "
                "driver peak %s (cudaMemGetInfo, sampled)\n", prefix, key, have ? info.prefill_ms : -1.0, pk, us, dp);
    }
}
#endif

static int run_cases(const rm_opts *o, kv_model *model, case_set *cs, kv_db *db, int64_t run_id, int *n_new) {
    const int N = cs->list.n;
#ifdef KB_CUDA
    const int gpu = cuda_model_selected();
    if (gpu) {   /* the weights go to the device once, before (and outside) any case's time */
        char lerr[512];
        if (cuda_model_load(model, lerr, sizeof lerr)) return run_fail("--backend cuda: %s", lerr);
        /* random weights are not read on the host again: free them (4.5 GB for
         * random:llama3-8b in Q4_0), room for the long prefills' K/V and the methods' stores */
        long long freed = cuda_model_drop_host_weights(model);
        if (freed < 0) return run_fail("--backend cuda: the weights did not reach the device");
        if (freed > 0 && !o->quiet)
            fprintf(stderr, "kvbench run: %.1f GB of host weights freed after the upload (random model)\n",
                    freed / 1e9);
    }
#endif
    uint8_t *missing = calloc((size_t)N * o->n_pairs + 1, 1);
    int64_t *case_ids = calloc((size_t)N + 1, sizeof *case_ids);
    if (!missing || !case_ids) {
        free(missing), free(case_ids);
        return run_fail("out of memory");
    }
    progress pg = {.start = kb_now_s()};
    if (o->jobs > 1) snprintf(pg.prefix, sizeof pg.prefix, "[job %d/%d] ", o->job_index + 1, o->jobs);
    else if (o->shard.n) snprintf(pg.prefix, sizeof pg.prefix, "[shard %d/%d] ", o->shard.k, o->shard.n);
    int job = o->jobs > 1 ? o->job_index : -1, mine = 0;
    int rc = scan_missing(db, run_id, o, cs, job, missing, case_ids) < 0 ? -1 : 0;
    for (int i = 0; i < N && !rc; i++) {
        if (!takes_case(o, cs, i, job)) continue;
        mine++;
        int k = 0;
        for (int p = 0; p < o->n_pairs; p++) k += missing[(size_t)i * o->n_pairs + p];
        if (k > 0) {
            pg.total += k;
            pg.left_pf_cost += cs->cost[i];
            pg.left_res_cost += k * result_cost(cs->n_tok[i], cs->max_new[i]);
        }
    }
    if (!rc && !o->quiet)
        fprintf(stderr, "%s%d cases, %d results to compute (%d method/budget pairs per case)\n", pg.prefix, mine,
                pg.total, o->n_pairs);
    mc_result res;
    memset(&res, 0, sizeof res);
    int seen = 0;
    for (int i = 0; i < N && !rc; i++) {
        if (!takes_case(o, cs, i, job)) continue;
        seen++;
        uint8_t *miss = missing + (size_t)i * o->n_pairs;
        int k = 0;
        for (int p = 0; p < o->n_pairs; p++) k += miss[p];
        if (!k) {
            if (!o->quiet)
                fprintf(stderr, "%s[case %d/%d] %s: all %d results present, skipped\n", pg.prefix, seen, mine,
                        cs->key[i], o->n_pairs);
            continue;
        }
        const tc_case *tc = &cs->list.v[i];
        mc_case mc = {.model = model, .tc = tc, .ids = cs->ids[i], .n = cs->n_tok[i], .n_context = cs->n_ctx_part[i],
                      .question_after = o->wl.question_after, .max_new = cs->max_new[i], .params = &o->params,
                      .decode_rule = o->decode_rule, .kv_type = o->kv_type};
        mc.n_pf = mc.question_after ? mc.n_context : mc.n;
        mc.repeat = o->repeat;
#ifdef KB_CUDA
        mc.one_at_a_time = !rm_batched(o, gpu ? "cuda" : "cpu");
#else
        mc.one_at_a_time = !rm_batched(o, "cpu");
#endif
        double load0[1] = {NAN};
        if (getloadavg(load0, 1) != 1) load0[0] = NAN;
        const kv_method *um[MAX_PAIRS];
        double ub[MAX_PAIRS];
        int nu = 0;
        for (int p = 0; p < o->n_pairs; p++)
            if (miss[p]) um[nu] = o->pair_m[p], ub[nu++] = o->pair_b[p];
        kv_needs needs = mc_union_needs(&mc, um, ub, nu);
        if (!o->quiet)
            fprintf(stderr, "%s[case %d/%d] %s: prefill %d tokens%s%s...\n", pg.prefix, seen, mine, cs->key[i], mc.n_pf,
                    needs.col_mass ? ", column mass" : "", needs.window ? ", window rows" : "");
        char err[512];
#ifdef KB_CUDA
        if (gpu) kb_cuda_mem_reset_peak();
#endif
        double t0 = kb_now_s();
        int rss_rc = rss_reset_peak();
        int stream = rm_streams(o);
        char label[160];
        snprintf(label, sizeof label, "%s[case %d/%d] %s", pg.prefix, seen, mine, cs->key[i]);
        mc.progress = o->quiet ? NULL : label;
        if (stream ? mc_prefill_streamed(&mc, &needs, um, ub, nu, err, sizeof err)
                   : mc_prefill(&mc, &needs, err, sizeof err)) {
            rc = run_fail("case %s: prefill: %s", cs->key[i], err);
            break;
        }
        pg.pf_s += kb_now_s() - t0;
        int64_t pf_rss = rss_peak_since(rss_rc);
#ifdef KB_CUDA
        size_t case_peak = 0, case_drv = 0;   /* the prefill's peaks, before the methods reset them */
        if (gpu) kb_cuda_mem_stats(NULL, &case_peak, NULL, NULL);
        if (gpu && kb_cuda_mem_sample(&case_drv)) case_drv = 0;   /* no sample: stored NULL */
#endif
        pg.pf_cost += cs->cost[i];
        pg.left_pf_cost -= cs->cost[i];
        kvdb_case kc = {.case_key = cs->key[i], .workload = o->wl.name, .variant = tc->task, .seed = o->wl.seed,
                        .ctx = tc->length > 0 ? tc->length : mc.n,
                        .depth = tc->depth >= 0 ? tc->depth / 100.0 : NAN, .prefill_s = mc.pf.seconds,
                        .prompt_sha256 = cs->sha[i], .prompt_tokens = cs->n_tok[i]};
        if (!case_ids[i]) case_ids[i] = kvdb_case_get(db, run_id, &kc);
        if (case_ids[i] < 0) {
            rc = run_fail("%s", kvdb_errmsg(db));
            mc_free(&mc);
            break;
        }
#ifdef KB_CUDA
        /* recorded now, not after the last method: a run cut during the methods keeps them */
        if (gpu) record_gpu(db, case_ids[i], model, case_peak, case_drv, pg.prefix, cs->key[i], o->quiet);
        if (gpu && !o->quiet)
            fprintf(stderr, "%s[device] ctx %d prefill: allocator peak %zu B, driver peak %zu B\n", pg.prefix,
                    tc->length > 0 ? tc->length : mc.n, case_peak, case_drv);
#endif
        /* the case's peak: the most of the prefill's and each result's (each resets the peak) */
        int64_t case_rss = pf_rss;
        if (kvdb_case_rss(db, case_ids[i], case_rss))
            fprintf(stderr, "%skvbench run: peak RSS not recorded: %s\n", pg.prefix, kvdb_errmsg(db));
        fid_ref ref;
        memset(&ref, 0, sizeof ref);
        if (o->fidelity > 0) {   /* FullKV's reference; without it the results just lack fidelity */
            if (fid_ref_build(&mc, o->fidelity, &ref, err, sizeof err))
                fprintf(stderr, "%skvbench run: case %s: %s\n", pg.prefix, cs->key[i], err);
            else mc.ref = &ref;
        }
        /* batched: every missing pair's result at once, recorded below in order */
        mc_result *all = mc.one_at_a_time ? NULL : calloc((size_t)nu, sizeof *all);
        int next = 0;
        double rt_all = kb_now_s();
        if (all) mc_run_pairs(&mc, um, ub, nu, all);
        rt_all = (kb_now_s() - rt_all) / (nu > 0 ? nu : 1);
        for (int p = 0; p < o->n_pairs && !rc; p++) {
            if (!miss[p]) continue;
            const kv_method *m = o->pair_m[p];
            double rt0 = kb_now_s() - (all ? rt_all : 0);   /* batched: an equal share of the batch's time */
#ifdef KB_CUDA
            if (gpu) kb_cuda_mem_reset_peak();   /* this method's peak: weights + its KV + decode */
#endif
            if (all) {   /* (res is cleared, unless a result already present left it: freed here) */
                mc_result_clear(&res);
                res = all[next], memset(&all[next++], 0, sizeof *all);
            }
            else mc_run_method(&mc, m, o->pair_b[p], &res);
            if (!strcmp(res.r.status, MC_REFUSED)) {
                rc = run_fail("case %s: %s refused its configuration (it passed before the first case): %s; "
                              "nothing stored", cs->key[i], m->name, res.output ? res.output : "?");
                mc_result_clear(&res);
                break;
            }
#ifdef KB_CUDA
            size_t mpeak = 0, mdrv = 0;
            if (gpu && kb_cuda_mem_stats(NULL, &mpeak, NULL, NULL) == 0) res.r.gpu_peak_bytes = (int64_t)mpeak;
            /* the driver's view apart from the allocator's, both stored (and logged:
             * tests/gpu/paper_table.py reads this line) */
            int have_drv = gpu && kb_cuda_mem_sample(&mdrv) == 0;
            if (have_drv) res.r.gpu_driver_peak_bytes = (int64_t)mdrv;
            if (have_drv && !o->quiet)
                fprintf(stderr, "%s[device] ctx %d %s @ %g: allocator peak %zu B, driver peak %zu B\n", pg.prefix,
                        mc.tc->length > 0 ? mc.tc->length : mc.n, m->name, o->pair_b[p], mpeak, mdrv);
#endif
            if (res.r.rss_peak > case_rss) case_rss = res.r.rss_peak;
            int put = kvdb_result_put(db, case_ids[i], &res.r);
            if (put < 0) {
                rc = run_fail("%s", kvdb_errmsg(db));
                break;
            }
            if (put > 0) continue;      /* another run on this file recorded it first: already present */
            /* Zoom events go in their own transaction after the result (a kill -9 in
             * between keeps the result without its events). */
            if (res.n_zoom && kvdb_zoom_put(db, case_ids[i], m->name, o->pair_b[p], res.zoom, res.n_zoom))
                fprintf(stderr, "%skvbench run: zoom events not recorded: %s\n", pg.prefix, kvdb_errmsg(db));
            if (res.chosen[0] && kvdb_note_put(db, case_ids[i], m->name, o->pair_b[p], "params_used", res.chosen))
                fprintf(stderr, "%skvbench run: params used not recorded: %s\n", pg.prefix, kvdb_errmsg(db));
            char as[32];   /* batched: the method's own share of the decode steps (a timing) */
            snprintf(as, sizeof as, "%.6f", res.attend_s);
            if (res.batched && !strcmp(res.r.status, "ok") && kvdb_note_put(db, case_ids[i], m->name, o->pair_b[p], "attend_s", as))
                fprintf(stderr, "%skvbench run: attention time not recorded: %s\n", pg.prefix, kvdb_errmsg(db));
            (*n_new)++;
            pg.done++;
            double c = result_cost(mc.n, mc.max_new);
            pg.res_s += kb_now_s() - rt0;
            pg.res_cost += c;
            pg.left_res_cost -= c;
            if (!o->quiet) {
                char el[32], et[32], sc[96], dec[64];
                fmt_dur(el, sizeof el, kb_now_s() - pg.start);
                fmt_dur(et, sizeof et, eta(&pg));
                if (!strcmp(res.r.status, "ok")) {
                    int k = snprintf(sc, sizeof sc, "score %.2f", res.r.score);
                    if (res.r.ans_tokens > 0 && k < (int)sizeof sc)
                        k += snprintf(sc + k, sizeof sc - k, ", nll %.2f", res.r.ans_nll);
                    if (res.r.fid_steps > 0 && k < (int)sizeof sc)
                        snprintf(sc + k, sizeof sc - k, ", kl %.3f, top1 %.2f", res.r.kl, res.r.top1);
                    snprintf(dec, sizeof dec, "compress %.2fs, decode %d tok %.1f tok/s", res.r.compress_s,
                             res.n_generated, res.r.tokens_per_s);
                } else {
                    snprintf(sc, sizeof sc, "%s", res.r.status);
                    snprintf(dec, sizeof dec, "%.50s", res.output ? res.output : "");
                }
                fprintf(stderr, "%s[case %d/%d] %s %-12s @ %-5g %s | %s | %d/%d done, %s elapsed, ETA %s\n",
                        pg.prefix, seen, mine, cs->key[i], m->name, o->pair_b[p], sc, dec, pg.done, pg.total, el, et);
            }
            mc_result_clear(&res);
        }
        mc_result_clear(&res);
        for (int k = 0; all && k < nu; k++) mc_result_clear(&all[k]);   /* left by a stop */
        free(all);
        fid_ref_free(&ref);
        double load1[1] = {NAN};
        if (getloadavg(load1, 1) != 1) load1[0] = NAN;
        if (!rc && kvdb_case_rss(db, case_ids[i], case_rss))
            fprintf(stderr, "%skvbench run: peak RSS not recorded: %s\n", pg.prefix, kvdb_errmsg(db));
        if (!rc && kvdb_case_load(db, case_ids[i], load0[0], load1[0]))
            fprintf(stderr, "%skvbench run: load average not recorded: %s\n", pg.prefix, kvdb_errmsg(db));
        mc_free(&mc);
    }
    free(missing);
    free(case_ids);
    return rc;
}

/* ---------------------------------------------------------------- jobs */

/* Starts the N copies of this command with --job-index, waits for all. 0 if all succeeded. */
static int run_jobs(const rm_opts *o, int argc, char **argv) {
    int per = o->threads ? o->threads : (kb_threads() / o->jobs > 0 ? kb_threads() / o->jobs : 1);
    char per_s[16];
    snprintf(per_s, sizeof per_s, "%d", per);
    /* main() took the --plugin options out of argv: each copy is given the plugins this
     * process loaded, else their methods are unknown there */
    int np = kv_plugin_count(), n = 0;
    char **args = calloc((size_t)argc + 2 * (size_t)np + 8, sizeof *args);
    if (!args) return run_fail("out of memory");
    args[n++] = "kvbench";
    for (int p = 0; p < np; p++) {
        args[n++] = "--plugin";
        args[n++] = (char *)kv_plugin_path(p);
    }
    for (int i = 0; i < argc; i++) args[n++] = argv[i];
    char idx[MAX_JOBS][16];
    pid_t pids[MAX_JOBS];
    int started = 0, rc = 0;
    for (int j = 0; j < o->jobs; j++) {
        snprintf(idx[j], sizeof idx[j], "%d", j);
        args[n] = "--threads";
        args[n + 1] = per_s;
        args[n + 2] = "--job-index";
        args[n + 3] = idx[j];
        args[n + 4] = NULL;
        int e = posix_spawn(&pids[j], "/proc/self/exe", NULL, NULL, args, environ);
        if (e) {
            rc = run_fail("--jobs: cannot start job %d: %s", j + 1, strerror(e));
            break;
        }
        started++;
    }
    for (int j = 0; j < started; j++) {
        int status;
        while (waitpid(pids[j], &status, 0) < 0)
            if (errno != EINTR) {
                status = -1;
                break;
            }
        if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status)) {
            if (status != -1 && WIFSIGNALED(status)) run_fail("job %d killed by signal %d", j + 1, WTERMSIG(status));
            else run_fail("job %d failed", j + 1);
            rc = -1;
        }
    }
    free(args);
    return rc;
}

/* ---------------------------------------------------------------- the command */

int cmd_run_model(int argc, char **argv) {
    rm_opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr) return pr > 0 ? 0 : 2;
    /* cuda without a usable device (or a CPU build): one line, then the CPU; the run is
     * recorded with the backend it really used */
    if (run_kv_type_backend(&o.kv_type, o.backend)) return 2;
    if (o.q8_act && !strcmp(o.backend, "cuda"))
        return run_fail("--activations q8 needs --backend cpu: the CUDA engine's mat-vecs read f32 activations"), 2;
    const char *backend = "cpu", *why = NULL;
    if (!strcmp(o.backend, "cuda") && kb_select("cuda", &why) == 0) backend = "cuda";
    else if (kb_select("cpu", NULL) == 0 && !strcmp(o.backend, "cuda") && o.job_index < 0)
        fprintf(stderr, "kvbench run: --backend cuda: %s; running on the CPU\n", why ? why : "not available");
    if (o.threads) kb_set_threads(o.threads);

    char err[1024];
    kv_model *model = model_load(o.model_path, err, sizeof err);
    if (!model) return run_fail("--model: %s", err), 2;   /* a bad or unsupported file */
    model_set_f32_activations(model, !o.q8_act);
    const kv_model_config *cf = model_config(model);
    {   /* every method accepts its parameters on this model, or nothing runs (and nothing is stored) */
        int n_chk = cf->n_ctx_train < 1024 ? cf->n_ctx_train : 1024;
        mc_case probe = {.model = model, .n = n_chk, .n_pf = n_chk, .max_new = 32, .params = &o.params,
                         .kv_type = o.kv_type};
        kv_setup shape = mc_setup(&probe, o.methods[0], 0.5);
        if (run_check_methods(o.methods, o.n_methods, &o.params, &shape, err, sizeof err)) {
            run_fail("%s", err);
#ifdef KB_CUDA
            cuda_model_release(model);
#endif
            model_free(model);
            return 2;
        }
        o.n_trained = run_ident_trained(&o.params, &shape, o.trained, 8);
    }
    int rc = 0;
    case_set cs;
    memset(&cs, 0, sizeof cs);
    kv_db *db = NULL;

    /* Lengths the model cannot hold are refused before anything is built. */
    if (mw_ctx_is_length(o.wl.kind)) {
        if (!o.ctx_given) {
            if (o.wl.kind == MW_NIAH) o.ctxs[0] = 1024, o.ctxs[1] = 2048, o.ctxs[2] = 4096, o.n_ctx = 3;
            else o.ctxs[0] = 4096, o.n_ctx = 1;
            for (int i = 0; i < o.n_ctx; i++)
                if (o.ctxs[i] > cf->n_ctx_train) o.ctxs[i] = cf->n_ctx_train;
        }
        for (int i = 0; i < o.n_ctx && !rc; i++)
            if (o.ctxs[i] > cf->n_ctx_train)
                rc = run_fail("--ctx %d is beyond the context of the model %s (%d tokens)%s", o.ctxs[i], o.model_path,
                          cf->n_ctx_train, model_ctx_note(cf));
        o.wl.ctxs = o.ctxs;
        o.wl.n_ctx = o.n_ctx;
        o.wl.depths = o.depths;
        o.wl.n_depths = o.n_depths;
    } else {
        int room = cf->n_ctx_train - mw_max_new(&o.wl) - 64;
        o.wl.truncate = o.ctx_given ? o.ctxs[0] : room;
        if (o.wl.truncate > room)
            rc = run_fail("--ctx %d: prompts of up to %d tokens + %d new tokens are beyond the context of the model %s "
                      "(%d tokens); use at most %d", o.wl.truncate, o.wl.truncate, mw_max_new(&o.wl), o.model_path,
                      cf->n_ctx_train, room);
        if (o.wl.truncate < 64) rc = run_fail("--ctx %d: too small a prompt budget", o.wl.truncate);
    }
    if (rc) {   /* a length the model cannot hold: bad input, nothing was built */
#ifdef KB_CUDA
        cuda_model_release(model);
#endif
        model_free(model);
        return 2;
    }
    char ident[1536] = "";
    if (!rc && mw_load(&o.wl, model_tokenizer(model), &cs.list, ident, sizeof ident, err, sizeof err))
        rc = run_fail("%s", err);
    if (!rc) rc = cases_prepare(&cs, &o, model);
    if (!rc && o.print_prompts) {             /* show, then stop: nothing is run or written */
        print_prompts(&cs, o.print_prompts);
        cases_free(&cs);
        model_free(model);
        return 0;
    }

    provenance prov;
    provenance_get(&prov);
    char key[8192], *json = NULL;
    int64_t run_id = -1;
    int n_new = 0;
    double start = kb_now_s();
    int present = 0;
    if (!rc && run_key(&o, model, ident, backend, prov.code, key, sizeof key))
        rc = run_fail("the run key is too long (too many --params)");
    if (!rc) {
        size_t jcap = 65536;
        json = malloc(jcap);
        if (!json) rc = run_fail("out of memory");
        else config_json(&o, model, &cs, ident, backend, json, jcap);
    }
    if (!rc) {
        db = kvdb_open(o.db_path, err, sizeof err);
        if (!db) rc = run_fail("%s", err);
    }
    if (!rc) {
        char mid[512];
        model_ident(o.model_path, model, mid, sizeof mid);
        kvdb_run run = {.run_key = key, .config_json = json, .workload = o.wl.name, .model = mid,
                        .git_commit = prov.git_commit, .build_flags = KB_BUILD_FLAGS, .host = prov.host,
                        .cpu = prov.cpu, .backend = backend, .seed = o.wl.seed};
        int resumed = 0;
        run_id = kvdb_run_begin(db, &run, &resumed);
        if (run_id < 0) rc = run_fail("%s", kvdb_errmsg(db));
        else if (resumed && !o.quiet && o.job_index < 0)
            fprintf(stderr, "kvbench run: resuming run %lld (%s)\n", (long long)run_id, o.wl.name);
        if (!rc && o.job_index < 0) {   /* the whole plan, every shard's cases, for kvbench merge */
            const char *pm[MAX_PAIRS];
            for (int p = 0; p < o.n_pairs; p++) pm[p] = o.pair_m[p]->name;
            if (kvdb_plan_put(db, run_id, (const char *const *)cs.key, cs.list.n, pm, o.pair_b, o.n_pairs))
                rc = run_fail("%s", kvdb_errmsg(db));
            if (!rc && o.shard.n && !o.quiet) {
                int mine = 0;
                for (int i = 0; i < cs.list.n; i++) mine += cs.slot[i] >= 0;
                fprintf(stderr, "kvbench run: shard %d/%d: %d of the %d cases\n", o.shard.k, o.shard.n, mine,
                        cs.list.n);
            }
        }
        if (!rc) {   /* the requested results already recorded */
            uint8_t *miss = calloc((size_t)cs.list.n * o.n_pairs + 1, 1);
            int64_t *ids = calloc((size_t)cs.list.n + 1, sizeof *ids);
            int k = miss && ids ? scan_missing(db, run_id, &o, &cs, -1, miss, ids) : run_fail("out of memory");
            int mine = 0;
            for (int i = 0; i < cs.list.n; i++) mine += cs.slot[i] >= 0;
            if (k < 0) rc = -1;
            else present = mine * o.n_pairs - k;
            free(miss), free(ids);
        }
    }
    if (!rc) {
        if (o.jobs > 1 && o.job_index < 0) {
            int64_t before = kvdb_run_result_count(db, run_id);
            kvdb_close(db);   /* the jobs open their own connections */
            db = NULL;
#ifdef KB_CUDA
            cuda_model_release(model);
#endif
            model_free(model);
            model = NULL;
            rc = run_jobs(&o, argc, argv);
            char e2[512];
            db = kvdb_open(o.db_path, e2, sizeof e2);
            if (!db) rc = run_fail("%s", e2);
            else n_new = (int)(kvdb_run_result_count(db, run_id) - before);
        } else {
            rc = run_cases(&o, model, &cs, db, run_id, &n_new);
        }
    }
    if (!rc && o.job_index < 0) {
        print_summary(db, run_id, o.decode_rule);
        printf("\n%d results written, %d already present; %.1fs. Full table: kvbench report --db %s\n", n_new,
               present, kb_now_s() - start, o.db_path);
    }
    free(json);
    kvdb_close(db);
    cases_free(&cs);
#ifdef KB_CUDA
    if (model) cuda_model_release(model);
#endif
    model_free(model);
    return rc ? 1 : 0;
}
