/* Shared between the RULER generator files (ruler.c, ruler_niah.c, ruler_aggr.c). */
#ifndef KV_RULER_INTERNAL_H
#define KV_RULER_INTERNAL_H
#include "ruler.h"
#include "../kernels/strbuf.h"
#include "wl_rng.h"
#include "ruler_qa.h"

enum { R_NIAH, R_VT, R_CWE, R_FWE, R_QA };
enum { HAY_NOISE, HAY_ESSAY, HAY_NEEDLE, HAY_SQUAD, HAY_HOTPOT };
enum { KEY_WORDS, KEY_NUMBERS, KEY_UUIDS };

typedef struct {
    const char *name;
    int family, hay, key_kind, value_kind;
    int n_keys, n_values, n_queries;
    int max_new;
} ruler_task_def;

extern const ruler_task_def RULER_TASKS[RULER_N_TASKS];

#define RULER_NOISE "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."

typedef struct {
    const ruler_opts *o;
    const ruler_task_def *def;
    int length;
    const char **words;      /* essay words (pointers into o->essays), whitespace-split */
    int *word_len;
    int n_words;              /* the split's half of them */
    int sample;              /* the sample being built (qa: question index) */
} ruler_ctx;

/* Builds one sample with haystack size h (units per family: noise lines, essay words,
 * distractor needles, distinct words, coded words) from the stream r. Sets the prompt
 * (tc_set_prompt, so prompt_tokens is measured), answers, scorer, max_new_tokens,
 * depth. 0, or -1 on allocation failure. */
int ruler_build_niah(const ruler_ctx *x, int h, wl_rng r, tc_case *c);
int ruler_build_vt(const ruler_ctx *x, int h, wl_rng r, tc_case *c);
int ruler_build_cwe(const ruler_ctx *x, int h, wl_rng r, tc_case *c);
int ruler_build_fwe(const ruler_ctx *x, int h, wl_rng r, tc_case *c);
/* qa_1/qa_2: h documents (the gold ones at least), ruler_qa.c. */
int ruler_build_qa(const ruler_ctx *x, int h, wl_rng r, tc_case *c);

/* A set of strings (copies), for drawing distinct keys and values. */
typedef struct { char **slot; size_t cap, n; } strset;
/* 1 if added, 0 if already present, -1 on allocation failure. */
int strset_add(strset *s, const char *v);
int strset_has(const strset *s, const char *v);
void strset_free(strset *s);

/* Random key/value of a kind into buf (>= 40 bytes), one of the split's (ruler_in_split). */
void ruler_random_item(wl_rng *r, int kind, wl_split split, char *buf);
/* Occurrences of needle in hay (overlapping allowed). */
int ruler_count(const char *hay, const char *needle);
#endif
