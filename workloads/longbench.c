/* LongBench loader: official prompts, generation lengths and metrics (see longbench.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "task_dir.h"
#include "longbench.h"
#include "../kernels/strbuf.h"

typedef struct {
    const char *name, *prompt;
    int max_new;
    tc_scorer scorer;
    int chat, first_line;
} lb_task;

#define QA_PASSAGES "Answer the question based on the given passages. Only give me the answer and do not output any other words."
#define QASPER_RULES "as concisely as you can, using a single phrase or sentence if possible. If the question cannot be " \
    "answered based on the information in the article, write \"unanswerable\". If the question is a yes/no question, " \
    "answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation."

/* The prompts are dataset2prompt.json byte for byte, typos included (narrativeqa's
 * "asconcisely"): a corrected word changes the tokens the model sees. */
static const lb_task TASKS[LB_N_TASKS] = {
    {"narrativeqa", "You are given a story, which can be either a novel or a movie script, and a question. Answer the "
     "question asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: "
     "{context}\n\nNow, answer the question based on the story asconcisely as you can, using a single phrase if "
     "possible. Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:", 128, TC_SCORE_QA_F1, 1, 0},
    {"qasper", "You are given a scientific article and a question. Answer the question " QASPER_RULES "\n\nArticle: "
     "{context}\n\n Answer the question based on the above article " QASPER_RULES "\n\nQuestion: {input}\n\nAnswer:",
     128, TC_SCORE_QA_F1, 1, 0},
    {"multifieldqa_en", "Read the following text and answer briefly.\n\n{context}\n\nNow, answer the following question "
     "based on the above text, only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
     64, TC_SCORE_QA_F1, 1, 0},
    {"hotpotqa", QA_PASSAGES "\n\nThe following are given passages.\n{context}\n\n" QA_PASSAGES "\n\nQuestion: {input}\nAnswer:",
     32, TC_SCORE_QA_F1, 1, 0},
    {"2wikimqa", QA_PASSAGES "\n\nThe following are given passages.\n{context}\n\n" QA_PASSAGES "\n\nQuestion: {input}\nAnswer:",
     32, TC_SCORE_QA_F1, 1, 0},
    {"musique", QA_PASSAGES "\n\nThe following are given passages.\n{context}\n\n" QA_PASSAGES "\n\nQuestion: {input}\nAnswer:",
     32, TC_SCORE_QA_F1, 1, 0},
    {"gov_report", "You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n"
     "{context}\n\nNow, write a one-page summary of the report.\n\nSummary:", 512, TC_SCORE_ROUGE_L, 1, 0},
    {"qmsum", "You are given a meeting transcript and a query containing a question or instruction. Answer the query in "
     "one or more sentences.\n\nTranscript:\n{context}\n\nNow, answer the query based on the above meeting transcript in "
     "one or more sentences.\n\nQuery: {input}\nAnswer:", 512, TC_SCORE_ROUGE_L, 1, 0},
    {"multi_news", "You are given several news passages. Write a one-page summary of all news. \n\nNews:\n{context}\n\n"
     "Now, write a one-page summary of all the news.\n\nSummary:", 512, TC_SCORE_ROUGE_L, 1, 0},
    {"trec", "Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n{input}",
     64, TC_SCORE_CLASSIFICATION, 0, 1},
    {"triviaqa", "Answer the question based on the given passage. Only give me the answer and do not output any other "
     "words. The following are some examples.\n\n{context}\n\n{input}", 32, TC_SCORE_QA_F1, 0, 1},
    {"samsum", "Summarize the dialogue into a few short sentences. The following are some examples.\n\n{context}\n\n{input}",
     128, TC_SCORE_ROUGE_L, 0, 1},
    {"passage_count", "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please "
     "carefully read these paragraphs and determine how many unique paragraphs there are after removing duplicates. In "
     "other words, how many non-repeating paragraphs are there in total?\n\n{context}\n\nPlease enter the final count of "
     "unique paragraphs after removing duplicates. The output format should only contain the number, such as 1, 2, 3, "
     "and so on.\n\nThe final answer is: ", 32, TC_SCORE_COUNT, 1, 0},
    {"passage_retrieval_en", "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which "
     "paragraph the abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n{input}\n\nPlease enter the number "
     "of the paragraph that the abstract is from. The answer format must be like \"Paragraph 1\", \"Paragraph 2\", etc."
     "\n\nThe answer is: ", 32, TC_SCORE_RETRIEVAL, 1, 0},
    {"lcc", "Please complete the code given below. \n{context}Next line of code:\n", 64, TC_SCORE_CODE_SIM, 0, 0},
    {"repobench-p", "Please complete the code given below. \n{context}{input}Next line of code:\n", 64, TC_SCORE_CODE_SIM, 0, 0},
};

