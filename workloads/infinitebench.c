/* InfiniteBench loader: official prompts, generation lengths and scoring (see infinitebench.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "task_dir.h"
#include "infinitebench.h"
#include "../kernels/strbuf.h"

typedef struct {
    const char *file, *alias, *prompt;
    int max_new;
    tc_scorer scorer;
    int options;              /* 1: the record has four options and the answer is one of them */
} ib_task;

#define HIDDEN "There is an important info hidden inside a lot of irrelevant text. Find it"
#define OPTS "\nA. {OPTION_A}\nB. {OPTION_B}\nC. {OPTION_C}\nD. {OPTION_D}"

/* The prompts are src/prompt.py's gpt4_templates byte for byte (Code.Debug: "inspect the
 * options", where claude2_templates says "inspect through the options"). */
static const ib_task TASKS[IB_N_TASKS] = {
    {"passkey", "Retrieve.PassKey", HIDDEN " and memorize them. I will quiz you about the important information "
     "there.\n\n{context}\n\n{input}", 6, TC_SCORE_FIRST_INT, 0},
    {"number_string", "Retrieve.Number", HIDDEN ". I will quiz you about the important information there.\n\n{context}"
     "\n\n{input}", 12, TC_SCORE_FIRST_INT, 0},
    {"kv_retrieval", "Retrieve.KV", "Extract the value corresponding to the specified key in the JSON object below."
     "\n\n{context}\n\n{input}", 50, TC_SCORE_KV_WORD, 0},
    {"longbook_qa_eng", "En.QA", "Read the book below and answer a question.\n\n{context}\n\nQuestion: {input}\n\n"
     "Be very concise.", 40, TC_SCORE_QA_F1, 0},
    {"longbook_choice_eng", "En.MC", "Read the book and answer the question.\n\n{context}\n\nQuestion: {input}\n\nOnly "
     "one of the following options is correct, tell me the answer using one single letter (A, B, C, or D). Don't say "
     "anything else." OPTS, 40, TC_SCORE_CHOICE, 1},
    {"longbook_sum_eng", "En.Sum", "Summarize the following book.\n\n{context}", 1200, TC_SCORE_ROUGE_LSUM, 0},
    /* gpt4_templates' wording (OpenBMB/InfiniteBench src/prompt.py), "funtion" included */
    {"code_debug", "Code.Debug", "There is ONLY ONE function in the large project that is deliberately made to include "
     "an obvious error. Please find the function that contains the most obvious errors. I will give you four options to "
     "narrow your scope. You can inspect the options and think. Eventually, tell me the answer using one single "
     "letter (A, B, C, or D).\n\n{context}\n\nWhich funtion has deliberate error?" OPTS "\n\nYou should first find the "
     "functions in the options. Repeat their content, inspect through code, and at last give me your answer for the "
     "function that has the deliberate and obvious error in A, B, C, or D.", 5, TC_SCORE_CODE_DEBUG, 1},
};

void ib_defaults(ib_opts *o) {
    memset(o, 0, sizeof *o);
    o->use_chat = 1;
}

const char *ib_task_name(int i) { return i >= 0 && i < IB_N_TASKS ? TASKS[i].file : NULL; }

int ib_task_index(const char *name) {
    for (int i = 0; i < IB_N_TASKS; i++)
        if (!strcasecmp(name, TASKS[i].file) || !strcasecmp(name, TASKS[i].alias)) return i;
    return -1;
}

int ib_task_max_new(int i) { return i >= 0 && i < IB_N_TASKS ? TASKS[i].max_new : 0; }

typedef struct {
    const ib_opts *o;
    const ib_task *task;
    tc_list *out;
    int budget;              /* middle-truncation budget in tokens, 0: none */
} ib_load;

