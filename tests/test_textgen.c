/* Generated text workloads with the model's real tokenizer (SKIP when the model file is
 * absent): the NIAH builder (needle exactly once, at a sentence boundary, at the
 * requested depth (no sentence end between where it went and the target), prompt within
 * the requested length and close to it, deterministic) and the RULER generators
 * (answers in the context exactly as often as the task defines, rank/frequency structure
 * of cwe/fwe, lengths, seeded determinism). The essays come from `make haystack`; without
 * them a generated English-like text stands in and the essay tasks are skipped. */
#include <unistd.h>
#include "check.h"
#include "../model/gguf.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "../workloads/haystack.h"
#include "../workloads/niah.h"
#include "../workloads/ruler.h"
#include "../workloads/tokspan.h"
#include "../harness/drivers/model_case.h"
#include "../workloads/ruler_qa.h"

static const kv_tokenizer *tok;

static int ntok(const char *s, size_t n) { return tok_encode(tok, s, n, 0, NULL, 0); }

static int count(const char *hay, const char *needle) {
    int k = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) k++;
    return k;
}

/* A sentence end inside text[0..n): '.' then whitespace/end or an uppercase letter. */
static int has_sentence_end(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '.' && (s[i + 1] == ' ' || s[i + 1] == '\n' || (s[i + 1] >= 'A' && s[i + 1] <= 'Z'))) return 1;
    return 0;
}

/* English-like filler when the essays are absent. */
static char *fake_haystack(size_t *len) {
    static const char *const w[] = {"people", "often", "think", "that", "startups", "grow", "slowly", "but", "good",
                                    "ideas", "spread", "fast", "when", "users", "care", "about", "them", "and", "work"};
    size_t cap = 400000, k = 0;
    char *s = malloc(cap);
    while (k + 200 < cap) {
        int n = test_int(4, 25);
        for (int i = 0; i < n; i++) {
            const char *x = w[test_int(0, 18)];
            if (i) k += (size_t)sprintf(s + k, " %s", x);
            else k += (size_t)sprintf(s + k, "%c%s", x[0] - 32, x + 1);
        }
        k += (size_t)sprintf(s + k, test_int(0, 4) ? ". " : ".\n");
    }
    s[k] = 0;
    *len = k;
    return s;
}

static void test_niah(const char *hay, size_t hay_len) {
    niah_opts o;
    niah_defaults(&o);
    o.tok = tok;
    o.haystack = hay;
    o.haystack_len = hay_len;
    char err[512];
    niah_builder *b = niah_open(&o, 4096, err, sizeof err);
    CHECK(b != NULL, "niah_open: %s", err);
    if (!b) return;
    int lengths[3] = {1024, 2048, 4096};
    lengths[1] = test_int(1500, 3000);
    double depths[NIAH_N_DEPTHS];
    niah_default_depths(depths);
    depths[test_int(1, 9)] = test_int(1, 99);       /* a fresh depth each run */
    tc_list l = {0};
    CHECK(niah_grid(b, lengths, 3, depths, NIAH_N_DEPTHS, &l, err, sizeof err) == 0 && l.n == 3 * NIAH_N_DEPTHS, "grid: %s", err);
    for (int i = 0; i < l.n; i++) {
        tc_case *c = &l.v[i];
        int L = (int)c->length;
        CHECK(count(c->prompt, NIAH_NEEDLE) == 1, "%s: needle %d times", c->id, count(c->prompt, NIAH_NEEDLE));
        CHECK(c->prompt_tokens + c->max_new_tokens <= L && c->prompt_tokens >= L - NIAH_BUFFER - 16,
              "%s: prompt %d tokens for length %d", c->id, c->prompt_tokens, L);
        int whole = tok_encode(tok, c->prompt, strlen(c->prompt), 1, NULL, 0) + (tok_add_bos(tok) ? 1 : 0);
        CHECK(abs(whole - c->prompt_tokens) <= 2, "%s: whole-prompt encode %d vs %d", c->id, whole, c->prompt_tokens);
        const char *at = strstr(c->context, NIAH_NEEDLE);
        if (!at) continue;
        size_t pre = (size_t)(at - c->context);
        size_t j = pre;
        while (j > 0 && strchr(" \n\t\r", c->context[j - 1])) j--;
        CHECK(j == 0 || c->context[j - 1] == '.', "%s: no sentence end before the needle: '...%.20s'", c->id, c->context + (j > 20 ? j - 20 : 0));
        /* depth: tokens before the needle vs the target; nothing ends a sentence in between */
        int before = ntok(c->context, pre);
        int target = (int)(c->depth / 100.0 * c->context_tokens + 0.5);
        CHECK(before <= target + 2, "%s: needle at token %d after the target %d", c->id, before, target);
        CHECK(abs(before - c->needle_token) <= 2, "%s: needle token %d vs recorded %d", c->id, before, c->needle_token);
        const char *after = at + strlen(NIAH_NEEDLE);
        tok_spans sp;
        if (target - before > 3 && !tokspan_encode(tok, after, strlen(after), &sp, err, sizeof err)) {
            int k = target - before - 3 < sp.n ? target - before - 3 : sp.n;
            CHECK(!has_sentence_end(after, sp.off[k]), "%s: a sentence ends between the needle (token %d) and the target %d",
                  c->id, before, target);
            tokspan_free(&sp);
        }
        tc_case *d = c;
        CHECK(tc_score(d, NIAH_NEEDLE) == 100.0 && tc_score(d, "I don't know.") == 0.0, "%s: scoring", c->id);
    }
    tc_case again;                                   /* deterministic */
    CHECK(niah_build(b, lengths[1], depths[3], &again, err, sizeof err) == 0 &&
          !strcmp(again.prompt, l.v[NIAH_N_DEPTHS + 3].prompt), "niah not deterministic");
    tc_case_free(&again);
    CHECK(niah_build(b, 150, 50, &again, err, sizeof err) == -1 && strstr(err, "leaves no room"), "too short: %s", err);
    tc_list_free(&l);
    niah_close(b);
}