void lb_defaults(lb_opts *o) {
    memset(o, 0, sizeof *o);
    o->use_chat = 1;
}

const char *lb_task_name(int i) { return i >= 0 && i < LB_N_TASKS ? TASKS[i].name : NULL; }

int lb_task_index(const char *name) {
    for (int i = 0; i < LB_N_TASKS; i++)
        if (!strcmp(name, TASKS[i].name)) return i;
    return -1;
}

int lb_task_max_new(int i) { return i >= 0 && i < LB_N_TASKS ? TASKS[i].max_new : 0; }

typedef struct {
    const lb_opts *o;
    const lb_task *task;
    tc_list *out;
    int budget;              /* middle-truncation budget in tokens, 0: none */
} lb_load;

static int on_record(void *ctx, const json_value *v, int line, char *err, size_t errlen) {
    lb_load *L = ctx;
    const lb_task *T = L->task;
    if (L->o->limit > 0 && L->out->n >= L->o->limit) return 1;
    if (v->type != JSON_OBJECT) { snprintf(err, errlen, "expected a JSON object (got %s)", json_type_name(v->type)); return -1; }
    const char *context, *input, *id = NULL;
    char **answers = NULL, **classes = NULL;
    int na = 0, nc = 0;
    if (json_field_string(v, "context", &context, err, errlen) || json_field_string(v, "input", &input, err, errlen))
        return -1;
    const json_value *idv = json_get(v, "_id");
    if (idv && json_field_string(v, "_id", &id, err, errlen)) return -1;
    const json_value *len = json_get(v, "length");
    if (len && len->type != JSON_NUMBER) { snprintf(err, errlen, "field 'length' must be a number (got %s)", json_type_name(len->type)); return -1; }
    if (len && !(len->num >= 0 && len->num <= INT_MAX && len->num == (int)len->num)) {
        snprintf(err, errlen, "field 'length' must be a word count in 0..%d (got %g)", INT_MAX, len->num);
        return -1;
    }
    if (id)   /* a repeated _id would be stored as one case (the case key), the other dropped */
        for (int i = 0; i < L->out->n; i++)
            if (!strcmp(L->out->v[i].id, id)) {
                snprintf(err, errlen, "_id '%.200s' is taken by an earlier record (a case is stored by its id)", id);
                return -1;
            }
    const json_value *cls = json_get(v, "all_classes");
    if (T->scorer == TC_SCORE_CLASSIFICATION || (cls && cls->type != JSON_NULL))
        if (json_field_strings(v, "all_classes", 0, 0, &classes, &nc, err, errlen)) return -1;
    if (json_field_strings(v, "answers", 0, 1, &answers, &na, err, errlen)) { json_strings_free(classes, nc); return -1; }
    int empty = 0;   /* "" scores 0 against everything: a data error */
    while (empty < na && *answers[empty]) empty++;
    if (!na || empty < na) {
        if (!na) snprintf(err, errlen, "field 'answers' is empty");
        else snprintf(err, errlen, "field 'answers' holds an empty answer (answer %d)", empty + 1);
        json_strings_free(classes, nc);
        json_strings_free(answers, na);
        return -1;
    }
    tc_case c;
    tc_case_init(&c);
    static const char *const names[] = {"input"};
    const char *values[] = {input};
    int rc = tc_build_from_template(&c, L->o->tok, L->o->use_chat && T->chat, T->prompt, context, names, values, 1,
                                    L->budget, "", err, errlen);
    strbuf idb = {0}, tk = {0};
    if (id) sb_puts(&idb, id);
    else sb_printf(&idb, "%s-%d", T->name, line);
    sb_printf(&tk, "longbench:%s", T->name);
    c.id = sb_take(&idb);
    c.task = sb_take(&tk);
    c.question = strdup(input);
    c.answers = answers;
    c.n_answers = na;
    c.classes = classes;
    c.n_classes = nc;
    if (!rc && (!c.id || !c.task || !c.question)) { rc = -1; snprintf(err, errlen, "out of memory"); }
    c.max_new_tokens = T->max_new;
    c.scorer = T->scorer;
    c.first_line_only = T->first_line;
    c.stop_newline = !strcmp(T->name, "samsum");         /* pred.py adds "\n" as an end token */
    c.min_new_tokens = c.stop_newline;                   /* ... and min_length = prompt + 1 */
    c.length = len ? (int)len->num : -1;
    c.settings.question_after = L->o->question_after;
    if (rc) { tc_case_free(&c); return -1; }
    if (tc_list_push(L->out, &c)) { snprintf(err, errlen, "out of memory"); return -1; }
    return 0;
}

