/* RULER's needle-in-a-haystack family (niah_single_*, niah_multikey_*, niah_multivalue,
 * niah_multiquery), following scripts/data/synthetic/niah.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ruler_internal.h"

enum { MAX_NEEDLES = 16, ITEM = 40 };

/* Word indices where each sentence starts (RULER splits the essay text with NLTK; here a
 * word ending in . ! or ? (a closing quote or bracket aside) ends a sentence). */
static int sentence_starts(const ruler_ctx *x, int h, int *starts) {
    int n = 0;
    starts[n++] = 0;
    for (int i = 0; i + 1 < h; i++) {
        int w = i % x->n_words, L = x->word_len[w];
        const char *s = x->words[w];
        while (L > 1 && strchr("\"')]", s[L - 1])) L--;
        if (strchr(".!?", s[L - 1])) starts[n++] = i + 1;
    }
    starts[n] = h;
    return n;
}

static void put_words(strbuf *b, const ruler_ctx *x, int from, int to) {
    for (int i = from; i < to; i++) {
        if (i > from) sb_putc(b, ' ');
        int w = i % x->n_words;
        sb_putn(b, x->words[w], (size_t)x->word_len[w]);
    }
}

static int key_clash(const char *k, char keys[][ITEM], int nk) {
    for (int i = 0; i < nk; i++)
        if (strstr(k, keys[i]) || strstr(keys[i], k)) return 1;
    return 0;
}

