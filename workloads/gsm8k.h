/* GSM8K few-shot (openai/grade-school-math JSONL: question, answer ending "#### N").
 * The prompt is n_shots worked examples from the shots file, each
 * "Question: Q\nAnswer: A\n\n" with the full reference solution, then
 * "Question: Q\nAnswer:"; no chat template. Scored by TC_SCORE_GSM8K: the last number
 * of the output (cut at a next "Question:"; ".5" and "-.5" count, as 0.5 and -0.5),
 * commas removed, equal to the number after "####". */
#ifndef KV_GSM8K_H
#define KV_GSM8K_H
#include <stdio.h>
#include "../kernels/jsonl.h"
#include "textcase.h"

enum { GSM_DEFAULT_SHOTS = 50, GSM_MAX_NEW = 256 };

typedef struct {
    const kv_tokenizer *tok;    /* required (token counts) */
    int n_shots;                /* GSM_DEFAULT_SHOTS */
    const char *shots_path;     /* NULL: train.jsonl next to the test file */
    int question_after;
    int limit;                  /* at most this many test cases; 0: all */
    FILE *log;                  /* NULL: stderr */
} gsm_opts;

void gsm_defaults(gsm_opts *o);
/* Loads the shots (the first n_shots valid records of the shots file) and one case per
 * valid test record. 0, or -1 with err (unreadable file, too few shots). */
int gsm_load(const gsm_opts *o, const char *test_path, tc_list *out, char *err, size_t errlen);
#endif
