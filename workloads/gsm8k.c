/* GSM8K few-shot loader (see gsm8k.h). */
#include <stdlib.h>
#include <string.h>
#include "gsm8k.h"
#include "metrics.h"
#include "../kernels/strbuf.h"

void gsm_defaults(gsm_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_shots = GSM_DEFAULT_SHOTS;
}

/* question and the reference number of a record; -1 with err if malformed. */
static int read_item(const json_value *v, const char **q, const char **a, char *num, size_t cap, char *err, size_t errlen) {
    if (v->type != JSON_OBJECT) { snprintf(err, errlen, "expected a JSON object (got %s)", json_type_name(v->type)); return -1; }
    if (json_field_string(v, "question", q, err, errlen) || json_field_string(v, "answer", a, err, errlen)) return -1;
    if (!metric_gsm8k_reference(*a, num, cap)) { snprintf(err, errlen, "field 'answer' has no \"#### N\" final answer"); return -1; }
    return 0;
}

typedef struct { strbuf shots; int n, want; } shot_load;

static int on_shot(void *ctx, const json_value *v, int line, char *err, size_t errlen) {
    shot_load *S = ctx;
    const char *q, *a;
    char num[64];
    (void)line;
    if (S->n >= S->want) return 1;
    if (read_item(v, &q, &a, num, sizeof num, err, errlen)) return -1;
    sb_printf(&S->shots, "Question: %s\nAnswer: %s\n\n", q, a);
    S->n++;
    return 0;
}

typedef struct { const gsm_opts *o; const char *shots; tc_list *out; } test_load;

static int on_test(void *ctx, const json_value *v, int line, char *err, size_t errlen) {
    test_load *T = ctx;
    const char *q, *a;
    char num[64];
    if (T->o->limit > 0 && T->out->n >= T->o->limit) return 1;
    if (read_item(v, &q, &a, num, sizeof num, err, errlen)) return -1;
    tc_case c;
    tc_case_init(&c);
    strbuf qb = {0}, id = {0};
    sb_printf(&qb, "Question: %s\nAnswer:", q);
    sb_printf(&id, "gsm8k-%d", line);
    char *question = sb_take(&qb);
    const char *ans[1] = {num};
    c.id = sb_take(&id);
    c.task = strdup("gsm8k");
    c.question = strdup(q);
    c.context = strdup(T->shots);
    if (!question || !c.id || !c.task || !c.question || !c.context || tc_set_answers(&c, ans, 1) ||
        tc_set_prompt(&c, T->o->tok, 0, T->shots, question, "")) {
        free(question);
        tc_case_free(&c);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    free(question);
    c.scorer = TC_SCORE_GSM8K;
    c.max_new_tokens = GSM_MAX_NEW;
    c.settings.question_after = T->o->question_after;
    if (tc_list_push(T->out, &c)) { snprintf(err, errlen, "out of memory"); return -1; }
    return 0;
}

int gsm_load(const gsm_opts *o, const char *test_path, tc_list *out, char *err, size_t errlen) {
    if (!o->tok) { snprintf(err, errlen, "gsm8k: no tokenizer"); return -1; }
    char *shots_path = NULL;
    if (o->shots_path) {
        shots_path = strdup(o->shots_path);
    } else {                                        /* train.jsonl beside the test file */
        const char *slash = strrchr(test_path, '/');
        strbuf p = {0};
        if (slash) sb_putn(&p, test_path, (size_t)(slash - test_path + 1));
        sb_puts(&p, "train.jsonl");
        shots_path = sb_take(&p);
    }
    if (!shots_path) { snprintf(err, errlen, "out of memory"); return -1; }
    shot_load S = {{0}, 0, o->n_shots > 0 ? o->n_shots : GSM_DEFAULT_SHOTS};
    jsonl_stats st;
    int rc = jsonl_read(shots_path, on_shot, &S, &st, o->log, err, errlen);
    if (rc < 0) {
        snprintf(err + strlen(err), errlen - strlen(err), " (the %d-shot examples: pass --shots FILE)", S.want);
    } else if (S.n < S.want) {
        snprintf(err, errlen, "%s: only %d valid examples, %d shots wanted", shots_path, S.n, S.want);
        rc = -1;
    } else if (S.shots.oom) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    free(shots_path);
    if (rc < 0) { sb_free(&S.shots); return -1; }
    test_load T = {o, S.shots.p, out};
    rc = jsonl_read(test_path, on_test, &T, &st, o->log, err, errlen);
    out->skipped += st.skipped;
    sb_free(&S.shots);
    return rc < 0 ? -1 : 0;
}