static int build_once(const ruler_ctx *x, int h, wl_rng *r, tc_case *c, int *ok) {
    const ruler_task_def *d = x->def;
    int nk = d->n_keys > d->n_queries ? d->n_keys : d->n_queries, nv = d->n_values, nn = nk * nv;
    const char *V = d->value_kind == KEY_UUIDS ? "uuid" : "number";
    char keys[MAX_NEEDLES][ITEM], values[MAX_NEEDLES][ITEM], needle[MAX_NEEDLES][160], buf[ITEM];
    int order[MAX_NEEDLES], qidx[MAX_NEEDLES];
    strset used = {0};
    strbuf ctx = {0}, intro = {0}, q = {0}, pre = {0}, query = {0};
    int *starts = NULL, rc = -1;
    for (int i = 0; i < nk; i++) {                 /* distinct keys, none inside another */
        do ruler_random_item(r, d->key_kind, x->o->split, keys[i]);
        while (key_clash(keys[i], keys, i) || strset_add(&used, keys[i]) != 1);
    }
    for (int i = 0; i < nn; i++) {
        do ruler_random_item(r, d->value_kind, x->o->split, values[i]);
        while (strset_add(&used, values[i]) != 1);
        snprintf(needle[i], sizeof needle[i], "One of the special magic %ss for %s is: %s.", V, keys[i / nv], values[i]);
        order[i] = i;
    }
    wl_shuffle(r, order, nn, sizeof order[0]);
    for (int i = 0; i < nk; i++) qidx[i] = i;      /* random.sample(range(nk), nq) */
    for (int i = 0; i < d->n_queries; i++) {
        int j = i + (int)wl_below(r, (uint64_t)(nk - i));
        int t = qidx[i]; qidx[i] = qidx[j]; qidx[j] = t;
    }
    const char *first_answer = values[qidx[0] * nv];
    double first_depth = -1;
    if (d->hay == HAY_ESSAY) {
        int idx[RULER_N_DEPTHS], pos[MAX_NEEDLES];
        for (int i = 0; i < RULER_N_DEPTHS; i++) idx[i] = i;
        for (int i = 0; i < nn; i++) {             /* random.sample(DEPTHS, nn) */
            int j = i + (int)wl_below(r, (uint64_t)(RULER_N_DEPTHS - i));
            int t = idx[i]; idx[i] = idx[j]; idx[j] = t;
        }
        starts = malloc(((size_t)h + 2) * sizeof *starts);
        if (!starts) goto out;
        int ns = sentence_starts(x, h, starts);
        double depth[MAX_NEEDLES];
        for (int i = 0; i < nn; i++) depth[i] = (double)(int)(idx[i] * 100.0 / 39.0 + 0.5);
        for (int i = 1; i < nn; i++)               /* sorted positions, needles in shuffled order */
            for (int j = i; j > 0 && depth[j] < depth[j - 1]; j--) { double t = depth[j]; depth[j] = depth[j - 1]; depth[j - 1] = t; }
        for (int i = 0; i < nn; i++) pos[i] = (int)(ns * depth[i] / 100.0);
        int last = 0, parts = 0;
        for (int i = 0; i <= nn; i++) {
            int next = i < nn ? pos[i] : ns;
            if (next > last) {
                if (parts++) sb_putc(&ctx, ' ');
                put_words(&ctx, x, starts[last], starts[next]);
            }
            last = next;
            if (i < nn) {
                if (parts++) sb_putc(&ctx, ' ');
                sb_puts(&ctx, needle[order[i]]);
                if (!strcmp(values[order[i]], first_answer)) first_depth = depth[i];
            }
        }
    } else {
        int *at = malloc((size_t)h * sizeof *at);    /* needle (or -1) before each line */
        int *pick = malloc((size_t)h * sizeof *pick);
        if (!at || !pick) { free(at); free(pick); goto out; }
        for (int i = 0; i < h; i++) { at[i] = -1; pick[i] = i; }
        for (int i = 0; i < nn; i++) {             /* random.sample(range(h), nn) */
            int j = i + (int)wl_below(r, (uint64_t)(h - i));
            int t = pick[i]; pick[i] = pick[j]; pick[j] = t;
        }
        for (int i = 0; i < nn; i++) at[pick[i]] = order[i];
        for (int i = 0; i < h; i++) {
            if (at[i] >= 0) {
                sb_puts(&ctx, needle[at[i]]);
                sb_putc(&ctx, '\n');
                if (!strcmp(values[at[i]], first_answer)) first_depth = 100.0 * i / h;
            }
            if (d->hay == HAY_NOISE) {
                sb_puts(&ctx, RULER_NOISE);
            } else {                                /* a needle-shaped distractor */
                char k[ITEM];
                do ruler_random_item(r, d->key_kind, x->o->split, k);
                while (key_clash(k, keys, nk));
                do ruler_random_item(r, d->value_kind, x->o->split, buf);
                while (strset_has(&used, buf));
                sb_printf(&ctx, "One of the special magic %ss for %s is: %s.", V, k, buf);
            }
            if (i + 1 < h) sb_putc(&ctx, '\n');
        }
        free(at);
        free(pick);
    }
    for (int i = 0; i < d->n_queries; i++) {
        if (i) sb_puts(&query, i + 1 == d->n_queries ? ", and " : ", ");   /* "a, b, c, and d" */
        sb_puts(&query, keys[qidx[i]]);
    }
    int plural = d->n_queries * nv > 1;
    if (plural) sb_printf(&intro, "Some special magic %ss are hidden within the following text. Make sure to memorize it. "
                          "I will quiz you about the %ss afterwards.\n", V, V);
    else sb_printf(&intro, "A special magic %s is hidden within the following text. Make sure to memorize it. "
                   "I will quiz you about the %s afterwards.\n", V, V);
    if (ctx.oom || query.oom) goto out;
    sb_puts(&intro, ctx.p ? ctx.p : "");
    if (plural) sb_printf(&q, "\nWhat are all the special magic %ss for %s mentioned in the provided text?", V, query.p);
    else sb_printf(&q, "\nWhat is the special magic %s for %s mentioned in the provided text?", V, query.p);
    sb_printf(&pre, "The special magic %s%s for %s mentioned in the provided text %s", V, plural ? "s" : "", query.p,
              plural ? "are" : "is");
    if (intro.oom || q.oom || pre.oom) goto out;
    if (tc_set_prompt(c, x->o->tok, x->o->use_chat, intro.p, q.p, pre.p)) goto out;
    const char *ans[MAX_NEEDLES];
    int na = 0;
    for (int i = 0; i < d->n_queries; i++)
        for (int v = 0; v < nv; v++) ans[na++] = values[qidx[i] * nv + v];
    if (tc_set_answers(c, ans, na)) goto out;
    free(c->context); free(c->question);
    c->context = ctx.p;
    ctx = (strbuf){0};
    c->question = strdup(q.p + 1);
    if (!c->question) goto out;
    c->depth = first_depth;
    *ok = 1;                                       /* each answer once, each asked key nv times */
    for (int i = 0; i < na && *ok; i++) *ok = ruler_count(c->context, ans[i]) == 1;
    for (int i = 0; i < d->n_queries && *ok; i++) *ok = ruler_count(c->context, keys[qidx[i]]) == nv;
    rc = 0;
out:
    strset_free(&used);
    sb_free(&ctx); sb_free(&intro); sb_free(&q); sb_free(&pre); sb_free(&query);
    free(starts);
    return rc;
}

int ruler_build_niah(const ruler_ctx *x, int h, wl_rng r, tc_case *c) {
    for (int attempt = 0; attempt < 50; attempt++) {
        int ok = 0;
        tc_case_free(c);
        if (build_once(x, h, &r, c, &ok)) return -1;
        if (ok) break;                             /* else redraw (an answer also in the essay text) */
    }
    c->scorer = TC_SCORE_MATCH_ALL;
    c->max_new_tokens = x->def->max_new;
    return 0;
}
