/* RULER's variable tracking, common words extraction and frequent words extraction,
 * following scripts/data/synthetic/{variable_tracking,common_words_extraction,
 * freq_words_extraction}.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ruler_internal.h"

/* ---- vt ---------------------------------------------------------------------------- */

enum { VT_VARS = 5, VT_ICL_NOISE = 20 };

static void random_upper(wl_rng *r, int k, wl_split split, char *out) {
    do {
        for (int i = 0; i < k; i++) out[i] = (char)('A' + wl_below(r, 26));
        out[k] = 0;
    } while (!ruler_in_split(out, split));
}

/* A 5-digit value of the split. */
static int vt_value(wl_rng *r, wl_split split) {
    char buf[16];
    int v;
    do {
        v = 10000 + (int)wl_below(r, 90000);
        snprintf(buf, sizeof buf, "%d", v);
    } while (!ruler_in_split(buf, split));
    return v;
}

/* One chain of VT_VARS distinct variables (k letters) in h noise lines, written to b.
 * Each line as generate_chains writes it: "VAR X = 12345", then "VAR Y = VAR X " (with
 * its trailing space, which the ". \n" cleanup does not reach). */
static void vt_context(wl_rng *r, int h, int k, wl_split split, char vars[VT_VARS][8], int value, strbuf *b) {
    for (int i = 0; i < VT_VARS; i++) {
        int dup;
        do {
            random_upper(r, k, split, vars[i]);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= !strcmp(vars[i], vars[j]);
        } while (dup);
    }
    int *pick = malloc((size_t)h * sizeof *pick), *at = malloc((size_t)h * sizeof *at);
    if (!pick || !at) { b->oom = 1; free(pick); free(at); return; }
    for (int i = 0; i < h; i++) { pick[i] = i; at[i] = -1; }
    for (int i = 0; i < VT_VARS; i++) {           /* sorted(random.sample(range(h), 5)) */
        int j = i + (int)wl_below(r, (uint64_t)(h - i));
        int t = pick[i]; pick[i] = pick[j]; pick[j] = t;
    }
    for (int i = 1; i < VT_VARS; i++)
        for (int j = i; j > 0 && pick[j] < pick[j - 1]; j--) { int t = pick[j]; pick[j] = pick[j - 1]; pick[j - 1] = t; }
    for (int i = 0; i < VT_VARS; i++) at[pick[i]] = i;
    for (int i = 0; i < h; i++) {
        if (at[i] == 0) sb_printf(b, "VAR %s = %d\n", vars[0], value);
        else if (at[i] > 0) sb_printf(b, "VAR %s = VAR %s \n", vars[at[i]], vars[at[i] - 1]);   /* RULER's trailing space */
        sb_puts(b, RULER_NOISE);
        if (i + 1 < h) sb_putc(b, '\n');
    }
    free(pick);
    free(at);
}

static const char VT_INTRO[] = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";

int ruler_build_vt(const ruler_ctx *x, int h, wl_rng r, tc_case *c) {
    char ivars[VT_VARS][8], vars[VT_VARS][8];
    strbuf icl = {0}, ictx = {0}, ctx = {0}, body = {0}, q = {0}, pre = {0};
    int rc = -1;
    wl_split sp = x->o->split;
    int ivalue = vt_value(&r, sp), value;
    do value = vt_value(&r, sp);
    while (value == ivalue);
    vt_context(&r, VT_ICL_NOISE, 3, sp, ivars, ivalue, &ictx);   /* the worked example */
    vt_context(&r, h, 5, sp, vars, value, &ctx);
    if (ictx.oom || ctx.oom) goto out;
    /* variable_tracking.py: the example is template + answer_prefix (which ends in ": "),
     * then " " + the variables + "\n", then "\n" before the task: a double space, a blank line */
    sb_printf(&icl, "%s%s\nQuestion: Find all variables that are assigned the value %d in the text above. Answer: "
              "According to the chain(s) of variable assignment in the text above, %d variables are assigned the "
              "value %d, they are:  %s %s %s %s %s\n\n", VT_INTRO, ictx.p, ivalue, VT_VARS, ivalue,
              ivars[0], ivars[1], ivars[2], ivars[3], ivars[4]);
    sb_printf(&body, "%s%s%s", icl.p ? icl.p : "", VT_INTRO, ctx.p);
    sb_printf(&q, "\nQuestion: Find all variables that are assigned the value %d in the text above.", value);
    sb_printf(&pre, "Answer: According to the chain(s) of variable assignment in the text above, %d variables are "
              "assigned the value %d, they are:", VT_VARS, value);
    if (icl.oom || body.oom || q.oom || pre.oom) goto out;
    if (tc_set_prompt(c, x->o->tok, x->o->use_chat, body.p, q.p, pre.p)) goto out;
    const char *ans[VT_VARS] = {vars[0], vars[1], vars[2], vars[3], vars[4]};
    if (tc_set_answers(c, ans, VT_VARS)) goto out;
    free(c->context); free(c->question);
    c->context = ctx.p;
    ctx = (strbuf){0};
    c->question = strdup(q.p + 1);
    if (!c->question) goto out;
    c->scorer = TC_SCORE_MATCH_ALL;
    c->max_new_tokens = x->def->max_new;
    rc = 0;
out:
    sb_free(&icl); sb_free(&ictx); sb_free(&ctx); sb_free(&body); sb_free(&q); sb_free(&pre);
    return rc;
}