static int on_record(void *ctx, const json_value *v, int line, char *err, size_t errlen) {
    ib_load *L = ctx;
    const ib_task *T = L->task;
    if (L->o->limit > 0 && L->out->n >= L->o->limit) return 1;
    if (v->type != JSON_OBJECT) { snprintf(err, errlen, "expected a JSON object (got %s)", json_type_name(v->type)); return -1; }
    const char *context, *input;
    char **answers = NULL, **options = NULL;
    int na = 0, no = 0, rc = -1;
    if (json_field_string(v, "context", &context, err, errlen) || json_field_string(v, "input", &input, err, errlen))
        return -1;
    if (json_field_strings(v, "answer", 1, 1, &answers, &na, err, errlen)) return -1;
    tc_case c;
    tc_case_init(&c);
    if (!na) { snprintf(err, errlen, "field 'answer' is empty"); goto out; }
    for (int i = 0; i < na; i++)   /* "" is in every output: a data error, not a score of 1 */
        if (!*answers[i]) { snprintf(err, errlen, "field 'answer' holds an empty answer (answer %d)", i + 1); goto out; }
    const json_value *idv = json_get(v, "id");
    if (idv && idv->type == JSON_NUMBER && !(fabs(idv->num) <= 9007199254740992.0 && idv->num == floor(idv->num))) {
        snprintf(err, errlen, "field 'id' must be an integer up to 2^53 or a string (got %g)", idv->num);
        goto out;
    }
    const char *names[6] = {"input", "OPTION_A", "OPTION_B", "OPTION_C", "OPTION_D", NULL};
    const char *values[6] = {input, "", "", "", "", NULL};
    if (T->options) {                              /* answers become {option text, letter} */
        if (json_field_strings(v, "options", 0, 1, &options, &no, err, errlen)) goto out;
        if (no != 4) { snprintf(err, errlen, "field 'options' must hold 4 options (got %d)", no); goto out; }
        int k = 0;
        while (k < 4 && strcmp(options[k], answers[0])) k++;
        if (k == 4) { snprintf(err, errlen, "field 'answer' is not one of the options"); goto out; }
        for (int i = 0; i < 4; i++) values[1 + i] = options[i];
        char letter[2] = {(char)('A' + k), 0}, *l = strdup(letter);
        if (!l) { snprintf(err, errlen, "out of memory"); goto out; }
        for (int i = 1; i < na; i++) free(answers[i]);
        na = 2;
        char **two = realloc(answers, 2 * sizeof *two);
        if (!two) { free(l); na = 1; snprintf(err, errlen, "out of memory"); goto out; }
        answers = two;
        answers[1] = l;
    }
    if (tc_build_from_template(&c, L->o->tok, L->o->use_chat, T->prompt, context, names, values, 5, L->budget,
                               "", err, errlen))
        goto out;
    strbuf idb = {0}, tk = {0};
    if (idv && idv->type == JSON_NUMBER) sb_printf(&idb, "%s-%lld", T->file, (long long)idv->num);
    else if (idv && idv->type == JSON_STRING) sb_printf(&idb, "%s-%s", T->file, idv->str);
    else sb_printf(&idb, "%s-%d", T->file, line);
    sb_printf(&tk, "infinitebench:%s", T->file);
    c.id = sb_take(&idb);
    c.task = sb_take(&tk);
    c.question = strdup(input);
    if (!c.id || !c.task || !c.question) { snprintf(err, errlen, "out of memory"); goto out; }
    c.answers = answers;
    c.n_answers = na;
    answers = NULL;
    c.max_new_tokens = T->max_new;
    c.scorer = T->scorer;
    c.settings.question_after = L->o->question_after;
    if (tc_list_push(L->out, &c)) { snprintf(err, errlen, "out of memory"); goto out; }
    rc = 0;
out:
    tc_case_free(&c);
    json_strings_free(answers, na);
    json_strings_free(options, no);
    return rc;
}

int ib_load_task(const ib_opts *o, int task, const char *path, tc_list *out, jsonl_stats *st, char *err,
                 size_t errlen) {
    if (task < 0 || task >= IB_N_TASKS) { snprintf(err, errlen, "infinitebench: no task %d", task); return -1; }
    if (!o->tok) { snprintf(err, errlen, "infinitebench: no tokenizer"); return -1; }
    ib_load L = {o, &TASKS[task], out, o->max_tokens};
    if (!L.budget && o->max_ctx > 0) {
        int wrap = tc_wrapper_tokens(o->tok, o->use_chat, "");
        L.budget = o->max_ctx - TASKS[task].max_new - wrap - 8;
        if (wrap < 0 || L.budget < 64) {
            snprintf(err, errlen, "infinitebench:%s: a %d-token context leaves no room for prompts", TASKS[task].file, o->max_ctx);
            return -1;
        }
    }
    int rc = jsonl_read(path, on_record, &L, st, o->log, err, errlen);
    out->skipped += st->skipped;
    return rc < 0 ? -1 : 0;
}

typedef struct {
    const ib_opts *o;
    tc_list *out;
} dir_load;

static const char *task_file(int k) { return TASKS[k].file; }

static int load_one(void *ctx, int k, const char *path, char *err, size_t errlen) {
    const dir_load *d = ctx;
    jsonl_stats st;
    return ib_load_task(d->o, k, path, d->out, &st, err, errlen);
}

/* The benchmark's other 5 tasks (src/eval_utils.py, compute_scores.py): not ported. */
static const task_unsupported UNSUPPORTED[] = {
    {"longbook_qa_chn", "Zh.QA", "Chinese; scored by qa_f1_zh_score, which segments words with jieba (not in kvbench)"},
    {"longdialogue_qa_eng", "En.Dia", "its prompt and scorer are not ported to kvbench"},
    {"math_find", "Math.Find", "its prompt (a prefix built from each question) and scorer are not ported to kvbench"},
    {"math_calc", "Math.Calc", "it generates up to 30000 tokens, scored value by value; not ported to kvbench"},
    {"code_run", "Code.Run", "its prompt and scorer are not ported to kvbench"},
};

static const task_dir TD = {"infinitebench", "InfiniteBench", "passkey, number_string, kv_retrieval, "
                            "longbook_qa_eng, longbook_choice_eng, longbook_sum_eng, code_debug", IB_N_TASKS, task_file,
                            ib_task_index, load_one, UNSUPPORTED, (int)(sizeof UNSUPPORTED / sizeof UNSUPPORTED[0])};

int ib_check_tasks(const char *tasks, char *err, size_t errlen) { return task_dir_check(&TD, tasks, err, errlen); }

int ib_load_dir(const ib_opts *o, const char *dir, const char *tasks, tc_list *out, char *err, size_t errlen) {
    dir_load d = {o, out};
    return task_dir_load(&TD, dir, tasks, &d, o->log, err, errlen);
}
