/* Text workloads: one evaluation case, its prompt, and its official score.
 *
 * A case's prompt is built from five pieces, in this order:
 *   tpl_head       chat template up to the user message (special tokens parsed); RULER cwe
 *                  puts its worked example's whole turn before it (tc_set_prompt_shot)
 *   body_context   instruction + context text (data: special tokens NOT parsed)
 *   body_question  question text and the rest of the dataset template (data)
 *   tpl_tail       end of the user turn + assistant header (special tokens parsed)
 *   answer_prefix  text the assistant turn starts with (data)
 * prompt is their concatenation. For datasets scored without a chat template the tpl_*
 * pieces are "".
 *
 * Fair comparison: every method sees the same token ids. tc_tokenize encodes the pieces
 * one by one and concatenates the ids, so
 *   context_part  = BOS? + tpl_head + body_context           ids [0, n_context)
 *   question_part = body_question + tpl_tail + answer_prefix  ids [n_context, n)
 * are identical whether the question is inside the compressed prompt (question-aware,
 * the default: compress all n ids) or prefilled after it (question_after: compress the
 * context part, then prefill the question part on top of the compressed cache). */
#ifndef KV_TEXTCASE_H
#define KV_TEXTCASE_H
#include <stddef.h>
#include <stdint.h>
#include "../model/tokenizer.h"

typedef enum {
    TC_SCORE_NIAH = 0,     /* 100 if every reference occurs (case-insensitive), else 0 */
    TC_SCORE_MATCH_ALL,    /* RULER string_match_all: % of references found */
    TC_SCORE_MATCH_PART,   /* RULER string_match_part: 100 if any reference is found */
    TC_SCORE_QA_F1,        /* SQuAD-normalised token F1, max over references */
    TC_SCORE_ROUGE_L,      /* LongBench ROUGE-L (pltrdy rouge, summary level), max over references */
    TC_SCORE_CLASSIFICATION, /* LongBench classification (uses classes) */
    TC_SCORE_RETRIEVAL,    /* LongBench passage retrieval ("Paragraph N") */
    TC_SCORE_COUNT,        /* LongBench passage count */
    TC_SCORE_CODE_SIM,     /* LongBench code_sim (fuzzy ratio of the first code line) */
    TC_SCORE_CHOICE,       /* InfiniteBench En.MC: answers = {option text, letter} */
    TC_SCORE_CODE_DEBUG,   /* InfiniteBench Code.Debug: answers = {function, letter} */
    TC_SCORE_FIRST_INT,    /* InfiniteBench PassKey/Number: first integer equals */
    TC_SCORE_KV_WORD,      /* InfiniteBench Retrieve.KV: the value is one of the words */
    TC_SCORE_GSM8K,        /* last number in the output equals the reference */
    TC_SCORE_ROUGE_LSUM,   /* InfiniteBench En.Sum: rouge-score rougeLsum, max over references */
    TC_SCORE_COUNT_
} tc_scorer;

const char *tc_scorer_name(tc_scorer s);        /* "niah", "string_match_all", ... */

/* Recorded with every case so a result row says how the comparison was set up. */
typedef struct {
    char template_name[16];   /* "chatml", "llama3", "inst" or "none" */
    int question_after;       /* 0: question-aware (default); 1: context compressed first */
} tc_settings;

