/* InfiniteBench (OpenBMB/InfiniteBench) English tasks from the user's JSONL files
 * (DIR/<task>.jsonl with context, input, answer, options): En.QA (longbook_qa_eng, qa_f1),
 * En.MC (longbook_choice_eng, choice accuracy), En.Sum (longbook_sum_eng, rouge-score rougeLsum),
 * Code.Debug (code_debug), Retrieve.PassKey (passkey), Retrieve.Number (number_string),
 * Retrieve.KV (kv_retrieval). Prompts are the official chat-model ("gpt4") templates of
 * src/prompt.py inside the model's chat template, max_new_tokens from eval_utils.py,
 * scoring as compute_scores.py; prompts over the budget are cut in the middle. */
#ifndef KV_INFINITEBENCH_H
#define KV_INFINITEBENCH_H
#include <stdio.h>
#include "../kernels/jsonl.h"
#include "textcase.h"

enum { IB_N_TASKS = 7 };

typedef struct {
    const kv_tokenizer *tok;   /* required */
    int max_tokens;            /* middle-truncation budget before the chat template; 0: none */
    int max_ctx;               /* with max_tokens 0: each task's budget is max_ctx - its max_new_tokens
                                  - the template's tokens - 8, so prompt + generation fit */
    int use_chat;              /* 1 */
    int question_after;
    int limit;                 /* per task; 0: all */
    FILE *log;                 /* NULL: stderr */
} ib_opts;

void ib_defaults(ib_opts *o);
const char *ib_task_name(int i);
/* File names (longbook_qa_eng, ...) and the paper's names (En.QA, En.MC, En.Sum,
 * Code.Debug, Retrieve.PassKey, Retrieve.Number, Retrieve.KV), case-insensitive; -1 if
 * unknown. */
int ib_task_index(const char *name);
int ib_task_max_new(int i);
int ib_load_task(const ib_opts *o, int task, const char *path, tc_list *out, jsonl_stats *st, char *err,
                 size_t errlen);
/* A comma list of task names checked before anything loads: 0, or -1 with err naming an
 * unknown task, or one of the 5 tasks kvbench does not run (Zh.QA, En.Dia, Math.Find,
 * Math.Calc, Code.Run) and why. */
int ib_check_tasks(const char *tasks, char *err, size_t errlen);
/* tasks: comma-separated, or NULL for every task file present in dir (a file of an
 * unsupported task there gets one line on o->log saying it is skipped and why). */
int ib_load_dir(const ib_opts *o, const char *dir, const char *tasks, tc_list *out, char *err, size_t errlen);
#endif