/* The NIAH variations: answer prefix only when asked, dev/test and samples start the text
 * elsewhere, distractor needles once each, a custom needle scored by its keywords, and the
 * settings that cannot work refused with the flag named. */
static void test_niah_variants(const char *hay, size_t hay_len) {
    niah_opts o;
    niah_defaults(&o);
    o.tok = tok;
    o.haystack = hay;
    o.haystack_len = hay_len;
    char err[512];
    int L = test_int(900, 1400);
    double d = test_int(0, 100);
    tc_case base, c;
    niah_builder *b = niah_open(&o, L, err, sizeof err);
    CHECK(b && niah_build(b, L, d, &base, err, sizeof err) == 0, "classic: %s", err);
    niah_close(b);
    if (!b) return;
    size_t pl = strlen(base.prompt), al = strlen(NIAH_ANSWER_PREFIX);
    CHECK(strcmp(base.prompt + pl - al, NIAH_ANSWER_PREFIX), "the default prompt ends without the answer prefix");
    char head[41];
    snprintf(head, sizeof head, "%s", hay);
    const char *at = strstr(base.context, head);
    CHECK(at && at - base.context <= (long)strlen(NIAH_NEEDLE) + 1, "test sample 0 starts at the haystack's start");
    o.answer_prefix = NIAH_ANSWER_PREFIX;
    b = niah_open(&o, L, err, sizeof err);
    CHECK(b && niah_build(b, L, d, &c, err, sizeof err) == 0, "prefix: %s", err);
    pl = strlen(c.prompt);
    CHECK(pl > al && !strcmp(c.prompt + pl - al, NIAH_ANSWER_PREFIX), "the answer prefix ends the prompt");
    tc_case_free(&c);
    niah_close(b);
    o.answer_prefix = NULL;
    /* dev and test, samples: different starts, none of them the start of another */
    char *starts[4] = {0};
    int k = 0;
    for (int split = 0; split < 2; split++)
        for (int smp = 0; smp < 2; smp++, k++) {
            o.split = split, o.sample = smp;
            b = niah_open(&o, L, err, sizeof err);
            CHECK(b && niah_build(b, L, 50, &c, err, sizeof err) == 0, "split %d sample %d: %s", split, smp, err);
            if (!b) continue;
            CHECK((smp > 0) == (strstr(c.id, "-s1") != NULL), "id %s", c.id);
            CHECK(count(c.prompt, NIAH_NEEDLE) == 1 && c.prompt_tokens + c.max_new_tokens <= L, "%s: needle once, fits", c.id);
            starts[k] = strndup(c.context, 300);
            tc_case_free(&c);
            niah_close(b);
        }
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) CHECK(starts[i] && starts[j] && strcmp(starts[i], starts[j]), "starts %d and %d differ", i, j);
    for (int i = 0; i < 4; i++) free(starts[i]);
    o.split = 0, o.sample = 0;
    /* multi-key: the needle and its distractors once each; scored on the needle's keywords */
    o.needles = test_int(2, NIAH_MAX_NEEDLES);
    b = niah_open(&o, 2048, err, sizeof err);
    CHECK(b && niah_build(b, 2048, d, &c, err, sizeof err) == 0, "needles %d: %s", o.needles, err);
    if (b) {
        CHECK(count(c.context, NIAH_NEEDLE) == 1, "needle once among %d", o.needles);
        CHECK(count(c.context, "The best thing to do in ") == o.needles, "%d needles in the context", count(c.context, "The best thing to do in "));
        CHECK(c.prompt_tokens + c.max_new_tokens <= 2048, "fits");
        CHECK(tc_score(&c, "Eat a sandwich in Dolores Park") == 100.0 && tc_score(&c, "Ride the ferry to Bainbridge Island") == 0.0,
              "multi-key scoring");
        tc_case_free(&c);
        niah_close(b);
    }
    o.needles = 1;
    /* a custom needle, question and keywords */
    o.needle = "The secret ingredient of the soup is a spoonful of smoked paprika.";
    o.question = "What is the secret ingredient of the soup?";
    o.answers = "smoked paprika, spoonful";
    b = niah_open(&o, L, err, sizeof err);
    CHECK(b && niah_build(b, L, d, &c, err, sizeof err) == 0, "custom: %s", err);
    if (b) {
        CHECK(count(c.prompt, o.needle) == 1 && strstr(c.prompt, o.question) && !strstr(c.prompt, NIAH_NEEDLE), "custom prompt");
        CHECK(c.n_answers == 2 && !strcmp(c.answers[0], "smoked paprika") && !strcmp(c.answers[1], "spoonful"), "keywords");
        CHECK(tc_score(&c, "A SPOONFUL of Smoked Paprika.") == 100.0 && tc_score(&c, "smoked paprika") == 0.0, "keyword scoring");
        tc_case_free(&c);
        niah_close(b);
    }
    o.answers = "saffron";
    CHECK(!niah_open(&o, L, err, sizeof err) && strstr(err, "--answer keyword 'saffron' is not in the needle"), "%s", err);
    o.answers = "smoked paprika,,x";
    CHECK(!niah_open(&o, L, err, sizeof err) && strstr(err, "--answer"), "%s", err);
    o.needle = NULL, o.question = NULL, o.answers = "the best";
    o.needles = 2;
    CHECK(!niah_open(&o, L, err, sizeof err) && strstr(err, "distractor"), "%s", err);
    o.answers = NULL, o.needles = NIAH_MAX_NEEDLES + 1;
    CHECK(!niah_open(&o, L, err, sizeof err) && strstr(err, "--needles"), "%s", err);
    tc_case_free(&base);
}

