/* Needle in a haystack (gkamradt/LLMTest_NeedleInAHaystack), prompts measured in the
 * model's tokens.
 *
 * For a length L and depth d%: the context gets L - max(buffer, T + max_new_tokens)
 * tokens, T being the tokens of the prompt with an empty context (chat template,
 * question, answer prefix); buffer is gkamradt's 200. The haystack (essays, repeated if
 * too short) is cut to that many tokens minus the needle's; the needle goes in at d% of
 * the cut haystack's tokens, moved back to the previous sentence end (a token ending in
 * '.', the next character not a digit or lowercase letter; the start counts; so d = 100
 * puts it after the last whole sentence). Then prompt tokens + max_new_tokens <= L,
 * re-checked after assembly.
 *
 * The prompt: the model's chat template around "<context>\n\n<question> Don't give
 * information outside the document or repeat your findings", as the original test asks
 * it; an answer prefix after the template (KVCache-Factory's "The best thing to do in San
 * Francisco is") only when one is set. Scored TC_SCORE_NIAH against the answer keywords
 * (default {"sandwich", "Dolores Park"}: all must appear, case-insensitive).
 *
 * Variations (defaults: the classic test):
 *   needle/question/answers  another needle, its question and answer keywords
 *   needles N                the needle plus N-1 distractor needles of the same form about
 *                            other cities (multi-key retrieval), at depths d + k*100/N mod 100
 *   split, sample            where the haystack text starts: test samples start in the first
 *                            half of the haystack (test sample 0 at its start, the classic
 *                            prompt), dev samples in the second half, at fixed offsets s/16 of
 *                            the half moved to the next line start. Disjoint starts; texts
 *                            overlap only when a prompt is longer than the gap between starts. */
#ifndef KV_NIAH_H
#define KV_NIAH_H
#include <stddef.h>
#include "textcase.h"

#define NIAH_NEEDLE "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day."
#define NIAH_QUESTION "What is the best thing to do in San Francisco?"
#define NIAH_ANSWER_PREFIX "The best thing to do in San Francisco is"
#define NIAH_ANSWERS "sandwich,Dolores Park"
enum { NIAH_BUFFER = 200, NIAH_MAX_NEW = 64, NIAH_N_DEPTHS = 11, NIAH_MAX_SAMPLES = 16, NIAH_MAX_NEEDLES = 8 };
enum { NIAH_TEST = 0, NIAH_DEV = 1 };

typedef struct {
    const kv_tokenizer *tok;        /* required */
    const char *haystack;           /* text (haystack_load) */
    size_t haystack_len;
    int buffer;                     /* 0: NIAH_BUFFER */
    int max_new_tokens;             /* 0: NIAH_MAX_NEW */
    int use_chat;                   /* 1 (default via niah_defaults) */
    int question_after;             /* recorded in each case's settings */
    const char *needle;             /* NULL: NIAH_NEEDLE */
    const char *question;           /* NULL: NIAH_QUESTION */
    const char *answers;            /* comma-separated keywords; NULL: NIAH_ANSWERS */
    const char *answer_prefix;      /* NULL or "": none (the original prompt) */
    int needles;                    /* needles per prompt, 1..NIAH_MAX_NEEDLES (0: 1) */
    int split;                      /* NIAH_TEST or NIAH_DEV */
    int sample;                     /* haystack start, 0..NIAH_MAX_SAMPLES-1 */
} niah_opts;

void niah_defaults(niah_opts *o);
/* 0, 10, ..., 100 */
void niah_default_depths(double depths[NIAH_N_DEPTHS]);

typedef struct niah_builder niah_builder;
/* Checks the needle settings: every answer keyword occurs in the needle (ASCII
 * case-insensitive), keywords are not empty, needles in range, no distractor holds a
 * keyword. 0, or -1 with a reason naming the flag (--needle, --answer, --needles). */
int niah_check(const niah_opts *o, char *err, size_t errlen);
/* Tokenises the haystack from the start of (split, sample), wrapped and repeated until it
 * covers max_length tokens. */
niah_builder *niah_open(const niah_opts *o, int max_length, char *err, size_t errlen);
void niah_close(niah_builder *b);
/* One case; id "niah-L<length>-d<depth>", "-s<sample>" appended for samples > 0. 0, or -1
 * with err (length too small, ...). */
int niah_build(niah_builder *b, int length, double depth, tc_case *out, char *err, size_t errlen);
/* Every (length, depth) pair, lengths outer. 0, or -1 with err. */
int niah_grid(niah_builder *b, const int *lengths, int n_lengths, const double *depths, int n_depths,
              tc_list *out, char *err, size_t errlen);
#endif
