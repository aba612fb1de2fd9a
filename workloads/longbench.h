/* LongBench (THUDM/LongBench v1) English tasks from the JSONL files the user downloaded
 * (data.zip: data/<task>.jsonl; fields input, context, answers, length, dataset,
 * all_classes, _id). Each task uses its official prompt (config/dataset2prompt.json),
 * max_new_tokens (dataset2maxlen.json) and metric (eval.py); prompts over the budget are
 * cut in the middle (first half + last half of the budget in tokens, before the chat
 * template, as pred.py); trec, triviaqa, samsum, lcc and repobench-p get no chat
 * template; trec, triviaqa and samsum are scored on the output's first line. */
#ifndef KV_LONGBENCH_H
#define KV_LONGBENCH_H
#include <stdio.h>
#include "../kernels/jsonl.h"
#include "textcase.h"

enum { LB_N_TASKS = 16 };

typedef struct {
    const kv_tokenizer *tok;   /* required */
    int max_tokens;            /* truncation budget of the prompt before the chat template; 0: none */
    int max_ctx;               /* with max_tokens 0: each task's budget is max_ctx - its max_new_tokens
                                  - the template's tokens - 8, so prompt + generation fit */
    int use_chat;              /* 1: the model's chat template where LongBench uses one */
    int question_after;        /* recorded in each case's settings */
    int limit;                 /* at most this many cases per task; 0: all */
    FILE *log;                 /* messages about skipped lines; NULL: stderr */
} lb_opts;

void lb_defaults(lb_opts *o);
const char *lb_task_name(int i);
int lb_task_index(const char *name);       /* -1 if unknown */
int lb_task_max_new(int i);

/* Loads one task's file into out (appends; out->skipped counts bad lines). 0, or -1 with
 * err if the file cannot be read. */
int lb_load_task(const lb_opts *o, int task, const char *path, tc_list *out, jsonl_stats *st, char *err,
                 size_t errlen);
/* A comma list of task names checked before anything loads: 0, or -1 with err naming an
 * unknown task, or one of the 5 Chinese tasks kvbench does not run and why. */
int lb_check_tasks(const char *tasks, char *err, size_t errlen);
/* tasks: comma-separated names, or NULL for every task whose DIR/<task>.jsonl exists (a
 * Chinese task's file there gets one line on o->log saying it is skipped and why).
 * 0, or -1 with err (unknown or unsupported task, missing file, nothing found). */
int lb_load_dir(const lb_opts *o, const char *dir, const char *tasks, tc_list *out, char *err, size_t errlen);
#endif