/* The "Document i:" blocks of a qa context, numbered 1..k; their texts into doc[] (copies). */
static int qa_documents(const char *ctx, char **doc, int cap) {
    int k = 0;
    for (const char *p = ctx; p && k < cap;) {
        char head[32];
        snprintf(head, sizeof head, "Document %d:\n", k + 1);
        if (strncmp(p, head, strlen(head))) return -1;
        p += strlen(head);
        snprintf(head, sizeof head, "\n\nDocument %d:\n", k + 2);
        const char *end = strstr(p, head);
        doc[k++] = end ? strndup(p, (size_t)(end - p)) : strdup(p);
        p = end ? end + 2 : NULL;
    }
    return k;
}

/* RULER qa_1/qa_2 from the fixture files: sample i asks question i (impossible ones left
 * out), the gold documents are there once, distractors come from the question's article
 * first (SQuAD), every block is a whole document of the file, all distinct; the prompt fits;
 * a long enough length holds every document; deterministic; refusals name the files. */
static void test_ruler_qa(void) {
    char err[512];
    ruler_qa_data *sq = ruler_qa_load("tests/fixtures/ruler_qa", 1, err, sizeof err);
    ruler_qa_data *hp = ruler_qa_load("tests/fixtures/ruler_qa", 0, err, sizeof err);
    CHECK(sq && hp, "fixtures: %s", err);
    if (!sq || !hp) { ruler_qa_free(sq); ruler_qa_free(hp); return; }
    CHECK(sq->n_qa == 6 && sq->n_docs == 6 && !strcmp(sq->qa[2].query, "Who was the last keeper?") &&
              sq->qa[2].n_answers == 2 && sq->qa[0].n_more == 2,
          "squad: %d questions, %d documents", sq->n_qa, sq->n_docs);
    CHECK(hp->n_qa == 3 && hp->n_docs == 7 && hp->qa[0].n_gold == 4 && !strcmp(hp->qa[1].answers[0], "1820"),
          "hotpot: %d questions, %d documents", hp->n_qa, hp->n_docs);
    for (int i = 1; i < sq->n_docs; i++) CHECK(strcmp(sq->docs[i - 1], sq->docs[i]) < 0, "documents sorted, distinct");
    ruler_opts o;
    ruler_defaults(&o);
    o.tok = tok;
    o.squad = sq;
    o.hotpot = hp;
    int tasks[2] = {ruler_task_index("qa_1"), ruler_task_index("qa_2")};
    CHECK(tasks[0] == RULER_N_SYNTHETIC && tasks[1] == RULER_N_SYNTHETIC + 1 && ruler_task_qa(tasks[0]) == 1 &&
              ruler_task_qa(tasks[1]) == 2 && ruler_task_max_new(tasks[0]) == 32, "qa task table");
    for (int q = 0; q < 2; q++) {
        const ruler_qa_data *d = q ? hp : sq;
        int L = q ? test_int(290, 325) : test_int(285, 335), n = d->n_qa;   /* some documents left out */
        tc_list l = {0};
        CHECK(ruler_generate(&o, tasks[q], L, n, &l, err, sizeof err) == 0 && l.n == n, "qa_%d: %s", q + 1, err);
        for (int i = 0; i < l.n; i++) {
            tc_case *c = &l.v[i];
            const ruler_qa_item *it = &d->qa[i];
            CHECK(c->prompt_tokens + 32 <= L && c->scorer == TC_SCORE_MATCH_PART && c->max_new_tokens == 32, "%s fits", c->id);
            CHECK(!strcmp(c->question, it->query) && c->n_answers == it->n_answers && !strcmp(c->answers[0], it->answers[0]),
                  "%s asks question %d", c->id, i);
            CHECK(tc_score(c, it->answers[0]) == 100.0 && tc_score(c, "no idea") == 0.0, "%s scoring", c->id);
            char *doc[64];
            int k = qa_documents(c->context, doc, 64);
            CHECK(k >= it->n_gold, "%s: %d documents", c->id, k);
            int outside = 0, more_left = 0;
            for (int a = 0; a < k; a++) {
                int idx = -1;
                for (int b = 0; b < d->n_docs; b++) if (!strcmp(doc[a], d->docs[b])) idx = b;
                CHECK(idx >= 0, "%s: document %d is not one of the file's", c->id, a + 1);
                for (int b = 0; b < a; b++) CHECK(strcmp(doc[a], doc[b]), "%s: document repeated", c->id);
                int rel = 0;
                for (int g = 0; g < it->n_gold; g++) rel |= idx == it->gold[g];
                for (int m = 0; m < it->n_more; m++) rel |= idx == it->more[m];
                outside += !rel;
            }
            for (int m = 0; m < it->n_more; m++) {
                int in = 0;
                for (int a = 0; a < k; a++) in |= !strcmp(doc[a], d->docs[it->more[m]]);
                more_left += !in;
            }
            for (int g = 0; g < it->n_gold; g++) CHECK(count(c->context, d->docs[it->gold[g]]) >= 1, "%s: gold document %d", c->id, g);
            CHECK(!(outside && more_left), "%s: a document from outside while the article has %d left", c->id, more_left);
            for (int a = 0; a < k; a++) free(doc[a]);
        }
        tc_list l2 = {0}, big = {0};
        CHECK(ruler_generate(&o, tasks[q], L, n, &l2, err, sizeof err) == 0 && !strcmp(l2.v[n - 1].prompt, l.v[n - 1].prompt),
              "qa_%d not deterministic", q + 1);
        CHECK(ruler_generate(&o, tasks[q], 4096, 1, &big, err, sizeof err) == 0 && big.n == 1, "qa_%d at 4096: %s", q + 1, err);
        if (big.n) {
            char *doc[64];
            int k = qa_documents(big.v[0].context, doc, 64);
            CHECK(k == d->n_docs, "qa_%d at 4096: all %d documents (got %d)", q + 1, d->n_docs, k);
            for (int a = 0; a < k; a++) free(doc[a]);
        }
        CHECK(ruler_generate(&o, tasks[q], L, n + 1, &big, err, sizeof err) == -1 && strstr(err, "questions"), "%s", err);
        tc_list_free(&l); tc_list_free(&l2); tc_list_free(&big);
    }
    o.squad = NULL;
    tc_list l = {0};
    CHECK(ruler_generate(&o, tasks[0], 2048, 1, &l, err, sizeof err) == -1 && strstr(err, "--qa-data") && strstr(err, "squad.json"), "%s", err);
    CHECK(!ruler_qa_load("tests/fixtures", 0, err, sizeof err) && strstr(err, "tests/fixtures/hotpotqa.json") &&
              strstr(err, "hotpot_dev_distractor_v1.json"), "missing file: %s", err);
    tc_list_free(&l);
    ruler_qa_free(sq);
    ruler_qa_free(hp);
}