/* ---- cwe --------------------------------------------------------------------------- */

static const char CWE_INTRO[] = "Below is a numbered list of words. In these words, some appear more often than others. "
                                "Memorize the ones that appear most often.\n";
static const char CWE_QUESTION[] = "\nQuestion: What are the 10 most common words in the above list?";
static const char CWE_PREFIX[] = "Answer: The top 10 words that appear most often in the list are:";

/* n distinct words: the word lists while they last, then "adjective-noun" compounds
 * (RULER falls back to a larger English list). Pointers into store (n * 40 bytes). */
static int draw_words(wl_rng *r, wl_split split, int n, char *store, char **out) {
    int na, nn, nv;
    const char *const *adj = ruler_adjectives(&na), *const *noun = ruler_nouns(&nn), *const *verb = ruler_verbs(&nv);
    int *idx = malloc((size_t)(na + nn + nv) * sizeof *idx), pool = 0;
    if (!idx) return -1;
    for (int k = 0; k < na + nn + nv; k++)   /* the split's words of the lists */
        if (ruler_in_split(k < na ? adj[k] : k < na + nn ? noun[k - na] : verb[k - na - nn], split)) idx[pool++] = k;
    if (n <= pool) {
        for (int i = 0; i < n; i++) {
            int j = i + (int)wl_below(r, (uint64_t)(pool - i));
            int t = idx[i]; idx[i] = idx[j]; idx[j] = t;
            int k = idx[i];
            const char *w = k < na ? adj[k] : k < na + nn ? noun[k - na] : verb[k - na - nn];
            out[i] = store + (size_t)i * 40;
            snprintf(out[i], 40, "%s", w);
        }
        free(idx);
        return 0;
    }
    free(idx);
    strset seen = {0};
    for (int i = 0; i < n; i++) {
        out[i] = store + (size_t)i * 40;
        int added;
        do {
            ruler_random_item(r, KEY_WORDS, split, out[i]);
            added = strset_add(&seen, out[i]);
        } while (added == 0);
        if (added < 0) { strset_free(&seen); return -1; }
    }
    strset_free(&seen);
    return 0;
}

/* "1. w 2. w ..." of words[0..10) x common + words[10..n) x rare, shuffled. */
static void numbered_list(wl_rng *r, char **words, int n, int common, int rare, strbuf *b) {
    int total = 10 * common + (n - 10) * rare;
    char **list = malloc((size_t)(total > 0 ? total : 1) * sizeof *list);
    if (!list) { b->oom = 1; return; }
    int k = 0;
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < common; j++) list[k++] = words[i];
    for (int i = 10; i < n; i++)
        for (int j = 0; j < rare; j++) list[k++] = words[i];
    wl_shuffle(r, list, total, sizeof *list);
    for (int i = 0; i < total; i++) sb_printf(b, "%s%d. %s", i ? " " : "", i + 1, list[i]);
    free(list);
}

