/* Needle-in-a-haystack prompt builder (see niah.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "metrics.h"
#include "niah.h"
#include "../kernels/strbuf.h"
#include "tokspan.h"

struct niah_builder {
    niah_opts o;
    char *text;           /* the haystack from the sample's start, wrapped to cover the longest length */
    size_t len;
    tok_spans sp;
    const char *needle[NIAH_MAX_NEEDLES];   /* [0] the needle, then the distractors */
    int needle_tokens[NIAH_MAX_NEEDLES];
    int n_needles;
};

static const char QUESTION_TAIL[] = " Don't give information outside the document or repeat your findings";

/* Multi-key distractors: the classic needle's form, other cities (no keyword of the default answer). */
static const char *const DISTRACTORS[NIAH_MAX_NEEDLES - 1] = {
    "The best thing to do in Boston is walk the Freedom Trail and eat cannoli in the North End.",
    "The best thing to do in Chicago is take an architecture boat tour on the river.",
    "The best thing to do in Seattle is ride the ferry to Bainbridge Island at sunset.",
    "The best thing to do in Austin is watch the bats fly out from under the Congress Avenue bridge.",
    "The best thing to do in Denver is hike the trails of Red Rocks on a clear morning.",
    "The best thing to do in Portland is browse the shelves of a bookstore on a rainy afternoon.",
    "The best thing to do in Miami is swim at South Beach and eat a Cuban pastry.",
};

void niah_defaults(niah_opts *o) {
    memset(o, 0, sizeof *o);
    o->buffer = NIAH_BUFFER;
    o->max_new_tokens = NIAH_MAX_NEW;
    o->use_chat = 1;
    o->needles = 1;
}