/* Occurrences of "N. word" entries per word in a cwe list: counts of `word`. */
static int entry_count(const char *ctx, const char *word) {
    int k = 0;
    size_t L = strlen(word);
    for (const char *p = strstr(ctx, ". "); p; p = strstr(p + 1, ". ")) {
        const char *w = p + 2;
        if (!strncmp(w, word, L) && (w[L] == ' ' || w[L] == 0)) k++;
    }
    return k;
}

/* Whole-word counts of the space-separated words of s, sorted descending. */
typedef struct { char w[16]; int n; } wc;
static int cmp_wc(const void *a, const void *b) { return ((const wc *)b)->n - ((const wc *)a)->n; }
static int word_counts(const char *s, wc *out, int cap) {
    int n = 0;
    while (*s) {
        while (*s == ' ') s++;
        if (!*s) break;
        size_t L = strcspn(s, " ");
        int i = 0;
        while (i < n && !(strlen(out[i].w) == L && !strncmp(out[i].w, s, L))) i++;
        if (i == n && n < cap && L < 16) { memcpy(out[n].w, s, L); out[n].w[L] = 0; out[n++].n = 0; }
        if (i < n) out[i].n++;
        s += L;
    }
    qsort(out, (size_t)n, sizeof *out, cmp_wc);
    return n;
}

