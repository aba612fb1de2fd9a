/* Text cases: construction, prompt pieces, tokenisation and scoring (see textcase.h). */
#include <stdlib.h>
#include <string.h>
#include "metrics.h"
#include "../kernels/strbuf.h"
#include "textcase.h"

const char *tc_scorer_name(tc_scorer s) {
    static const char *const names[TC_SCORE_COUNT_] = {
        "niah", "string_match_all", "string_match_part", "qa_f1", "rouge_l", "classification",
        "retrieval", "count", "code_sim", "choice", "code_debug", "first_int", "kv_word", "gsm8k", "rouge_lsum"};
    return (unsigned)s < TC_SCORE_COUNT_ ? names[s] : "?";
}

char *tc_strdup(const char *s) { return strdup(s ? s : ""); }

void tc_case_init(tc_case *c) {
    memset(c, 0, sizeof *c);
    c->length = c->needle_token = c->context_tokens = c->prompt_tokens = -1;
    c->depth = c->depth_actual = -1;
    snprintf(c->settings.template_name, sizeof c->settings.template_name, "none");
}

static void free_strs(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

void tc_case_free(tc_case *c) {
    free(c->id); free(c->task); free(c->context); free(c->question);
    free(c->tpl_head); free(c->body_context); free(c->body_question); free(c->tpl_tail);
    free(c->answer_prefix); free(c->prompt); free(c->reference);
    free_strs(c->answers, c->n_answers);
    free_strs(c->classes, c->n_classes);
    tc_case_init(c);
}

int tc_list_push(tc_list *l, tc_case *c) {
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 16;
        tc_case *nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) { tc_case_free(c); return -1; }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = *c;
    tc_case_init(c);
    return 0;
}