void niah_default_depths(double d[NIAH_N_DEPTHS]) {
    for (int i = 0; i < NIAH_N_DEPTHS; i++) d[i] = 10.0 * i;
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

static const char *needle_of(const niah_opts *o) { return o->needle && *o->needle ? o->needle : NIAH_NEEDLE; }
static const char *question_of(const niah_opts *o) { return o->question && *o->question ? o->question : NIAH_QUESTION; }
static const char *answers_of(const niah_opts *o) { return o->answers && *o->answers ? o->answers : NIAH_ANSWERS; }

/* The comma-separated keywords of list into buf (NUL-separated), pointers in kw[]; the count,
 * or -1 (an empty keyword, or too many). */
static int split_keywords(const char *list, char *buf, size_t cap, const char **kw, int max) {
    snprintf(buf, cap, "%s", list);
    int n = 0;
    for (char *p = buf;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        while (is_space(*p)) p++;
        size_t L = strlen(p);
        while (L && is_space(p[L - 1])) p[--L] = 0;
        if (!L || n == max) return -1;
        kw[n++] = p;
        if (!comma) return n;
        p = comma + 1;
    }
}

int niah_check(const niah_opts *o, char *err, size_t errlen) {
    int nn = o->needles ? o->needles : 1;
    if (nn < 1 || nn > NIAH_MAX_NEEDLES) { snprintf(err, errlen, "--needles %d: expected 1..%d", nn, NIAH_MAX_NEEDLES); return -1; }
    if (o->sample < 0 || o->sample >= NIAH_MAX_SAMPLES) { snprintf(err, errlen, "--samples: at most %d", NIAH_MAX_SAMPLES); return -1; }
    char buf[1024];
    const char *kw[32];
    int k = split_keywords(answers_of(o), buf, sizeof buf, kw, 32);
    if (k < 0) { snprintf(err, errlen, "--answer '%s': expected 1 to 32 comma-separated keywords, none empty", answers_of(o)); return -1; }
    for (int i = 0; i < k; i++) {
        if (!metric_contains_ci(needle_of(o), kw[i])) {
            snprintf(err, errlen, "--answer keyword '%s' is not in the needle '%s': the task could not be answered", kw[i], needle_of(o));
            return -1;
        }
        for (int d = 0; d + 1 < nn; d++)
            if (metric_contains_ci(DISTRACTORS[d], kw[i])) {
                snprintf(err, errlen, "--answer keyword '%s' also occurs in distractor needle %d ('%s'): use fewer --needles "
                         "or another keyword", kw[i], d + 2, DISTRACTORS[d]);
                return -1;
            }
    }
    return 0;
}

/* Where the (split, sample) text starts: a fixed fraction of its half of the haystack,
 * moved to the next line start. Test sample 0 is the haystack's start. */
static size_t sample_start(const char *hay, size_t len, int split, int sample) {
    size_t half = len / 2, off = (split == NIAH_DEV ? half : 0) + (size_t)sample * (half / NIAH_MAX_SAMPLES);
    if (off == 0 || off >= len) return off >= len ? 0 : off;
    const char *nl = memchr(hay + off, '\n', len - off);
    return nl && (size_t)(nl + 1 - hay) < len ? (size_t)(nl + 1 - hay) : off;
}

niah_builder *niah_open(const niah_opts *o, int max_length, char *err, size_t errlen) {
    if (!o->tok || !o->haystack || !o->haystack_len) { snprintf(err, errlen, "niah: no tokenizer or empty haystack"); return NULL; }
    if (niah_check(o, err, errlen)) return NULL;
    niah_builder *b = calloc(1, sizeof *b);
    if (!b) { snprintf(err, errlen, "niah: out of memory"); return NULL; }
    b->o = *o;
    if (!b->o.buffer) b->o.buffer = NIAH_BUFFER;
    if (!b->o.max_new_tokens) b->o.max_new_tokens = NIAH_MAX_NEW;
    b->n_needles = o->needles ? o->needles : 1;
    /* Text from the sample's start, wrapping around; a token is rarely over 16 bytes, so
     * 16 bytes a token (plus a margin) covers max_length tokens. */
    size_t want = (size_t)max_length * 16 + 4096, start = sample_start(o->haystack, o->haystack_len, o->split, o->sample);
    strbuf s = {0};
    sb_putn(&s, o->haystack + start, o->haystack_len - start);
    while (s.n < want && !s.oom) sb_putn(&s, o->haystack, o->haystack_len);
    if (s.n > 2 * want) {                      /* cut long texts at whitespace past want */
        size_t cut = want;
        while (cut < s.n && !is_space(s.p[cut])) cut++;
        s.n = cut;
        if (s.p) s.p[cut] = 0;
    }
    b->len = s.n;
    b->text = sb_take(&s);
    if (!b->text) { snprintf(err, errlen, "niah: out of memory"); niah_close(b); return NULL; }
    b->needle[0] = needle_of(o);
    for (int k = 1; k < b->n_needles; k++) b->needle[k] = DISTRACTORS[k - 1];
    for (int k = 0; k < b->n_needles; k++) {
        strbuf t = {0};
        sb_printf(&t, " %s", b->needle[k]);
        char *sp = sb_take(&t);
        b->needle_tokens[k] = sp ? tok_encode(o->tok, sp, strlen(sp), 0, NULL, 0) : -1;
        free(sp);
        if (b->needle_tokens[k] < 0) { snprintf(err, errlen, "niah: out of memory"); niah_close(b); return NULL; }
    }
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
    sb_printf(&q, "\n\n%s%s", question_of(&b->o), QUESTION_TAIL);
    char *question = sb_take(&q);
    const char *prefix = b->o.answer_prefix ? b->o.answer_prefix : "";
    int rc = !question ? -1 : tc_set_prompt(c, b->o.tok, b->o.use_chat, context, question, prefix);
    free(question);
    return rc;
}

/* The context: the cut haystack text[0, cut) with needle k inserted at byte at[k]
 * (needles at one place go in their order). */
static char *insert_needles(const niah_builder *b, const size_t *at, size_t cut) {
    int order[NIAH_MAX_NEEDLES];
    for (int k = 0; k < b->n_needles; k++) {           /* insertion sort by position, stable */
        int j = k;
        while (j > 0 && at[order[j - 1]] > at[k]) { order[j] = order[j - 1]; j--; }
        order[j] = k;
    }
    strbuf s = {0};
    size_t from = 0;
    for (int i = 0; i < b->n_needles; i++) {
        int k = order[i];
        sb_putn(&s, b->text + from, at[k] - from);
        from = at[k];
        if (s.n > 0 && !is_space(s.p[s.n - 1])) sb_putc(&s, ' ');
        sb_puts(&s, b->needle[k]);
        if (from < cut && !is_space(b->text[from])) sb_putc(&s, ' ');
    }
    sb_putn(&s, b->text + from, cut - from);
    return sb_take(&s);
}

int niah_build(niah_builder *b, int length, double depth, tc_case *out, char *err, size_t errlen) {
    tc_case c;
    tc_case_init(&c);
    if (!(depth >= 0 && depth <= 100)) { snprintf(err, errlen, "niah: depth %g is outside 0..100", depth); return -1; }
    if (make_prompt(b, &c, "")) goto oom;
    int reserve = c.prompt_tokens + b->o.max_new_tokens, needle_tokens = 0;
    if (reserve < b->o.buffer) reserve = b->o.buffer;
    for (int k = 0; k < b->n_needles; k++) needle_tokens += b->needle_tokens[k];
    int C = length - reserve - needle_tokens;
    if (C < 1) {
        snprintf(err, errlen, "niah: length %d leaves no room for a haystack (template, question, needle%s and "
                 "answer take %d tokens)", length, b->n_needles > 1 ? "s" : "", reserve + needle_tokens);
        tc_case_free(&c);
        return -1;
    }
    if (C > b->sp.n) C = b->sp.n;
    for (int attempt = 0; attempt < 8; attempt++) {
        size_t cut = tokspan_char_floor(b->text, b->len, b->sp.off[C]), at[NIAH_MAX_NEEDLES];
        int p0 = 0;
        for (int k = 0; k < b->n_needles; k++) {    /* distractors spread over the other depths */
            double d = k ? fmod(depth + 100.0 * k / b->n_needles, 100.0) : depth;
            int p = (int)floor(d / 100.0 * C + 0.5);
            while (p > 0 && !sentence_end(b, p, cut)) p--;
            at[k] = b->sp.off[p] < cut ? b->sp.off[p] : cut;
            if (!k) p0 = p;
        }
        char *context = insert_needles(b, at, cut);
        if (!context || make_prompt(b, &c, context)) { free(context); goto oom; }
        free(c.context);
        c.context = context;
        c.needle_token = p0;
        c.context_tokens = C;
        c.depth_actual = C ? 100.0 * p0 / C : 0;
        int excess = c.prompt_tokens + b->o.max_new_tokens - length;
        if (excess <= 0) break;
        if (attempt == 7 || C <= excess + 1) {
            snprintf(err, errlen, "niah: cannot fit length %d (prompt %d tokens)", length, c.prompt_tokens);
            tc_case_free(&c);
            return -1;
        }
        C -= excess + 1;                      /* re-tokenisation merged differently: trim */
    }
    char kwbuf[1024];
    const char *kw[32];
    int nk = split_keywords(answers_of(&b->o), kwbuf, sizeof kwbuf, kw, 32);
    strbuf id = {0};
    sb_printf(&id, "niah-L%d-d%g", length, depth);
    if (b->o.sample > 0) sb_printf(&id, "-s%d", b->o.sample);
    c.id = sb_take(&id);
    c.task = strdup("niah");
    c.question = strdup(question_of(&b->o));
    c.reference = strdup(needle_of(&b->o));   /* scored by keywords; its likelihood is the whole needle's */
    if (!c.id || !c.task || !c.question || !c.reference || nk < 1 || tc_set_answers(&c, kw, nk)) goto oom;
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