static void check_task(const ruler_opts *o, int task, int L, tc_list *l) {
    const char *name = ruler_task_name(task);
    /* The haystack size is searched on sample 0 and each other sample steps down from it
     * until it fits (RULER's procedure). fwe's tokens per word follow the sample's random
     * vocabulary, so a sample can fill less: 0.787 of the length (test-seeds, seed
     * 17121860636125; 0.819 the worst of 450 samples on 150 other seeds). */
    double fill = strcmp(name, "fwe") ? 0.8 : 0.7;
    for (int i = 0; i < l->n; i++) {
        tc_case *c = &l->v[i];
        CHECK(c->prompt_tokens + ruler_task_max_new(task) <= L && c->prompt_tokens >= fill * (L - ruler_task_max_new(task)),
              "%s: %d prompt tokens for length %d", c->id, c->prompt_tokens, L);
        int whole = tok_encode(tok, c->prompt, strlen(c->prompt), 1, NULL, 0) + (tok_add_bos(tok) ? 1 : 0);
        CHECK(abs(whole - c->prompt_tokens) <= 2, "%s: whole-prompt encode %d vs %d", c->id, whole, c->prompt_tokens);
        CHECK(c->max_new_tokens == ruler_task_max_new(task) && c->scorer == TC_SCORE_MATCH_ALL, "%s: settings", c->id);
        CHECK(strstr(c->prompt, c->context) != NULL, "%s: context not in the prompt", c->id);
        if (!strncmp(name, "niah", 4)) {
            int nv = !strcmp(name, "niah_multivalue") ? 4 : 1, nq = !strcmp(name, "niah_multiquery") ? 4 : 1;
            CHECK(c->n_answers == nv * nq, "%s: %d answers", c->id, c->n_answers);
            for (int a = 0; a < c->n_answers; a++)
                CHECK(count(c->prompt, c->answers[a]) == 1, "%s: value %s %d times", c->id, c->answers[a], count(c->prompt, c->answers[a]));
            /* the asked keys: each has nv needles */
            const char *q = strstr(c->question, " for ");
            char keys[512];
            snprintf(keys, sizeof keys, "%s", q ? q + 5 : "");
            char *end = strstr(keys, " mentioned");
            if (end) *end = 0;
            int nk = 0;
            for (char *save = NULL, *k = strtok_r(keys, ", ", &save); k; k = strtok_r(NULL, ", ", &save)) {
                if (!strcmp(k, "and")) continue;
                char needle[128];
                snprintf(needle, sizeof needle, "for %s is: ", k);
                CHECK(count(c->context, needle) == nv, "%s: key %s in %d needles", c->id, k, count(c->context, needle));
                nk++;
            }
            CHECK(nk == nq, "%s: %d keys asked", c->id, nk);
            int needles = count(c->context, "One of the special magic");
            if (!strcmp(name, "niah_multikey_1")) CHECK(needles == 4, "%s: %d needles", c->id, needles);
            if (!strcmp(name, "niah_multikey_2") || !strcmp(name, "niah_multikey_3"))
                CHECK(needles > L / 200, "%s: only %d needle-shaped lines", c->id, needles);
            if (!strcmp(name, "niah_single_1")) CHECK(count(c->context, "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.") > 10, "%s: noise", c->id);
            if (ruler_task_needs_essays(task) && nv * nq == 1) {
                int lvl = 0;
                for (int k = 0; k < RULER_N_DEPTHS; k++) lvl |= c->depth == (int)(k * 100.0 / 39 + 0.5);
                CHECK(lvl, "%s: depth %g is not one of the 40 levels", c->id, c->depth);
                /* where the needle sits, in haystack sentences (RULER: int(n_sentences * depth / 100)) */
                const char *at = strstr(c->context, c->answers[0]);      /* the asked needle's value */
                int before = 0, total = 0;
                for (const char *p = c->context; *p; p++) {
                    if (!strncmp(p, "One of the special magic", 24)) {   /* skip the needles' own '.' */
                        p = strstr(p, ": ") + 2;
                        p += strcspn(p, " ");
                        if (!*p) break;
                        continue;
                    }
                    if (!strchr(".!?", *p)) continue;
                    const char *q = p + 1;
                    while (*q && strchr("\"')]", *q)) q++;
                    if (*q == ' ' || !*q) { total++; before += p < at; }
                }
                CHECK(at && abs(before - (int)(total * c->depth / 100.0)) <= 1, "%s: needle after %d of %d sentences, depth %g",
                      c->id, before, total, c->depth);
            }
        } else if (!strcmp(name, "vt")) {
            CHECK(c->n_answers == 5, "vt answers");
            for (int a = 0; a < c->n_answers; a++) {
                char def[32];
                snprintf(def, sizeof def, "VAR %s = ", c->answers[a]);
                CHECK(count(c->context, def) == 1 && count(c->context, c->answers[a]) == (a < 4 ? 2 : 1),
                      "%s: variable %s: %d", c->id, c->answers[a], count(c->context, c->answers[a]));
            }
            char value[16];
            const char *v = strstr(c->question, "value ");
            snprintf(value, sizeof value, "%.5s", v ? v + 6 : "");
            char first[64];
            snprintf(first, sizeof first, "VAR %s = %s\n", c->answers[0], value);
            CHECK(count(c->context, value) == 1 && count(c->context, first) == 1, "%s: chain head", c->id);
        } else if (!strcmp(name, "cwe")) {
            int common = L < 4096 ? 6 : 30, rare = L < 4096 ? 1 : 3;
            CHECK(c->n_answers == 10, "cwe answers");
            for (int a = 0; a < c->n_answers; a++)
                CHECK(entry_count(c->context, c->answers[a]) == common, "%s: %s %d times", c->id, c->answers[a],
                      entry_count(c->context, c->answers[a]));
            int entries = count(c->context, ". ");
            CHECK((entries - 10 * common) % rare == 0 && entries > 10 * common, "%s: %d entries", c->id, entries);
            char last[32];
            snprintf(last, sizeof last, "%d. ", entries);
            CHECK(strstr(c->context, last) != NULL, "%s: numbering", c->id);
        } else {
            static wc counts[4096];
            int n = word_counts(c->context, counts, 4096);
            CHECK(n > 4 && !strcmp(counts[0].w, "..."), "%s: top word '%s'", c->id, n ? counts[0].w : "");
            for (int a = 0; a < 3 && n > 4; a++)
                CHECK(!strcmp(counts[1 + a].w, c->answers[a]) && counts[1 + a].n > counts[2 + a].n,
                      "%s: rank %d is %s (%d), answer %s", c->id, a + 2, counts[1 + a].w, counts[1 + a].n, c->answers[a]);
        }
        char all[1024] = "";
        for (int a = 0; a < c->n_answers; a++) snprintf(all + strlen(all), sizeof all - strlen(all), "%s, ", c->answers[a]);
        CHECK(tc_score(c, all) == 100.0, "%s: scoring the answers", c->id);
        CHECK(!strcmp(c->task + 6, name) && c->length == L, "%s: task/length", c->id);
    }
    (void)o;
}

