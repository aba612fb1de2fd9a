/* RULER qa data: SQuAD and HotpotQA files into documents and questions (see ruler_qa.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../kernels/jsonl.h"
#include "ruler_qa.h"
#include "../kernels/strbuf.h"
#include "../kernels/host.h"

const char *ruler_qa_file(int squad) { return squad ? "squad.json" : "hotpotqa.json"; }

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void ruler_qa_free(ruler_qa_data *d) {
    if (!d) return;
    for (int i = 0; i < d->n_docs; i++) free(d->docs[i]);
    free(d->docs);
    for (int i = 0; i < d->n_qa; i++) {
        ruler_qa_item *q = &d->qa[i];
        free(q->query);
        for (int k = 0; k < q->n_answers; k++) free(q->answers[k]);
        free(q->answers); free(q->gold); free(q->more);
    }
    free(d->qa);
    free(d);
}

/* Growable array of strings (documents before sorting). */
typedef struct { char **v; int n, cap; } strvec;
static int sv_push(strvec *s, char *x) {
    if (!x) return -1;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        char **v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) { free(x); return -1; }
        s->v = v; s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

/* Sorted distinct documents from s (consumed). */
static int finish_docs(ruler_qa_data *d, strvec *s) {
    if (s->n > 1) qsort(s->v, (size_t)s->n, sizeof *s->v, cmp_str);   /* v is NULL when empty */
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        if (k && !strcmp(s->v[k - 1], s->v[i])) { free(s->v[i]); continue; }
        s->v[k++] = s->v[i];
    }
    d->docs = s->v;
    d->n_docs = k;
    s->v = NULL;
    return 0;
}

static int doc_index(const ruler_qa_data *d, const char *text) {
    char **at = bsearch(&text, d->docs, (size_t)d->n_docs, sizeof *d->docs, cmp_str);
    return at ? (int)(at - d->docs) : -1;
}

static int push_qa(ruler_qa_data *d, int *cap, ruler_qa_item *q) {
    if (d->n_qa == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        ruler_qa_item *v = realloc(d->qa, (size_t)nc * sizeof *v);
        if (!v) return -1;
        d->qa = v; *cap = nc;
    }
    d->qa[d->n_qa++] = *q;
    return 0;
}

/* "title\n" + the sentences joined (HotpotQA's f"{t}\n{''.join(p)}"); NULL on a bad shape. */
static char *hotpot_doc(const json_value *pair) {
    if (pair->type != JSON_ARRAY || pair->n != 2 || pair->items[0].type != JSON_STRING || pair->items[1].type != JSON_ARRAY)
        return NULL;
    strbuf b = {0};
    sb_printf(&b, "%s\n", pair->items[0].str);
    for (int i = 0; i < pair->items[1].n; i++) {
        const json_value *s = &pair->items[1].items[i];
        if (s->type != JSON_STRING) { free(b.p); return NULL; }
        sb_puts(&b, s->str);
    }
    return sb_take(&b);
}