int ruler_build_cwe(const ruler_ctx *x, int h, wl_rng r, tc_case *c) {
    int small = x->length < 4096;            /* RULER's settings below 4K */
    int ex_n = small ? 20 : 40, ex_common = small ? 3 : 10, ex_rare = small ? 1 : 3;
    int common = small ? 6 : 30, rare = small ? 1 : 3;
    char *store = malloc((size_t)(h + ex_n) * 40);
    char **w = malloc((size_t)(h + ex_n) * sizeof *w);
    strbuf ex = {0}, ctx = {0}, body = {0}, shot = {0}, reply = {0};
    int rc = -1;
    if (!store || !w || draw_words(&r, x->o->split, h + ex_n, store, w)) goto out;
    numbered_list(&r, w + h, ex_n, ex_common, ex_rare, &ex);     /* the worked example */
    numbered_list(&r, w, h, common, rare, &ctx);
    if (ex.oom || ctx.oom) goto out;
    /* common_words_extraction.py formats the example with the whole template (chat turn and
     * answer prefix), adds " " + its answers, then "\n" and the task's own turn */
    sb_printf(&shot, "%s%s%s", CWE_INTRO, ex.p, CWE_QUESTION);
    sb_puts(&reply, CWE_PREFIX);
    for (int i = 0; i < 10; i++) sb_printf(&reply, " %d. %s", i + 1, w[h + i]);
    sb_printf(&body, "%s%s", CWE_INTRO, ctx.p);
    if (body.oom || shot.oom || reply.oom) goto out;
    if (tc_set_prompt_shot(c, x->o->tok, x->o->use_chat, shot.p, reply.p, body.p, CWE_QUESTION, CWE_PREFIX)) goto out;
    if (tc_set_answers(c, (const char *const *)w, 10)) goto out;
    free(c->context); free(c->question);
    c->context = ctx.p;
    ctx = (strbuf){0};
    c->question = strdup(CWE_QUESTION + 1);
    if (!c->question) goto out;
    c->scorer = TC_SCORE_MATCH_ALL;
    c->max_new_tokens = x->def->max_new;
    rc = 0;
out:
    free(store); free(w);
    sb_free(&ex); sb_free(&ctx); sb_free(&body); sb_free(&shot); sb_free(&reply);
    return rc;
}

/* ---- fwe --------------------------------------------------------------------------- */

static const char FWE_INTRO[] = "Read the following coded text and track the frequency of each coded word. Find the three "
                                "most frequently appeared coded words. ";
static const char FWE_QUESTION[] = "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are "
                                   "the three most frequently appeared words in the above coded text?";
static const char FWE_PREFIX[] = "Answer: According to the coded text above, the three most frequently appeared words are:";

/* Count of the word of rank k (1-based) among h words: floor(h k^-2 / zeta(2)). */
static int fwe_count(int h, int k) { return (int)(h * (1.0 / ((double)k * k)) / (M_PI * M_PI / 6.0)); }

int ruler_build_fwe(const ruler_ctx *x, int h, wl_rng r, tc_case *c) {
    int V = (x->length - x->def->max_new) / 50;          /* RULER: vocab = max_seq_length // 50 */
    if (V < 8) V = 8;
    char (*vocab)[8] = malloc((size_t)V * sizeof *vocab);
    const char **list = NULL;
    strset seen = {0};
    strbuf ctx = {0}, body = {0};
    int rc = -1;
    if (!vocab) goto out;
    for (int i = 0; i < V; i++) {
        int added;
        do {
            do {
                for (int j = 0; j < 6; j++) vocab[i][j] = (char)('a' + wl_below(&r, 26));
                vocab[i][6] = 0;
            } while (!ruler_in_split(vocab[i], x->o->split));
            added = strset_add(&seen, vocab[i]);
        } while (added == 0);
        if (added < 0) goto out;
    }
    snprintf(vocab[0], sizeof vocab[0], "...");           /* the top rank is noise */
    int total = 0;
    for (int k = 1; k <= V; k++) total += fwe_count(h, k);
    list = malloc((size_t)(total > 0 ? total : 1) * sizeof *list);
    if (!list) goto out;
    int n = 0;
    for (int k = 1; k <= V; k++)
        for (int j = fwe_count(h, k); j > 0; j--) list[n++] = vocab[k - 1];
    wl_shuffle(&r, list, n, sizeof *list);
    for (int i = 0; i < n; i++) {
        if (i) sb_putc(&ctx, ' ');
        sb_puts(&ctx, list[i]);
    }
    sb_printf(&body, "%s%s", FWE_INTRO, ctx.p ? ctx.p : "");
    if (ctx.oom || body.oom) goto out;
    if (tc_set_prompt(c, x->o->tok, x->o->use_chat, body.p, FWE_QUESTION, FWE_PREFIX)) goto out;
    const char *ans[3] = {vocab[1], vocab[2], vocab[3]};
    if (tc_set_answers(c, ans, 3)) goto out;
    free(c->context); free(c->question);
    c->context = ctx.p;
    ctx = (strbuf){0};
    c->question = strdup(FWE_QUESTION + 1);
    if (!c->question) goto out;
    c->scorer = TC_SCORE_MATCH_ALL;
    c->max_new_tokens = x->def->max_new;
    rc = 0;
out:
    free(vocab); free(list);
    strset_free(&seen);
    sb_free(&ctx); sb_free(&body);
    return rc;
}