/* The dev split of the same seed shares nothing with the test split l: every answer is
 * of its own split (and so none is the other's), and essay tasks read other text. */
static void check_split(const ruler_opts *o, int task, int L, const tc_list *l) {
    ruler_opts od = *o;
    od.split = WL_SPLIT_DEV;
    tc_list dev = {0};
    char err[512];
    const char *name = ruler_task_name(task);
    CHECK(ruler_generate(&od, task, L, 3, &dev, err, sizeof err) == 0 && dev.n == 3, "%s dev: %s", name, err);
    if (dev.n != 3) { tc_list_free(&dev); return; }
    for (int i = 0; i < 3; i++) {
        CHECK(strcmp(dev.v[i].prompt, l->v[i].prompt), "%s: dev and test sample %d are equal", name, i);
        for (int a = 0; a < dev.v[i].n_answers; a++)
            CHECK(ruler_in_split(dev.v[i].answers[a], WL_SPLIT_DEV), "%s: dev answer '%s' is not dev's", name,
                  dev.v[i].answers[a]);
        for (int a = 0; a < l->v[i].n_answers; a++)
            CHECK(ruler_in_split(l->v[i].answers[a], WL_SPLIT_TEST), "%s: test answer '%s' is not test's", name,
                  l->v[i].answers[a]);
        for (int j = 0; j < 3; j++)
            for (int a = 0; a < dev.v[i].n_answers; a++)
                for (int b = 0; b < l->v[j].n_answers; b++)
                    CHECK(strcmp(dev.v[i].answers[a], l->v[j].answers[b]), "%s: answer '%s' in both splits", name,
                          dev.v[i].answers[a]);
    }
    if (ruler_task_needs_essays(task) && l->v[0].context && strlen(l->v[0].context) > 400) {
        char probe[81];   /* a stretch of the test haystack, away from any needle at its start */
        snprintf(probe, sizeof probe, "%s", l->v[0].context + 200);
        for (int i = 0; i < 3; i++) CHECK(!strstr(dev.v[i].prompt, probe), "%s: dev reads test's essay text", name);
    }
    tc_list_free(&dev);
}

