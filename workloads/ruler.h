/* RULER's synthetic tasks (NVIDIA/RULER scripts/data/synthetic), generated here from
 * their published definitions with this project's own PRNG:
 *
 *   niah_single_1    noise haystack (one repeated sentence per line), word key, 7-digit value
 *   niah_single_2    essay haystack, word key, 7-digit value
 *   niah_single_3    essay haystack, word key, UUID value
 *   niah_multikey_1  essay, 4 word keys with a value each, one asked
 *   niah_multikey_2  haystack of needle-shaped distractors (word keys, 7-digit values)
 *   niah_multikey_3  the same with UUID keys and values
 *   niah_multivalue  essay, one word key with 4 values, all asked
 *   niah_multiquery  essay, 4 word keys, all asked
 *   vt               variable tracking: one chain of 5 variables (4 hops) in the noise
 *                    haystack, after a short worked example
 *   cwe              common words: 10 words x 30 among words x 3 (6 and 1 below 4K),
 *                    numbered list, after one worked example
 *   fwe              frequent coded words: Zipf (alpha 2) counts of 6-letter coded words,
 *                    the top rank replaced by "...", the next three asked
 *   qa_1             SQuAD: the question's paragraph among distractor paragraphs (its
 *                    article's first, then any), as "Document i:" blocks (ruler_qa.h)
 *   qa_2             HotpotQA: the question's 10 paragraphs (2 gold, 8 distractors) among
 *                    other questions' paragraphs
 * qa_1 and qa_2 need the user's SQuAD and HotpotQA files (ruler_opts.squad/.hotpot).
 *
 * Keys are "adjective-noun" words, values 7-digit numbers or UUIDs (version 4). Essay
 * needles go in at sentence boundaries at depths drawn from 40 evenly spaced levels;
 * noise/needle haystacks take needles at random lines. The haystack size is the largest
 * for which prompt tokens (chat template and answer prefix included) + max_new_tokens
 * <= the length, found by binary search on the first sample and rechecked per sample.
 * Generation lengths: niah 128, vt 30, cwe 120, fwe 50, qa 32. Scored by string_match_all,
 * qa by string_match_part. The qa document count is qa.py's: the largest
 * count that fits sample 0 (binary search), lowered by 10 per sample until that one fits;
 * sample i asks question i of the file.
 * The prompts keep RULER's wording; the answer prefix follows the assistant header with
 * no leading or trailing space. */
#ifndef KV_RULER_H
#define KV_RULER_H
#include <stddef.h>
#include <stdint.h>
#include "split.h"
#include "textcase.h"

enum { RULER_N_TASKS = 13, RULER_N_SYNTHETIC = 11, RULER_DEFAULT_SEED = 42, RULER_N_DEPTHS = 40 };
struct ruler_qa_data;

typedef struct {
    const kv_tokenizer *tok;   /* required */
    const char *essays;        /* haystack text for the essay tasks (haystack_load) */
    size_t essays_len;
    uint64_t seed;             /* RULER_DEFAULT_SEED */
    int use_chat;              /* 1 */
    int question_after;        /* recorded in each case's settings */
    wl_split split;            /* test (default) or dev: generator seed 2*seed + split; keys, values,
                                  variables and words only those whose hash has the split's parity;
                                  the essay haystack's first half (test) or second half (dev) */
    const struct ruler_qa_data *squad, *hotpot;   /* qa_1, qa_2 data (ruler_qa_load), or NULL */
} ruler_opts;

void ruler_defaults(ruler_opts *o);

/* Task names in the order above. */
const char *ruler_task_name(int i);
/* Index of a task name, or -1. */
int ruler_task_index(const char *name);
int ruler_task_max_new(int task);
/* 1 if the task needs the essay haystack. */
int ruler_task_needs_essays(int task);
/* 1 for qa_1 (SQuAD), 2 for qa_2 (HotpotQA), 0 for the synthetic tasks. */
int ruler_task_qa(int task);

/* Appends n_samples cases of the task at length (tokens). Case ids "TASK-L<length>-<i>",
 * task "ruler:TASK". Sample i depends only on (seed, split, task, length, i). 0, or -1 with err. */
int ruler_generate(const ruler_opts *o, int task, int length, int n_samples, tc_list *out, char *err,
                   size_t errlen);

/* 1 if a generated item (key, value, variable, word) belongs to the split: the low bit of
 * its FNV-1a hash, so the two splits never share one. */
int ruler_in_split(const char *item, wl_split split);

/* The word lists (ruler_words.c). */
const char *const *ruler_adjectives(int *n);
const char *const *ruler_nouns(int *n);
const char *const *ruler_verbs(int *n);
#endif
