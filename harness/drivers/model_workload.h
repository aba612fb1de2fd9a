/* The text workloads of `kvbench run --model`: parsing --workload and building the
 * cases (the workloads/ builders) with the options that shape them. */
#ifndef KV_MODEL_WORKLOAD_H
#define KV_MODEL_WORKLOAD_H
#include <stddef.h>
#include <stdint.h>
#include "../../model/tokenizer.h"
#include "../../workloads/split.h"
#include "../../workloads/textcase.h"

typedef enum { MW_NIAH, MW_RULER, MW_LONGBENCH, MW_INFINITEBENCH, MW_GSM8K } mw_kind;

typedef struct {
    mw_kind kind;
    const char *name;           /* "niah", "ruler", "longbench", "infinitebench", "gsm8k" */
    char arg[1024];             /* ruler tasks ("" = all), data directory, or GSM8K test file */
    const char *tasks;          /* --tasks (longbench, infinitebench); NULL = every file present */
    const char *haystack;       /* --haystack (niah, ruler); NULL = the fetched essays */
    const char *shots_file;     /* --shots-file (gsm8k); NULL = train.jsonl next to the test file */
    const int *ctxs;            /* niah/ruler: lengths in tokens */
    int n_ctx;
    const double *depths;       /* niah: needle depths, % of the context */
    int n_depths;
    int truncate;               /* longbench/infinitebench: prompt budget in tokens before the template */
    int limit;                  /* niah: first N cases; ruler: samples per task and length (0 -> 1);
                                   longbench/infinitebench: cases per task; gsm8k: test cases; 0 = all */
    int question_after, max_new, shots;
    uint64_t seed;
    wl_split split;             /* --split (niah, ruler): test (default) or dev, disjoint seeds and content */
    /* niah: the needle, its question and answer keywords (NULL: the classic needle), the
     * answer prefix after the template (NULL: none, the original prompt), needles per
     * prompt (1 + distractors) and haystack starts per (length, depth) cell */
    const char *needle, *question, *answers, *answer_prefix;
    int needles, samples;
    const char *qa_data;        /* ruler: --qa-data DIR with squad.json and hotpotqa.json (qa_1, qa_2) */
    int log_notes;              /* print notes (tasks left out) on stderr */
} mw_spec;

/* "niah", "ruler", "ruler:TASK,..", "longbench:DIR", "infinitebench:DIR", "gsm8k:FILE".
 * Fills kind, name and arg; 0, or -1 with a one-line reason naming the valid forms. */
int mw_parse(const char *spec, mw_spec *out, char *err, size_t errlen);
/* 1 if --ctx lists prompt lengths (niah, ruler), 0 if it is the truncation budget. */
int mw_ctx_is_length(mw_kind k);
/* The largest generation length of the workload's tasks (for the truncation budget). */
int mw_max_new(const mw_spec *s);

/* The NIAH settings in the run key, e.g. "split:test/needles:1/samples:1/needle:classic/
 * prefix:none" (texts other than the defaults as a hash; the texts are in the configuration). */
void mw_niah_ident(const mw_spec *s, char *buf, size_t n);

/* The RULER tasks this spec runs (ruler, or ruler:TASK,..), in task-table order: run[t] = 1.
 * Without --qa-data, "ruler" (all) leaves out qa_1 and qa_2 (*qa_skipped = 1). */
void mw_ruler_tasks(const mw_spec *s, int run[], int *qa_skipped);
/* --tasks of longbench/infinitebench checked before anything loads: 0, or -1 naming an
 * unknown task or an unsupported one and why. */
int mw_tasks_check(const mw_spec *s, char *err, size_t errlen);
/* --qa-data checked before anything loads: the files the listed qa tasks read exist; a qa
 * task listed without --qa-data is refused. 0, or -1 with a reason naming the files. */
int mw_qa_check(const mw_spec *s, char *err, size_t errlen);

/* The NIAH settings checked before anything loads (keywords in the needle, ranges); 0, or
 * -1 with a reason naming the flag. */
int mw_niah_check(const mw_spec *s, char *err, size_t errlen);

/* Builds every case. ident receives what identifies the inputs beyond the options
 * (haystack checksum, data path) for the run key. 0, or -1 with err. */
int mw_load(const mw_spec *s, const kv_tokenizer *tok, tc_list *out, char *ident, size_t identlen, char *err,
            size_t errlen);

#endif