static void test_ruler(const char *essays, size_t essays_len) {
    ruler_opts o;
    ruler_defaults(&o);
    o.tok = tok;
    o.essays = essays;
    o.essays_len = essays_len;
    o.seed = (uint64_t)test_int(1, 1 << 30);
    char err[512];
    int lengths[2] = {test_int(1500, 2500), 4096};
    for (int task = 0; task < RULER_N_SYNTHETIC; task++) {
        if (ruler_task_needs_essays(task) && !essays) { printf("SKIP: ruler %s (no essays)\n", ruler_task_name(task)); continue; }
        for (int li = 0; li < 2; li++) {
            tc_list l = {0}, again = {0};
            int rc = ruler_generate(&o, task, lengths[li], 3, &l, err, sizeof err);
            CHECK(rc == 0 && l.n == 3, "%s L %d: %s", ruler_task_name(task), lengths[li], err);
            if (rc) continue;
            check_task(&o, task, lengths[li], &l);
            CHECK(strcmp(l.v[0].prompt, l.v[1].prompt), "%s: samples 0 and 1 are equal", ruler_task_name(task));
            if (li == 0) {                       /* same seed, same prompts; another seed, others */
                CHECK(ruler_generate(&o, task, lengths[li], 2, &again, err, sizeof err) == 0 && !strcmp(again.v[1].prompt, l.v[1].prompt),
                      "%s: not deterministic", ruler_task_name(task));
                tc_list_free(&again);
                ruler_opts o2 = o;
                o2.seed = o.seed + 1;
                CHECK(ruler_generate(&o2, task, lengths[li], 1, &again, err, sizeof err) == 0 && strcmp(again.v[0].prompt, l.v[0].prompt),
                      "%s: seed ignored", ruler_task_name(task));
                tc_list_free(&again);
                check_split(&o, task, lengths[li], &l);
            }
            tc_list_free(&l);
        }
    }
    tc_list l = {0};
    CHECK(ruler_generate(&o, ruler_task_index("vt"), 100, 1, &l, err, sizeof err) == -1 && strstr(err, "too short"), "%s", err);
    CHECK(ruler_task_index("nope") == -1 && ruler_task_index("fwe") == RULER_N_SYNTHETIC - 1, "task names");
    tc_list_free(&l);
}

