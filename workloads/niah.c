/* Needle-in-a-haystack prompt builder (see niah.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "niah.h"
#include "strbuf.h"
#include "tokspan.h"

struct niah_builder {
    niah_opts o;
    char *text;           /* the haystack, repeated to cover the longest length */
    size_t len;
    tok_spans sp;
    int needle_tokens;
};

static const char QUESTION_TAIL[] = " Don't give information outside the document or repeat your findings";

void niah_defaults(niah_opts *o) {
    memset(o, 0, sizeof *o);
    o->buffer = NIAH_BUFFER;
    o->max_new_tokens = NIAH_MAX_NEW;
    o->use_chat = 1;
}

void niah_default_depths(double d[NIAH_N_DEPTHS]) {
    for (int i = 0; i < NIAH_N_DEPTHS; i++) d[i] = 10.0 * i;
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

niah_builder *niah_open(const niah_opts *o, int max_length, char *err, size_t errlen) {
    if (!o->tok || !o->haystack || !o->haystack_len) { snprintf(err, errlen, "niah: no tokenizer or empty haystack"); return NULL; }
    niah_builder *b = calloc(1, sizeof *b);
    if (!b) { snprintf(err, errlen, "niah: out of memory"); return NULL; }
    b->o = *o;
    if (!b->o.buffer) b->o.buffer = NIAH_BUFFER;
    if (!b->o.max_new_tokens) b->o.max_new_tokens = NIAH_MAX_NEW;
    int once = tok_encode(o->tok, o->haystack, o->haystack_len, 0, NULL, 0);
    int reps = once > 0 ? max_length / once + 1 : 1;
    strbuf s = {0};
    for (int r = 0; r < reps; r++) sb_putn(&s, o->haystack, o->haystack_len);
    b->len = s.n;
    b->text = sb_take(&s);
    int needle = tok_encode(o->tok, " " NIAH_NEEDLE, strlen(" " NIAH_NEEDLE), 0, NULL, 0);
    if (!b->text || once < 0 || needle < 0) { snprintf(err, errlen, "niah: out of memory"); niah_close(b); return NULL; }
    b->needle_tokens = needle;
    if (tokspan_encode(o->tok, b->text, b->len, &b->sp, err, errlen)) { niah_close(b); return NULL; }
    return b;
}

void niah_close(niah_builder *b) {
    if (!b) return;
    tokspan_free(&b->sp);
    free(b->text);
    free(b);
}

/* Token boundary p (the start of token p) is a sentence end: token p-1 ends with '.'
 * (trailing whitespace aside) and the next character is not a digit or lowercase letter. */
static int sentence_end(const niah_builder *b, int p, size_t cut) {
    if (p <= 0) return 1;
    size_t at = b->sp.off[p], lo = b->sp.off[p - 1];
    size_t j = at;
    while (j > lo && is_space(b->text[j - 1])) j--;
    if (j == lo || b->text[j - 1] != '.') return 0;
    if (at >= cut) return 1;
    char c = b->text[at];
    return !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'));
}

static int make_prompt(const niah_builder *b, tc_case *c, const char *context) {
    strbuf q = {0};
    sb_printf(&q, "\n\n%s%s", NIAH_QUESTION, QUESTION_TAIL);
    char *question = sb_take(&q);
    int rc = !question ? -1 : tc_set_prompt(c, b->o.tok, b->o.use_chat, context, question, NIAH_ANSWER_PREFIX);
    free(question);
    return rc;
}

int niah_build(niah_builder *b, int length, double depth, tc_case *out, char *err, size_t errlen) {
    tc_case c;
    tc_case_init(&c);
    if (!(depth >= 0 && depth <= 100)) { snprintf(err, errlen, "niah: depth %g is outside 0..100", depth); return -1; }
    if (make_prompt(b, &c, "")) goto oom;
    int reserve = c.prompt_tokens + b->o.max_new_tokens;
    if (reserve < b->o.buffer) reserve = b->o.buffer;
    int C = length - reserve - b->needle_tokens;
    if (C < 1) {
        snprintf(err, errlen, "niah: length %d leaves no room for a haystack (template, question, needle and "
                 "answer take %d tokens)", length, reserve + b->needle_tokens);
        tc_case_free(&c);
        return -1;
    }
    if (C > b->sp.n) C = b->sp.n;
    for (int attempt = 0; attempt < 8; attempt++) {
        size_t cut = tokspan_char_floor(b->text, b->len, b->sp.off[C]);
        int p = (int)floor(depth / 100.0 * C + 0.5);
        while (p > 0 && !sentence_end(b, p, cut)) p--;
        size_t at = b->sp.off[p] < cut ? b->sp.off[p] : cut;
        strbuf s = {0};
        sb_putn(&s, b->text, at);
        if (at > 0 && !is_space(b->text[at - 1])) sb_putc(&s, ' ');
        sb_puts(&s, NIAH_NEEDLE);
        if (at < cut && !is_space(b->text[at])) sb_putc(&s, ' ');
        sb_putn(&s, b->text + at, cut - at);
        char *context = sb_take(&s);
        if (!context || make_prompt(b, &c, context)) { free(context); goto oom; }
        free(c.context);
        c.context = context;
        c.needle_token = p;
        c.context_tokens = C;
        c.depth_actual = C ? 100.0 * p / C : 0;
        int excess = c.prompt_tokens + b->o.max_new_tokens - length;
        if (excess <= 0) break;
        if (attempt == 7 || C <= excess + 1) {
            snprintf(err, errlen, "niah: cannot fit length %d (prompt %d tokens)", length, c.prompt_tokens);
            tc_case_free(&c);
            return -1;
        }
        C -= excess + 1;                      /* re-tokenisation merged differently: trim */
    }
    static const char *const refs[] = {"sandwich", "Dolores Park"};
    strbuf id = {0};
    sb_printf(&id, "niah-L%d-d%g", length, depth);
    c.id = sb_take(&id);
    c.task = strdup("niah");
    c.question = strdup(NIAH_QUESTION);
    c.reference = strdup(NIAH_NEEDLE);   /* scored by keywords; its likelihood is the whole needle's */
    if (!c.id || !c.task || !c.question || !c.reference || tc_set_answers(&c, refs, 2)) goto oom;
    c.scorer = TC_SCORE_NIAH;
    c.max_new_tokens = b->o.max_new_tokens;
    c.length = length;
    c.depth = depth;
    c.settings.question_after = b->o.question_after;
    *out = c;
    return 0;
oom:
    tc_case_free(&c);
    snprintf(err, errlen, "niah: out of memory");
    return -1;
}

int niah_grid(niah_builder *b, const int *lengths, int n_lengths, const double *depths, int n_depths,
              tc_list *out, char *err, size_t errlen) {
    for (int i = 0; i < n_lengths; i++)
        for (int j = 0; j < n_depths; j++) {
            tc_case c;
            if (niah_build(b, lengths[i], depths[j], &c, err, errlen)) return -1;
            if (tc_list_push(out, &c)) { snprintf(err, errlen, "niah: out of memory"); return -1; }
        }
    return 0;
}