static int load_squad(ruler_qa_data *d, const json_value *root, char *err, size_t errlen) {
    const json_value *data = json_get(root, "data");
    if (!data || data->type != JSON_ARRAY) { snprintf(err, errlen, "%s: no 'data' array (not a SQuAD file)", d->path); return -1; }
    strvec s = {0};
    for (int a = 0; a < data->n; a++) {
        const json_value *ps = json_get(&data->items[a], "paragraphs");
        for (int p = 0; ps && ps->type == JSON_ARRAY && p < ps->n; p++) {
            const char *ctx;
            if (json_field_string(&ps->items[p], "context", &ctx, err, errlen) || sv_push(&s, strdup(ctx))) {
                for (int i = 0; i < s.n; i++) free(s.v[i]);
                free(s.v);
                if (!*err) snprintf(err, errlen, "out of memory");
                return -1;
            }
        }
    }
    finish_docs(d, &s);
    int cap = 0;
    for (int a = 0; a < data->n; a++) {
        const json_value *ps = json_get(&data->items[a], "paragraphs");
        if (!ps || ps->type != JSON_ARRAY) { snprintf(err, errlen, "%s: article %d has no 'paragraphs' array", d->path, a + 1); return -1; }
        int *art = malloc((size_t)(ps->n ? ps->n : 1) * sizeof *art);
        if (!art) return -1;
        for (int p = 0; p < ps->n; p++) art[p] = doc_index(d, json_get(&ps->items[p], "context")->str);
        for (int p = 0; p < ps->n; p++) {
            const json_value *qas = json_get(&ps->items[p], "qas");
            for (int k = 0; qas && qas->type == JSON_ARRAY && k < qas->n; k++) {
                const json_value *qv = &qas->items[k], *imp = json_get(qv, "is_impossible");
                if (imp && imp->type == JSON_TRUE) continue;
                const char *question;
                const json_value *ans = json_get(qv, "answers");
                if (json_field_string(qv, "question", &question, err, errlen) || !ans || ans->type != JSON_ARRAY || !ans->n) {
                    if (!*err) snprintf(err, errlen, "field 'answers' must be a non-empty array");
                    free(art);
                    char why[512];
                    snprintf(why, sizeof why, "%s", err);
                    snprintf(err, errlen, "%s: article %d, paragraph %d, question %d: %s", d->path, a + 1, p + 1, k + 1, why);
                    return -1;
                }
                ruler_qa_item q = {0};
                q.query = strdup(question);
                q.answers = calloc((size_t)ans->n, sizeof *q.answers);
                q.gold = malloc(sizeof *q.gold);
                q.more = malloc((size_t)(ps->n ? ps->n : 1) * sizeof *q.more);
                int bad = !q.query || !q.answers || !q.gold || !q.more;
                for (int i = 0; !bad && i < ans->n; i++) {
                    const json_value *t = json_get(&ans->items[i], "text");
                    if (!t || t->type != JSON_STRING) { bad = 2; break; }
                    if (!*t->str) { bad = 3; break; }   /* "" is in every output: a data error, not a score of 1 */
                    if (!(q.answers[q.n_answers++] = strdup(t->str))) bad = 1;
                }
                if (!bad) {
                    q.gold[q.n_gold++] = art[p];
                    for (int o = 0; o < ps->n; o++)
                        if (art[o] != art[p]) q.more[q.n_more++] = art[o];
                }
                if (bad || push_qa(d, &cap, &q)) {
                    free(q.query); free(q.gold); free(q.more);
                    for (int i = 0; i < q.n_answers; i++) free(q.answers[i]);
                    free(q.answers); free(art);
                    if (bad == 2) snprintf(err, errlen, "%s: article %d, paragraph %d, question %d: an answer without 'text'", d->path, a + 1, p + 1, k + 1);
                    else if (bad == 3) snprintf(err, errlen, "%s: article %d, paragraph %d, question %d: an empty answer 'text'", d->path, a + 1, p + 1, k + 1);
                    else snprintf(err, errlen, "out of memory");
                    return -1;
                }
            }
        }
        free(art);
    }
    return 0;
}

static int load_hotpot(ruler_qa_data *d, const json_value *root, char *err, size_t errlen) {
    if (root->type != JSON_ARRAY) { snprintf(err, errlen, "%s: expected a JSON array of questions (not a HotpotQA file)", d->path); return -1; }
    strvec s = {0};
    for (int i = 0; i < root->n; i++) {
        const json_value *ctx = json_get(&root->items[i], "context");
        if (!ctx || ctx->type != JSON_ARRAY) { snprintf(err, errlen, "%s: question %d: field 'context' must be an array", d->path, i + 1); goto bad; }
        for (int k = 0; k < ctx->n; k++) {
            char *doc = hotpot_doc(&ctx->items[k]);
            if (!doc) { snprintf(err, errlen, "%s: question %d: context %d must be [title, [sentences]]", d->path, i + 1, k + 1); goto bad; }
            if (sv_push(&s, doc)) { snprintf(err, errlen, "out of memory"); goto bad; }
        }
    }
    finish_docs(d, &s);
    int cap = 0;
    for (int i = 0; i < root->n; i++) {
        const json_value *v = &root->items[i], *ctx = json_get(v, "context");
        const char *question, *answer;
        if (json_field_string(v, "question", &question, err, errlen) || json_field_string(v, "answer", &answer, err, errlen)) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, errlen, "%s: question %d: %s", d->path, i + 1, why);
            return -1;
        }
        if (!*answer) { snprintf(err, errlen, "%s: question %d: an empty 'answer'", d->path, i + 1); return -1; }
        ruler_qa_item q = {0};
        q.query = strdup(question);
        q.answers = malloc(sizeof *q.answers);
        q.gold = malloc((size_t)(ctx->n ? ctx->n : 1) * sizeof *q.gold);
        if (q.answers) q.answers[q.n_answers++] = strdup(answer);
        int ok = q.query && q.answers && q.answers[0] && q.gold;
        for (int k = 0; ok && k < ctx->n; k++) {
            char *doc = hotpot_doc(&ctx->items[k]);
            ok = doc != NULL;
            if (ok) q.gold[q.n_gold++] = doc_index(d, doc);
            free(doc);
        }
        if (!ok || push_qa(d, &cap, &q)) {
            free(q.query); free(q.gold);
            if (q.answers) free(q.answers[0]);
            free(q.answers);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
bad:
    for (int i = 0; i < s.n; i++) free(s.v[i]);
    free(s.v);
    return -1;
}