/* LongBench samsum's first token: the best token that neither is a stop token nor holds a
 * newline, checked against a scan in double precision on fresh random logits whose top
 * entries are a stop token and a newline token. */
static void test_min_new_token(void) {
    int n = tok_vocab(tok), nl = -1, stop = -1;
    for (int i = 0; i < n && (nl < 0 || stop < 0); i++) {
        if (stop < 0 && tok_is_stop(tok, i)) stop = i;
        else if (nl < 0 && mc_piece_has_newline(tok, i)) nl = i;
    }
    CHECK(nl >= 0 && stop >= 0, "the vocabulary has a stop token (%d) and a newline token (%d)", stop, nl);
    if (nl < 0 || stop < 0) return;
    float *lg = malloc((size_t)n * sizeof *lg);
    for (int t = 0; t < 20; t++) {
        for (int i = 0; i < n; i++) lg[i] = (float)(10 * test_unif() - 5);
        lg[stop] = 9; lg[nl] = 8;
        int want = -1;
        double best = -1e300;
        for (int i = 0; i < n; i++)
            if (!tok_is_stop(tok, i) && !mc_piece_has_newline(tok, i) && (double)lg[i] > best) { best = lg[i]; want = i; }
        int got = mc_argmax_no_stop(tok, lg, n, 1);
        CHECK(got == want, "first token %d, want %d", got, want);
        int got_nl = mc_argmax_no_stop(tok, lg, n, 0);        /* newline allowed: the newline token wins */
        CHECK(got_nl == nl, "newline allowed: %d, want %d", got_nl, nl);
    }
    free(lg);
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        printf("usage: test_textgen   (NIAH and RULER generators with the model's tokenizer)\n");
        return 0;
    }
    test_seed();
    const char *model = model_default_path();
    if (access(model, R_OK)) {
        printf("SKIP: %s is absent (make model)\n", model);
        return check_done("test_textgen");
    }
    gguf_file f;
    char err[512];
    kv_tokenizer *t = NULL;
    if (gguf_open(&f, model, err, sizeof err) || !(t = tok_load(&f, err, sizeof err))) {
        CHECK(0, "%s", err);
        return check_done("test_textgen");
    }
    tok = t;
    size_t len = 0;
    char *essays = haystack_load(NULL, &len, err, sizeof err), *hay = essays;
    if (!essays) {
        printf("SKIP: essays (%s); NIAH uses generated text\n", err);
        hay = fake_haystack(&len);
    }
    test_min_new_token();
    test_niah(hay, len);
    test_niah_variants(hay, len);
    test_ruler(essays, essays ? len : 0);
    test_ruler_qa();
    free(hay);
    tok_free(t);
    gguf_close(&f);
    return check_done("test_textgen");
}