int lb_load_task(const lb_opts *o, int task, const char *path, tc_list *out, jsonl_stats *st, char *err,
                 size_t errlen) {
    if (task < 0 || task >= LB_N_TASKS) { snprintf(err, errlen, "longbench: no task %d", task); return -1; }
    if (!o->tok) { snprintf(err, errlen, "longbench: no tokenizer"); return -1; }
    lb_load L = {o, &TASKS[task], out, o->max_tokens};
    if (!L.budget && o->max_ctx > 0) {
        int wrap = tc_wrapper_tokens(o->tok, o->use_chat && TASKS[task].chat, "");
        L.budget = o->max_ctx - TASKS[task].max_new - wrap - 8;
        if (wrap < 0 || L.budget < 64) {
            snprintf(err, errlen, "longbench:%s: a %d-token context leaves no room for prompts", TASKS[task].name, o->max_ctx);
            return -1;
        }
    }
    int rc = jsonl_read(path, on_record, &L, st, o->log, err, errlen);
    out->skipped += st->skipped;
    return rc < 0 ? -1 : 0;
}

typedef struct {
    const lb_opts *o;
    tc_list *out;
} dir_load;

static const char *task_file(int k) { return TASKS[k].name; }

static int load_one(void *ctx, int k, const char *path, char *err, size_t errlen) {
    const dir_load *d = ctx;
    jsonl_stats st;
    return lb_load_task(d->o, k, path, d->out, &st, err, errlen);
}

/* LongBench v1's Chinese tasks: their metrics (eval.py) and prompts are not ported. */
static const task_unsupported UNSUPPORTED[] = {
    {"multifieldqa_zh", NULL, "Chinese; scored by qa_f1_zh_score, which segments words with jieba (not in kvbench)"},
    {"dureader", NULL, "Chinese; scored by rouge_zh_score, which segments words with jieba (not in kvbench)"},
    {"vcsum", NULL, "Chinese; scored by rouge_zh_score, which segments words with jieba (not in kvbench)"},
    {"lsht", NULL, "Chinese; kvbench runs LongBench's English tasks only (its prompt and classes are not ported)"},
    {"passage_retrieval_zh", NULL, "Chinese; kvbench runs LongBench's English tasks only (retrieval_zh_score is not ported)"},
};

static const task_dir TD = {"longbench", "LongBench", "narrativeqa, qasper, multifieldqa_en, hotpotqa, "
                            "2wikimqa, musique, gov_report, qmsum, multi_news, trec, triviaqa, samsum, passage_count, "
                            "passage_retrieval_en, lcc, repobench-p", LB_N_TASKS, task_file, lb_task_index, load_one,
                            UNSUPPORTED, (int)(sizeof UNSUPPORTED / sizeof UNSUPPORTED[0])};

int lb_check_tasks(const char *tasks, char *err, size_t errlen) { return task_dir_check(&TD, tasks, err, errlen); }

int lb_load_dir(const lb_opts *o, const char *dir, const char *tasks, tc_list *out, char *err, size_t errlen) {
    dir_load d = {o, out};
    return task_dir_load(&TD, dir, tasks, &d, o->log, err, errlen);
}
