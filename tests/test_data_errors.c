/* Data errors the loaders refuse, record by record, with "FILE:LINE: reason" (issue 27
 * items 15-17), next to a valid record that still loads:
 *  - an empty reference answer ("" is inside every output, so it would score 1.0 for
 *    RULER qa and InfiniteBench passkey, and 0 for LongBench): LongBench "answers": [""],
 *    InfiniteBench "answer": [""], SQuAD "text": "" and HotpotQA "answer": "" (the last
 *    two name the article, paragraph and question, as the file is one JSON document);
 *  - LongBench "length" and InfiniteBench "id" beyond what an int holds (1e30: undefined
 *    behaviour in the cast, a case id "passkey--9223372036854775808" in the release build);
 *  - two LongBench records with one _id (a case is stored by its id: the second would be
 *    dropped without a word);
 *  - SQuAD {"data": []} and HotpotQA [] are refused by name (qsort was called on NULL);
 *  - a LongBench Chinese or an unsupported InfiniteBench task file is never skipped
 *    silently (item 5): a folder scan names each, naming one is refused.
 * The prompts need the model's tokenizer (SKIP without the model). */
#include <unistd.h>
#include "check.h"
#include "../model/gguf.h"
#include "../model/tokenizer.h"
#include "../model/model.h"
#include "../workloads/infinitebench.h"
#include "../kernels/jsonl.h"
#include "../workloads/longbench.h"
#include "../workloads/ruler_qa.h"

static char dir[256];

static const char *put(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) { fprintf(stderr, "cannot write %s\n", path); exit(2); }
    return path;
}