typedef struct {
    char *id;                 /* unique within its task */
    char *task;               /* "niah", "ruler:vt", "longbench:qasper", "gsm8k", ... */
    char *context;            /* the context text alone, as it appears in the prompt */
    char *question;           /* the question alone ("" if the task has none) */
    char *tpl_head, *body_context, *body_question, *tpl_tail, *answer_prefix;
    char *prompt;             /* the five pieces concatenated */
    char **answers;           /* references */
    char *reference;          /* the reference answer as text, for its teacher-forced likelihood
                                 (NULL: answers[0]) */
    int n_answers;
    char **classes;           /* classification: all class names */
    int n_classes;
    int max_new_tokens;
    tc_scorer scorer;
    int first_line_only;      /* score only the output's first line (after leading \n) */
    int stop_newline;         /* generation should also stop at a newline (LongBench samsum) */
    int min_new_tokens;       /* stop tokens are masked until this many are generated (samsum: 1) */
    /* Metadata (-1 where it does not apply). */
    int length;               /* requested length in tokens (NIAH/RULER), or the data's length field */
    double depth;             /* requested needle depth, % of the context */
    double depth_actual;      /* where the needle landed, % of the context tokens */
    int needle_token;         /* context tokens before the needle */
    int context_tokens;       /* tokens of the haystack/context text alone */
    int prompt_tokens;        /* tc_tokenize count (BOS and template included) */
    int truncated;            /* 1 if cut in the middle to fit the token budget */
    tc_settings settings;
} tc_case;

typedef struct {
    tc_case *v;
    int n, cap;
    int skipped;              /* input records skipped with an error message */
} tc_list;

void tc_case_init(tc_case *c);          /* zero strings, metadata -1, template "none" */
void tc_case_free(tc_case *c);          /* frees the strings; c is re-initialised */
/* Appends a copy of the structure (ownership of its strings moves to the list);
 * 0, or -1 on allocation failure (c is then freed). */
int tc_list_push(tc_list *l, tc_case *c);
void tc_list_free(tc_list *l);

/* Template name of the model's chat format: "chatml", "llama3", "inst". */
const char *tc_template_name(const kv_tokenizer *t);

/* Sets the prompt pieces (copies of the strings) and prompt; use_chat wraps the body in
 * the model's chat template with its default system turn. Also fills
 * settings.template_name and prompt_tokens (when t is given). 0, or -1 on allocation
 * failure. */
int tc_set_prompt(tc_case *c, const kv_tokenizer *t, int use_chat, const char *body_context,
                  const char *body_question, const char *answer_prefix);

/* tc_set_prompt after a worked example in a turn of its own (RULER's few-shot form):
 * tpl_head becomes head + shot_user + tail + shot_reply + "\n" + head, where head and tail
 * are the chat template's pieces (both "" without one). The example is generated text
 * (no data), so it is encoded with the template. */
int tc_set_prompt_shot(tc_case *c, const kv_tokenizer *t, int use_chat, const char *shot_user, const char *shot_reply,
                       const char *body_context, const char *body_question, const char *answer_prefix);

/* Token ids of the case (see the top of this file); *n_context marks the end of the
 * context part. Caller frees *ids. 0, or -1 on allocation failure. */
int tc_tokenize(const kv_tokenizer *t, const tc_case *c, int32_t **ids, int *n, int *n_context);

/* Sets the answers (copies). 0 or -1. */
int tc_set_answers(tc_case *c, const char *const *answers, int n);

/* The official score of one model output, in [0, 100]. */
double tc_score(const tc_case *c, const char *output);

/* Tokens the chat template (or none), the answer prefix and BOS add around a body: what a
 * prompt budget must leave besides the body. -1 on allocation failure. */
int tc_wrapper_tokens(const kv_tokenizer *t, int use_chat, const char *answer_prefix);

/* Dataset prompts (tc_template.c). tpl holds "{context}" and other "{name}" fields:
 * fills the n named fields (not context), splits the result at {context} into pre and
 * post, forms body = pre + context + post, cuts body in the middle to max_tokens tokens
 * (if max_tokens > 0; LongBench/InfiniteBench truncation, before any chat template),
 * then sets the prompt with body_context = the body up to the end of the context and
 * body_question = the rest. Also sets c->context (the kept context text) and
 * c->truncated. 0, or -1 with err. */
int tc_build_from_template(tc_case *c, const kv_tokenizer *t, int use_chat, const char *tpl, const char *context,
                           const char *const *names, const char *const *values, int n, int max_tokens,
                           const char *answer_prefix, char *err, size_t errlen);

/* strdup that tolerates NULL (gives ""); NULL only on allocation failure. */
char *tc_strdup(const char *s);
#endif