void tc_list_free(tc_list *l) {
    for (int i = 0; i < l->n; i++) tc_case_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static const char SENTINEL[] = "\x01kvbench-user\x01";

const char *tc_template_name(const kv_tokenizer *t) {
    char *p = tok_chat_prompt(t, NULL, "");
    const char *name = !p ? "none" : strstr(p, "<|im_start|>") ? "chatml"
                     : strstr(p, "<|start_header_id|>") ? "llama3" : strstr(p, "[INST]") ? "inst" : "other";
    free(p);
    return name;
}

int tc_set_prompt(tc_case *c, const kv_tokenizer *t, int use_chat, const char *body_context,
                  const char *body_question, const char *answer_prefix) {
    return tc_set_prompt_shot(c, t, use_chat, NULL, NULL, body_context, body_question, answer_prefix);
}

int tc_set_prompt_shot(tc_case *c, const kv_tokenizer *t, int use_chat, const char *shot_user, const char *shot_reply,
                       const char *body_context, const char *body_question, const char *answer_prefix) {
    char *head = NULL, *tail = NULL;
    if (use_chat && t) {
        char *full = tok_chat_prompt(t, NULL, SENTINEL);
        char *at = full ? strstr(full, SENTINEL) : NULL;
        if (!at) { free(full); return -1; }
        head = strndup(full, (size_t)(at - full));
        tail = strdup(at + strlen(SENTINEL));
        free(full);
        snprintf(c->settings.template_name, sizeof c->settings.template_name, "%s", tc_template_name(t));
    } else {
        head = strdup("");
        tail = strdup("");
        snprintf(c->settings.template_name, sizeof c->settings.template_name, "none");
    }
    if (shot_user && head && tail) {       /* the worked example: a whole turn, then "\n", then ours */
        strbuf h = {0};
        sb_printf(&h, "%s%s%s%s\n%s", head, shot_user, tail, shot_reply ? shot_reply : "", head);
        free(head);
        head = sb_take(&h);
    }
    free(c->tpl_head); free(c->tpl_tail); free(c->body_context); free(c->body_question);
    free(c->answer_prefix); free(c->prompt);
    c->tpl_head = head;
    c->tpl_tail = tail;
    c->body_context = tc_strdup(body_context);
    c->body_question = tc_strdup(body_question);
    c->answer_prefix = tc_strdup(answer_prefix);
    strbuf b = {0};
    if (head && tail && c->body_context && c->body_question && c->answer_prefix) {
        sb_puts(&b, head); sb_puts(&b, c->body_context); sb_puts(&b, c->body_question);
        sb_puts(&b, tail); sb_puts(&b, c->answer_prefix);
    } else {
        b.oom = 1;
    }
    c->prompt = sb_take(&b);
    if (!c->prompt) return -1;
    if (t) {
        int32_t *ids;
        int n, nc;
        if (tc_tokenize(t, c, &ids, &n, &nc)) return -1;
        free(ids);
        c->prompt_tokens = n;
    }
    return 0;
}

int tc_wrapper_tokens(const kv_tokenizer *t, int use_chat, const char *answer_prefix) {
    tc_case c;
    tc_case_init(&c);
    int n = tc_set_prompt(&c, t, use_chat, "", "", answer_prefix) ? -1 : c.prompt_tokens;
    tc_case_free(&c);
    return n;
}

/* Appends the ids of text to (*ids, *n, *cap). */
static int append_ids(const kv_tokenizer *t, const char *text, int special, int32_t **ids, int *n, int *cap) {
    size_t len = strlen(text);
    if (!len) return 0;
    int room = *cap - *n;
    int k = tok_encode(t, text, len, special, *ids + *n, room);
    if (k < 0) return -1;
    if (k > room) {
        int nc = *n + k + 1024;
        int32_t *ni = realloc(*ids, (size_t)nc * sizeof *ni);
        if (!ni) return -1;
        *ids = ni;
        *cap = nc;
        if (tok_encode(t, text, len, special, *ids + *n, k) != k) return -1;
    }
    *n += k;
    return 0;
}

int tc_tokenize(const kv_tokenizer *t, const tc_case *c, int32_t **ids, int *n, int *n_context) {
    int cap = 1024, k = 0;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    if (!v) return -1;
    if (tok_add_bos(t) && tok_bos(t) >= 0) v[k++] = tok_bos(t);
    int rc = append_ids(t, c->tpl_head ? c->tpl_head : "", 1, &v, &k, &cap);
    if (!rc) rc = append_ids(t, c->body_context ? c->body_context : "", 0, &v, &k, &cap);
    int nc = k;
    if (!rc) rc = append_ids(t, c->body_question ? c->body_question : "", 0, &v, &k, &cap);
    if (!rc) rc = append_ids(t, c->tpl_tail ? c->tpl_tail : "", 1, &v, &k, &cap);
    if (!rc) rc = append_ids(t, c->answer_prefix ? c->answer_prefix : "", 0, &v, &k, &cap);
    if (rc) { free(v); return -1; }
    *ids = v;
    *n = k;
    *n_context = nc;
    return 0;
}

int tc_set_answers(tc_case *c, const char *const *answers, int n) {
    char **v = calloc((size_t)(n > 0 ? n : 1), sizeof *v);
    if (!v) return -1;
    for (int i = 0; i < n; i++)
        if (!(v[i] = tc_strdup(answers[i]))) { free_strs(v, i); return -1; }
    free_strs(c->answers, c->n_answers);
    c->answers = v;
    c->n_answers = n;
    return 0;
}

/* Max over references of a [0,1] metric, x100. */
static double max_ref(const tc_case *c, const char *out, double (*f)(const char *, const char *)) {
    double best = 0;
    for (int i = 0; i < c->n_answers; i++) {
        double s = f(out, c->answers[i]);
        if (s > best) best = s;
    }
    return 100.0 * best;
}

double tc_score(const tc_case *c, const char *output) {
    char *line = NULL;
    const char *out = output ? output : "";
    if (c->first_line_only) {
        line = metric_first_line(out);
        if (!line) return 0;
        out = line;
    }
    const char *const *refs = (const char *const *)c->answers;
    const char *a0 = c->n_answers > 0 ? c->answers[0] : "";
    const char *a1 = c->n_answers > 1 ? c->answers[1] : "";
    double s = 0;
    switch (c->scorer) {
    case TC_SCORE_NIAH: s = c->n_answers && metric_match_all(out, refs, c->n_answers) == 100.0 ? 100 : 0; break;
    case TC_SCORE_MATCH_ALL: s = metric_match_all(out, refs, c->n_answers); break;
    case TC_SCORE_MATCH_PART: s = metric_match_part(out, refs, c->n_answers); break;
    case TC_SCORE_QA_F1: s = max_ref(c, out, metric_qa_f1); break;
    case TC_SCORE_ROUGE_L: s = max_ref(c, out, metric_rouge_l); break;
    case TC_SCORE_ROUGE_LSUM: s = max_ref(c, out, metric_rouge_lsum); break;
    case TC_SCORE_RETRIEVAL: s = max_ref(c, out, metric_retrieval); break;
    case TC_SCORE_COUNT: s = max_ref(c, out, metric_count); break;
    case TC_SCORE_CODE_SIM: s = max_ref(c, out, metric_code_sim); break;
    case TC_SCORE_CLASSIFICATION:
        for (int i = 0; i < c->n_answers; i++) {
            double v = metric_classification(out, c->answers[i], (const char *const *)c->classes, c->n_classes);
            if (100 * v > s) s = 100 * v;
        }
        break;
    case TC_SCORE_CHOICE: s = 100.0 * metric_choice(out, a0, a1); break;
    case TC_SCORE_CODE_DEBUG: s = 100.0 * metric_code_debug(out, a0, a1); break;
    case TC_SCORE_FIRST_INT: s = 100.0 * metric_first_int(out, a0); break;
    case TC_SCORE_KV_WORD: s = 100.0 * metric_kv_word(out, a0); break;
    case TC_SCORE_GSM8K: s = 100.0 * metric_gsm8k_match(out, a0); break;
    default: break;
    }
    free(line);
    return s;
}