static char *slurp(FILE *f) {
    long n = ftell(f);
    char *s = calloc((size_t)n + 1, 1);
    rewind(f);
    if (n > 0 && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fclose(f);
    return s;
}

static void want_line(const char *log, const char *path, int line, const char *reason) {
    char want[1024];
    snprintf(want, sizeof want, "%s:%d: %s\n", path, line, reason);
    CHECK(strstr(log, want) != NULL, "want '%s' in:\n%s", want, log);
}

#define LB_REC(ans, len, id) \
    "{\"input\": \"What is the dog called?\", \"context\": \"The dog is called Rex.\", \"answers\": [" ans "], " \
    "\"length\": " len ", \"_id\": \"" id "\"}\n"

static void test_longbench(const kv_tokenizer *tok) {
    const char *path = put("qasper.jsonl", LB_REC("\"Rex\"", "6", "a1") LB_REC("\"\"", "6", "a2") LB_REC("\"Rex\", \"\"", "6", "a3")
                                           LB_REC("\"Rex\"", "1e30", "a4") LB_REC("\"Rex\"", "-3", "a5")
                                           LB_REC("\"Rex\"", "6", "a1") LB_REC("\"Rex\"", "6.5", "a7") LB_REC("\"Rex\"", "6", "a8"));
    lb_opts o;
    lb_defaults(&o);
    o.tok = tok;
    o.log = tmpfile();
    tc_list l = {0};
    jsonl_stats st;
    char err[512];
    int rc = lb_load_task(&o, lb_task_index("qasper"), path, &l, &st, err, sizeof err);
    char *log = slurp(o.log);
    CHECK(rc == 0 && l.n == 2 && l.skipped == 6, "rc %d: %d cases, %d skipped: %s", rc, l.n, l.skipped, rc ? err : log);
    if (l.n == 2) CHECK(!strcmp(l.v[0].id, "a1") && !strcmp(l.v[1].id, "a8"), "cases %s, %s", l.v[0].id, l.v[1].id);
    want_line(log, path, 2, "field 'answers' holds an empty answer (answer 1)");
    want_line(log, path, 3, "field 'answers' holds an empty answer (answer 2)");
    want_line(log, path, 4, "field 'length' must be a word count in 0..2147483647 (got 1e+30)");
    want_line(log, path, 5, "field 'length' must be a word count in 0..2147483647 (got -3)");
    want_line(log, path, 6, "_id 'a1' is taken by an earlier record (a case is stored by its id)");
    want_line(log, path, 7, "field 'length' must be a word count in 0..2147483647 (got 6.5)");
    free(log);
    tc_list_free(&l);
    unlink(path);
}

#define IB_REC(ans, id) \
    "{\"context\": \"The pass key is 71432. Remember it.\", \"input\": \"What is the pass key?\", \"answer\": [" ans "], " \
    "\"options\": [], \"id\": " id "}\n"

static void test_infinitebench(const kv_tokenizer *tok) {
    const char *path = put("passkey.jsonl", IB_REC("\"71432\"", "0") IB_REC("\"\"", "1") IB_REC("\"71432\"", "1e30")
                                            IB_REC("\"71432\"", "-1e300") IB_REC("\"71432\"", "2.5") IB_REC("\"71432\"", "9007199254740992"));
    ib_opts o;
    ib_defaults(&o);
    o.tok = tok;
    o.log = tmpfile();
    tc_list l = {0};
    jsonl_stats st;
    char err[512];
    int rc = ib_load_task(&o, ib_task_index("passkey"), path, &l, &st, err, sizeof err);
    char *log = slurp(o.log);
    CHECK(rc == 0 && l.n == 2 && l.skipped == 4, "rc %d: %d cases, %d skipped: %s", rc, l.n, l.skipped, rc ? err : log);
    if (l.n == 2)
        CHECK(!strcmp(l.v[0].id, "passkey-0") && !strcmp(l.v[1].id, "passkey-9007199254740992"), "ids %s, %s", l.v[0].id,
              l.v[1].id);
    want_line(log, path, 2, "field 'answer' holds an empty answer (answer 1)");
    want_line(log, path, 3, "field 'id' must be an integer up to 2^53 or a string (got 1e+30)");
    want_line(log, path, 4, "field 'id' must be an integer up to 2^53 or a string (got -1e+300)");
    want_line(log, path, 5, "field 'id' must be an integer up to 2^53 or a string (got 2.5)");
    free(log);
    tc_list_free(&l);
    unlink(path);
}

/* Files of tasks the benchmark has and kvbench does not support: a scan of the folder
 * says so for each (issue 27 item 5), naming one is refused with its file. */
static void test_unsupported(const kv_tokenizer *tok) {
    char path[512], want[1024], err[512];
    put("qasper.jsonl", LB_REC("\"Rex\"", "6", "a1"));
    put("dureader.jsonl", LB_REC("\"Rex\"", "6", "z1"));
    put("math_calc.jsonl", IB_REC("\"1\"", "0"));
    put("passkey.jsonl", IB_REC("\"71432\"", "0"));
    lb_opts lo;
    lb_defaults(&lo);
    lo.tok = tok;
    lo.log = tmpfile();
    tc_list l = {0};
    int rc = lb_load_dir(&lo, dir, NULL, &l, err, sizeof err);
    char *log = slurp(lo.log);
    snprintf(want, sizeof want, "longbench: %s/dureader.jsonl: skipped: dureader is not supported: Chinese; scored by "
             "rouge_zh_score, which segments words with jieba", dir);
    CHECK(rc == 0 && l.n == 1 && strstr(log, want), "rc %d, %d cases, log: %s", rc, l.n, log);
    free(log);
    tc_list_free(&l);
    lo.log = NULL;
    rc = lb_load_dir(&lo, dir, "qasper,dureader", &l, err, sizeof err);
    snprintf(want, sizeof want, "longbench: task 'dureader' is not supported: Chinese");
    CHECK(rc == -1 && !strncmp(err, want, strlen(want)), "named: rc %d, %s", rc, err);
    tc_list_free(&l);
    ib_opts io;
    ib_defaults(&io);
    io.tok = tok;
    io.log = tmpfile();
    rc = ib_load_dir(&io, dir, NULL, &l, err, sizeof err);
    log = slurp(io.log);
    snprintf(want, sizeof want, "infinitebench: %s/math_calc.jsonl: skipped: math_calc is not supported: it generates "
             "up to 30000 tokens", dir);
    CHECK(rc == 0 && l.n == 1 && strstr(log, want), "rc %d, %d cases, log: %s", rc, l.n, log);
    free(log);
    tc_list_free(&l);
    rc = ib_load_dir(&io, dir, "math_calc", &l, err, sizeof err);
    snprintf(want, sizeof want, "infinitebench: task 'math_calc' is not supported: it generates");
    CHECK(rc == -1 && !strncmp(err, want, strlen(want)), "named: rc %d, %s", rc, err);
    tc_list_free(&l);
    static const char *const files[] = {"qasper.jsonl", "dureader.jsonl", "math_calc.jsonl", "passkey.jsonl"};
    for (int i = 0; i < 4; i++) snprintf(path, sizeof path, "%s/%s", dir, files[i]), unlink(path);
}

/* issue 27 item 7: narrativeqa's prompt is the official text byte for byte, typo and all
 * (THUDM/LongBench config/dataset2prompt.json has "asconcisely" twice). */
static void test_narrativeqa_prompt(const kv_tokenizer *tok) {
    const char *path = put("narrativeqa.jsonl", LB_REC("\"Rex\"", "6", "n1"));
    lb_opts o;
    lb_defaults(&o);
    o.tok = tok;
    o.use_chat = 0;
    o.log = tmpfile();
    tc_list l = {0};
    jsonl_stats st;
    char err[512];
    int rc = lb_load_task(&o, lb_task_index("narrativeqa"), path, &l, &st, err, sizeof err);
    const char *want = "You are given a story, which can be either a novel or a movie script, and a question. Answer the "
                       "question asconcisely as you can, using a single phrase if possible. Do not provide any explanation."
                       "\n\nStory: The dog is called Rex.\n\nNow, answer the question based on the story asconcisely as "
                       "you can, using a single phrase if possible. Do not provide any explanation.\n\nQuestion: What is "
                       "the dog called?\n\nAnswer:";
    CHECK(rc == 0 && l.n == 1 && !strcmp(l.v[0].prompt, want), "narrativeqa prompt: %s", l.n ? l.v[0].prompt : err);
    fclose(o.log);
    tc_list_free(&l);
    unlink(path);
}

/* InfiniteBench Code.Debug: the gpt4 template of src/prompt.py byte for byte (the
 * claude2 one says "inspect through the options"). */
static void test_code_debug_prompt(const kv_tokenizer *tok) {
    const char *path = put("code_debug.jsonl", "{\"context\": \"def f(): pass\", \"input\": \"\", \"answer\": [\"g\"], "
                                               "\"options\": [\"f\", \"g\", \"h\", \"k\"], \"id\": 0}\n");
    ib_opts o;
    ib_defaults(&o);
    o.tok = tok;
    o.use_chat = 0;
    o.log = tmpfile();
    tc_list l = {0};
    jsonl_stats st;
    char err[512];
    int rc = ib_load_task(&o, ib_task_index("code_debug"), path, &l, &st, err, sizeof err);
    const char *want = "There is ONLY ONE function in the large project that is deliberately made to include an obvious "
                       "error. Please find the function that contains the most obvious errors. I will give you four "
                       "options to narrow your scope. You can inspect the options and think. Eventually, tell me the "
                       "answer using one single letter (A, B, C, or D).\n\ndef f(): pass\n\nWhich funtion has "
                       "deliberate error?\nA. f\nB. g\nC. h\nD. k\n\nYou should first find the functions in the "
                       "options. Repeat their content, inspect through code, and at last give me your answer for the "
                       "function that has the deliberate and obvious error in A, B, C, or D.";
    CHECK(rc == 0 && l.n == 1 && !strcmp(l.v[0].prompt, want), "code_debug prompt: %s", l.n ? l.v[0].prompt : err);
    fclose(o.log);
    tc_list_free(&l);
    unlink(path);
}

static void test_ruler_qa(void) {
    char err[512], want[1024];
    put("squad.json", "{\"data\": [{\"paragraphs\": [{\"context\": \"Rex is a dog.\", \"qas\": [{\"question\": \"Who is Rex?\", "
                      "\"answers\": [{\"text\": \"a dog\"}]}, {\"question\": \"What?\", \"answers\": [{\"text\": \"a dog\"}, "
                      "{\"text\": \"\"}]}]}]}]}");
    ruler_qa_data *d = ruler_qa_load(dir, 1, err, sizeof err);
    snprintf(want, sizeof want, "%s/squad.json: article 1, paragraph 1, question 2: an empty answer 'text'", dir);
    CHECK(!d && !strcmp(err, want), "got '%s', want '%s'", d ? "loaded" : err, want);
    ruler_qa_free(d);
    put("hotpotqa.json", "[{\"question\": \"Who?\", \"answer\": \"\", \"context\": [[\"T\", [\"Rex is a dog.\"]]]}]");
    d = ruler_qa_load(dir, 0, err, sizeof err);
    snprintf(want, sizeof want, "%s/hotpotqa.json: question 1: an empty 'answer'", dir);
    CHECK(!d && !strcmp(err, want), "got '%s', want '%s'", d ? "loaded" : err, want);
    ruler_qa_free(d);
    /* empty files are refused by name (and sort nothing: qsort of NULL, UBSan in make
     * SAN=1 check) */
    put("squad.json", "{\"data\": []}");
    d = ruler_qa_load(dir, 1, err, sizeof err);
    snprintf(want, sizeof want, "%s/squad.json: no answerable questions", dir);
    CHECK(!d && !strcmp(err, want), "squad {\"data\": []}: %s", d ? "loaded" : err);
    ruler_qa_free(d);
    put("hotpotqa.json", "[]");
    d = ruler_qa_load(dir, 0, err, sizeof err);
    snprintf(want, sizeof want, "%s/hotpotqa.json: no answerable questions", dir);
    CHECK(!d && !strcmp(err, want), "hotpotqa []: %s", d ? "loaded" : err);
    ruler_qa_free(d);
    char p[512];
    snprintf(p, sizeof p, "%s/squad.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/hotpotqa.json", dir);
    unlink(p);
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        printf("usage: test_data_errors   (records the loaders refuse: empty answers, huge numbers, repeated ids)\n");
        return 0;
    }
    snprintf(dir, sizeof dir, "/tmp/kvbench_data_errors_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 2; }
    test_ruler_qa();
    const char *model = model_default_path();
    gguf_file f;
    char err[512];
    kv_tokenizer *tok = NULL;
    if (access(model, R_OK)) {
        printf("SKIP: LongBench and InfiniteBench records (%s is absent: make model)\n", model);
    } else if (gguf_open(&f, model, err, sizeof err) || !(tok = tok_load(&f, err, sizeof err))) {
        CHECK(0, "%s", err);
    } else {
        test_longbench(tok);
        test_infinitebench(tok);
        test_unsupported(tok);
        test_narrativeqa_prompt(tok);
        test_code_debug_prompt(tok);
        tok_free(tok);
        gguf_close(&f);
    }
    rmdir(dir);
    return check_done("test_data_errors");
}