ruler_qa_data *ruler_qa_load(const char *dir, int squad, char *err, size_t errlen) {
    ruler_qa_data *d = calloc(1, sizeof *d);
    if (!d) { snprintf(err, errlen, "out of memory"); return NULL; }
    snprintf(d->path, sizeof d->path, "%s/%s", dir, ruler_qa_file(squad));
    char why[160];
    strbuf b = {0};
    b.p = kb_read_file_capped(d->path, KB_CAP_DEFAULT, &b.n, why, sizeof why);
    if (!b.p && errno == ENOENT) {
        snprintf(err, errlen, "%s: %s (ruler:%s reads %s: %s)", d->path, strerror(errno), squad ? "qa_1" : "qa_2",
                 squad ? "SQuAD 2.0 dev, dev-v2.0.json" : "HotpotQA dev distractor, hotpot_dev_distractor_v1.json",
                 "download it and save it under this name");
        free(d);
        return NULL;
    }
    if (!b.p) { snprintf(err, errlen, "%s: %s", d->path, why); free(d); return NULL; }
    json_value root;
    char jerr[256];
    if (json_parse(b.p ? b.p : "", b.n, &root, jerr, sizeof jerr)) {
        snprintf(err, errlen, "%s: not JSON: %s", d->path, jerr);
        free(b.p); free(d);
        return NULL;
    }
    free(b.p);
    *err = 0;
    int rc = squad ? load_squad(d, &root, err, errlen) : load_hotpot(d, &root, err, errlen);
    json_free(&root);
    if (!rc && !d->n_qa) { snprintf(err, errlen, "%s: no answerable questions", d->path); rc = -1; }
    if (rc) { ruler_qa_free(d); return NULL; }
    return d;
}

/* ---- the qa prompt (qa.py generate_input_output) --------------------------------------- */

#include "ruler_internal.h"

#define QA_INSTR "Answer the question based on the given documents. Only give me the answer and do not output any other words."

/* Picks k of the n indices in v (partial Fisher-Yates), into out. */
static void pick(wl_rng *r, int *v, int n, int k, int *out) {
    for (int i = 0; i < k; i++) {
        int j = i + (int)wl_below(r, (uint64_t)(n - i));
        int t = v[i]; v[i] = v[j]; v[j] = t;
        out[i] = v[i];
    }
}

int ruler_build_qa(const ruler_ctx *x, int h, wl_rng r, tc_case *c) {
    const ruler_qa_data *d = x->def->hay == HAY_SQUAD ? x->o->squad : x->o->hotpot;
    const ruler_qa_item *q = &d->qa[x->sample];
    int n = h < q->n_gold ? q->n_gold : h, rc = -1;
    if (n > d->n_docs) n = d->n_docs;
    int *all = malloc((size_t)d->n_docs * sizeof *all), *pool = malloc((size_t)d->n_docs * sizeof *pool);
    unsigned char *used = calloc((size_t)d->n_docs, 1);
    strbuf body = {0}, ctx = {0}, qs = {0};
    if (!all || !pool || !used) goto out;
    int k = 0;
    if (n < d->n_docs) {                         /* gold, then the article's others, then any */
        for (int i = 0; i < q->n_gold; i++) used[all[k++] = q->gold[i]] = 1;
        if (n - q->n_gold > q->n_more) {
            for (int i = 0; i < q->n_more; i++) used[all[k++] = q->more[i]] = 1;
            int np = 0;
            for (int i = 0; i < d->n_docs; i++)
                if (!used[i]) pool[np++] = i;
            pick(&r, pool, np, n - k, all + k);
        } else {
            if (q->n_more) memcpy(pool, q->more, (size_t)q->n_more * sizeof *pool);
            pick(&r, pool, q->n_more, n - k, all + k);
        }
        k = n;
    } else {
        for (int i = 0; i < d->n_docs; i++) all[k++] = i;
    }
    wl_shuffle(&r, all, k, sizeof *all);
    int first_gold = -1;
    for (int i = 0; i < k; i++) {
        sb_printf(&ctx, "%sDocument %d:\n%s", i ? "\n\n" : "", i + 1, d->docs[all[i]]);
        if (first_gold < 0 && all[i] == q->gold[0]) first_gold = i;
    }
    sb_printf(&body, QA_INSTR "\n\nThe following are given documents.\n\n%s", ctx.p ? ctx.p : "");
    sb_printf(&qs, "\n\n" QA_INSTR "\n\nQuestion: %s", q->query);
    if (ctx.oom || body.oom || qs.oom) goto out;
    if (tc_set_prompt(c, x->o->tok, x->o->use_chat, body.p, qs.p, "Answer:")) goto out;
    if (tc_set_answers(c, (const char *const *)q->answers, q->n_answers)) goto out;
    free(c->context); free(c->question);
    c->context = ctx.p;
    ctx = (strbuf){0};
    c->question = strdup(q->query);
    if (!c->question) goto out;
    c->scorer = TC_SCORE_MATCH_PART;
    c->max_new_tokens = x->def->max_new;
    c->depth = k > 1 && first_gold >= 0 ? 100.0 * first_gold / (k - 1) : 0;
    rc = 0;
out:
    free(all); free(pool); free(used);
    sb_free(&body); sb_free(&ctx); sb_free(&qs);
    return rc;
}
