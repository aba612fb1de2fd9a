/* Loader tests: the strict JSON parser (fixed cases with the expected error columns,
 * and a round trip of fresh random strings through every escape form), then JSONL
 * fixtures written here for LongBench (valid lines, a malformed line in the middle,
 * wrong field types, a blank line, non-UTF-8, a truncated last line, an empty file),
 * InfiniteBench and GSM8K, checking the case contents, the "FILE:LINE: ... at column N"
 * messages and the skip counts. The prompt checks use the real tokenizer (skipped with
 * SKIP when the model file is absent). */
#include <unistd.h>
#include "check.h"
#include "../model/gguf.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "../workloads/gsm8k.h"
#include "../workloads/infinitebench.h"
#include "../kernels/jsonl.h"
#include "../workloads/longbench.h"

static char tmpdir[256];

static char *path_of(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_file(const char *name, const char *text, size_t n) {
    FILE *f = fopen(path_of(name), "wb");
    if (!f || fwrite(text, 1, n, f) != n) { fprintf(stderr, "cannot write %s\n", name); exit(2); }
    fclose(f);
}

/* Parses s; on failure the message is in err. */
static int parse(const char *s, json_value *v, char *err) { return json_parse(s, strlen(s), v, err, 256); }

static void expect_error(const char *s, const char *msg, int column) {
    json_value v;
    char err[256], want[256];
    snprintf(want, sizeof want, "%s at column %d", msg, column);
    int rc = parse(s, &v, err);
    CHECK(rc == -1 && !strcmp(err, want), "'%s': got '%s', want '%s'", s, rc ? err : "success", want);
    if (!rc) json_free(&v);
}

static void test_json_fixed(void) {
    json_value v;
    char err[256];
    CHECK(!parse(" {\"a\": [1, -0.5e3, true, false, null, \"x\"], \"b\": {}} ", &v, err), "valid: %s", err);
    const json_value *a = json_get(&v, "a");
    CHECK(a && a->type == JSON_ARRAY && a->n == 6 && a->items[1].num == -500.0 && a->items[2].type == JSON_TRUE &&
          a->items[4].type == JSON_NULL && !strcmp(a->items[5].str, "x"), "array contents");
    CHECK(json_get(&v, "b") && json_get(&v, "b")->type == JSON_OBJECT && !json_get(&v, "c"), "members");
    json_free(&v);
    /* \u00e9 is C3 A9 in UTF-8; the pair D83D DE00 is U+1F600, F0 9F 98 80 */
    CHECK(!parse("\"\\u00e9\\ud83d\\ude00\\n\\\"\\/\"", &v, err), "escapes: %s", err);
    CHECK(v.len == 9 && !memcmp(v.str, "\xc3\xa9\xf0\x9f\x98\x80\n\"/", 9), "escape bytes");
    json_free(&v);
    CHECK(!parse("\"a\\u0000b\"", &v, err) && v.len == 3 && v.str[1] == 0, "NUL escape kept with its length");
    json_value obj;
    CHECK(!parse("{\"k\": \"a\\u0000b\", \"k2\": 1, \"k2\": 2}", &obj, err), "dup keys");
    const char *s;
    CHECK(json_field_string(&obj, "k", &s, err, sizeof err) == -1 && strstr(err, "NUL"), "NUL refused: %s", err);
    CHECK(json_get(&obj, "k2")->num == 2, "last duplicate wins");
    CHECK(json_field_string(&obj, "k2", &s, err, sizeof err) == -1 && !strcmp(err, "field 'k2' must be a string (got number)"), "%s", err);
    CHECK(json_field_string(&obj, "zz", &s, err, sizeof err) == -1 && !strcmp(err, "field 'zz' is missing"), "%s", err);
    json_free(&obj);
    json_free(&v);
    /* columns are 1-based bytes */
    expect_error("{\"a\":1 \"b\":2}", "expected ',' or '}'", 8);
    expect_error("[1,]", "expected a value", 4);
    expect_error("[1 2]", "expected ',' or ']'", 4);
    expect_error("01", "unexpected text after the value", 2);
    expect_error("1.", "expected a digit after '.'", 3);
    expect_error("+1", "expected a value", 1);
    expect_error("1e", "expected a digit in the exponent", 3);
    expect_error("\"\\ud83d\"", "unpaired high surrogate", 2);
    expect_error("\"\\ude00x\"", "unpaired low surrogate", 2);
    expect_error("\"\\ud83d\\u0041\"", "unpaired high surrogate", 2);
    expect_error("\"ab\\q\"", "invalid escape", 5);
    expect_error("\"a\tb\"", "control character in string", 3);
    expect_error("\"ab\xff\"", "invalid UTF-8", 4);
    expect_error("\"\xc0\xaf\"", "invalid UTF-8", 2);          /* overlong '/' */
    expect_error("\"\xed\xa0\x80\"", "invalid UTF-8", 2);      /* encoded surrogate */
    expect_error("{\"a\": tru}", "invalid literal", 7);
    expect_error("{\"a\": 1", "unexpected end of input, expected ',' or '}'", 8);
    expect_error("\"abc", "unterminated string starting", 1);
    expect_error("", "unexpected end of input, expected a value", 1);
    char deep[1200];
    memset(deep, '[', 1000);
    deep[1000] = 0;
    expect_error(deep, "nesting too deep", 201);
}

/* Random strings of random code points through raw UTF-8 and \u escapes. */
static void test_json_roundtrip(void) {
    int bad = 0;
    for (int t = 0; t < 500; t++) {
        char want[1024], json[8192];
        size_t nw = 0, nj = 0;
        json[nj++] = '"';
        int n = test_int(0, 60);
        for (int i = 0; i < n; i++) {
            uint32_t cp;
            int kind = test_int(0, 3);
            if (kind == 0) cp = (uint32_t)test_int(0, 127);
            else if (kind == 1) cp = (uint32_t)test_int(0x80, 0x7FF);
            else if (kind == 2) { do cp = (uint32_t)test_int(0x800, 0xFFFF); while (cp >= 0xD800 && cp <= 0xDFFF); }
            else cp = (uint32_t)test_int(0x10000, 0x10FFFF);
            char u[4];
            int L = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            if (L == 1) u[0] = (char)cp;
            else if (L == 2) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); }
            else if (L == 3) { u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); }
            else { u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); }
            memcpy(want + nw, u, (size_t)L);
            nw += (size_t)L;
            int escape = cp < 0x20 || cp == '"' || cp == '\\' || test_int(0, 2) == 0;
            if (!escape) { memcpy(json + nj, u, (size_t)L); nj += (size_t)L; continue; }
            if (cp == '\n' && test_int(0, 1)) { nj += (size_t)sprintf(json + nj, "\\n"); continue; }
            if (cp == '"' && test_int(0, 1)) { nj += (size_t)sprintf(json + nj, "\\\""); continue; }
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                nj += (size_t)sprintf(json + nj, test_int(0, 1) ? "\\u%04X\\u%04X" : "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                nj += (size_t)sprintf(json + nj, "\\u%04x", cp);
            }
        }
        json[nj++] = '"';
        json[nj] = 0;
        json_value v;
        char err[256];
        if (json_parse(json, nj, &v, err, sizeof err) || v.len != nw || memcmp(v.str, want, nw)) {
            if (bad++ < 3) CHECK(0, "round trip failed on %s: %s", json, err);
        } else {
            json_free(&v);
        }
    }
    CHECK(bad == 0, "%d random strings did not round-trip", bad);
}

/* The whole log (file) as a string. */
static char *slurp(FILE *f) {
    fflush(f);
    long n = ftell(f);
    char *s = calloc((size_t)n + 1, 1);
    rewind(f);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fclose(f);
    return s;
}

static void test_longbench(const kv_tokenizer *tok) {
    const char *valid1 = "{\"input\": \"What is X?\", \"context\": \"Doc one. X is a thing.\", \"answers\": [\"a thing\"], "
                         "\"length\": 6, \"dataset\": \"qasper\", \"language\": \"en\", \"all_classes\": null, \"_id\": \"id1\"}\n";
    const char *valid3 = "{\"input\": \"What is X?\", \"context\": \"Doc one. X is a thing.\", \"answers\": [\"a thing\"], "
                         "\"_id\": \"id3\"}\n";   /* an _id of its own: a repeated one is refused */
    const char *malformed = "{\"input\": \"q\", \"context\": \"c\" \"answers\": [\"a\"]}\n";
    const char *wrongtype = "{\"input\": \"q\", \"context\": \"c\", \"answers\": 5}\n";
    const char *badutf8 = "{\"input\": \"q\", \"context\": \"bad \xff byte\", \"answers\": [\"a\"]}\n";
    const char *unicode = "{\"input\": \"Who?\", \"context\": \"Caf\\u00e9 \\ud83d\\ude00 text.\", \"answers\": [\"x\", \"y\"], \"_id\": \"id7\"}\n";
    const char *truncated = "{\"input\": \"q\", \"cont";
    char file[2048];
    snprintf(file, sizeof file, "%s%s%s%s\n%s%s%s", valid1, malformed, valid3, wrongtype, badutf8, unicode, truncated);
    write_file("qasper.jsonl", file, strlen(file));
    lb_opts o;
    lb_defaults(&o);
    o.tok = tok;
    o.log = tmpfile();
    tc_list l = {0};
    jsonl_stats st;
    char err[512];
    int rc = lb_load_task(&o, lb_task_index("qasper"), path_of("qasper.jsonl"), &l, &st, err, sizeof err);
    char *log = slurp(o.log);
    CHECK(rc == 0, "load: %s", err);
    CHECK(l.n == 3 && l.skipped == 4 && st.skipped == 4 && st.lines == 7, "cases %d skipped %d lines %d", l.n, l.skipped, st.lines);
    char want[512];
    snprintf(want, sizeof want, "%s:2: expected ',' or '}' at column %d\n", path_of("qasper.jsonl"),
             (int)(strstr(malformed, "\"answers\"") - malformed) + 1);
    CHECK(strstr(log, want) != NULL, "want '%s' in log:\n%s", want, log);
    snprintf(want, sizeof want, "%s:4: field 'answers' must be an array of strings (got number)\n", path_of("qasper.jsonl"));
    CHECK(strstr(log, want) != NULL, "want '%s' in log:\n%s", want, log);
    snprintf(want, sizeof want, "%s:6: invalid UTF-8 at column %d\n", path_of("qasper.jsonl"), (int)(strchr(badutf8, '\xff') - badutf8) + 1);
    CHECK(strstr(log, want) != NULL, "want '%s' in log:\n%s", want, log);
    snprintf(want, sizeof want, "%s:8: unterminated string starting at column %d (truncated last line?)\n",
             path_of("qasper.jsonl"), (int)(strstr(truncated, "\"cont") - truncated) + 1);
    CHECK(strstr(log, want) != NULL, "want '%s' in log:\n%s", want, log);
    free(log);
    if (l.n == 3) {
        tc_case *c = &l.v[0];
        CHECK(!strcmp(c->id, "id1") && !strcmp(c->task, "longbench:qasper") && c->max_new_tokens == 128 &&
              c->scorer == TC_SCORE_QA_F1 && !c->first_line_only && c->length == 6 && c->n_answers == 1, "case fields");
        CHECK(strstr(c->prompt, "Article: Doc one. X is a thing.\n\n Answer the question based on the above article") &&
              strstr(c->body_question, "Question: What is X?\n\nAnswer:") && !strcmp(c->context, "Doc one. X is a thing."),
              "qasper template");
        CHECK(!strcmp(c->settings.template_name, "chatml") && strstr(c->tpl_head, "<|im_start|>user") &&
              strstr(c->tpl_tail, "<|im_start|>assistant"), "chat template %s", c->settings.template_name);
        CHECK(!strncmp(c->body_question, "\n\n Answer the question", 22), "split after the context");
        c = &l.v[2];
        CHECK(!strcmp(c->id, "id7") && strstr(c->context, "Caf\xc3\xa9 \xf0\x9f\x98\x80 text.") && c->n_answers == 2, "unicode record");
        int32_t *ids;
        int n, nc;
        CHECK(!tc_tokenize(tok, c, &ids, &n, &nc) && n == c->prompt_tokens && nc > 0 && nc < n, "tokenize %d %d", n, nc);
        free(ids);
    }
    tc_list_free(&l);

    /* trec: no chat template, first line only, classes required */
    const char *trec = "{\"input\": \"Question: Who is Y?\\nType:\", \"context\": \"Question: Where is Z?\\nType: Location\", "
                       "\"answers\": [\"Human being\"], \"all_classes\": [\"Location\", \"Human being\"]}\n"
                       "{\"input\": \"q\", \"context\": \"c\", \"answers\": [\"a\"], \"all_classes\": null}\n";
    write_file("trec.jsonl", trec, strlen(trec));
    o.log = tmpfile();
    rc = lb_load_dir(&o, tmpdir, "trec", &l, err, sizeof err);
    log = slurp(o.log);
    CHECK(rc == 0 && l.n == 1 && l.skipped == 1, "trec %d %d: %s", l.n, l.skipped, err);
    CHECK(strstr(log, ":2: field 'all_classes' must be an array of strings (got null)"), "trec log: %s", log);
    if (l.n == 1) {
        tc_case *c = &l.v[0];
        CHECK(!c->tpl_head[0] && !c->tpl_tail[0] && !strcmp(c->settings.template_name, "none") && c->first_line_only &&
              c->n_classes == 2 && c->scorer == TC_SCORE_CLASSIFICATION && c->max_new_tokens == 64, "trec case");
        CHECK(!strcmp(c->prompt, "Please determine the type of the question below. Here are some examples of questions.\n\n"
                      "Question: Where is Z?\nType: Location\nQuestion: Who is Y?\nType:"), "trec prompt '%s'", c->prompt);
        CHECK(tc_score(c, "Human being\nLocation") == 100.0, "trec first line scored");
    }
    free(log);
    tc_list_free(&l);

    /* empty file, missing file, unknown task, directory with nothing */
    write_file("lcc.jsonl", "", 0);
    o.log = tmpfile();
    rc = lb_load_dir(&o, tmpdir, "lcc", &l, err, sizeof err);
    CHECK(rc == 0 && l.n == 0 && l.skipped == 0, "empty file");
    fclose(o.log);
    o.log = NULL;
    CHECK(lb_load_dir(&o, tmpdir, "musique", &l, err, sizeof err) == -1 && strstr(err, "musique.jsonl: not found"), "%s", err);
    CHECK(lb_load_dir(&o, tmpdir, "nope", &l, err, sizeof err) == -1 && strstr(err, "unknown task 'nope'"), "%s", err);
    CHECK(lb_load_dir(&o, "/nonexistent-dir", NULL, &l, err, sizeof err) == -1 && strstr(err, "no LongBench task files"), "%s", err);
    tc_list_free(&l);
}

/* Middle truncation: kept text = first and last halves of the budget, question intact. */
static void test_truncation(const kv_tokenizer *tok) {
    char *context = malloc(200000);
    size_t k = 0;
    for (int i = 0; i < 3000; i++) k += (size_t)sprintf(context + k, "Sentence %d has word%d in it. ", i, test_int(0, 99999));
    char *rec = malloc(k + 256);
    int n = sprintf(rec, "{\"input\": \"Which word?\", \"context\": \"%s\", \"answers\": [\"w\"]}\n", context);
    write_file("hotpotqa.jsonl", rec, (size_t)n);
    lb_opts o;
    lb_defaults(&o);
    o.tok = tok;
    int budget = test_int(300, 2000);
    o.max_tokens = budget;
    tc_list l = {0};
    jsonl_stats st;
    char err[512];
    CHECK(lb_load_task(&o, lb_task_index("hotpotqa"), path_of("hotpotqa.jsonl"), &l, &st, err, sizeof err) == 0 && l.n == 1, "%s", err);
    if (l.n == 1) {
        tc_case *c = &l.v[0];
        size_t nb = strlen(c->body_context) + strlen(c->body_question);
        char *body = malloc(nb + 1);
        sprintf(body, "%s%s", c->body_context, c->body_question);
        int nt = tok_encode(tok, body, nb, 0, NULL, 0);
        CHECK(c->truncated && nt >= budget - 4 && nt <= budget + 4, "budget %d, body %d tokens", budget, nt);
        CHECK(!strncmp(body, "Answer the question based on the given passages.", 48), "instruction kept");
        const char *tail = "\n\nAnswer the question based on the given passages. Only give me the answer and do not output any "
                           "other words.\n\nQuestion: Which word?\nAnswer:";
        CHECK(!strcmp(c->body_question, tail), "question part intact: '%s'", c->body_question);
        /* the kept text is a prefix and a suffix of the untruncated body */
        char *full = malloc(k + 1024);
        sprintf(full, "Answer the question based on the given passages. Only give me the answer and do not output any other "
                "words.\n\nThe following are given passages.\n%s%s", context, tail);
        size_t nf = strlen(full), pre = 0, suf = 0;
        while (pre < nb && body[pre] == full[pre]) pre++;
        while (suf < nb && body[nb - 1 - suf] == full[nf - 1 - suf]) suf++;
        CHECK(pre < nb && !strcmp(body + pre, full + nf - (nb - pre)), "prefix + suffix of the original");
        /* Where the head ends is ambiguous where the kept tail starts with the same text as
         * the cut-away part ("in it. Sentence 2955" after "in it. Sentence 53"): every split
         * in [nb - suf, pre] is a prefix + suffix, so the half must lie in that range. */
        size_t lo = nb - suf < pre ? nb - suf : pre;
        int head_lo = tok_encode(tok, body, lo, 0, NULL, 0), head_hi = tok_encode(tok, body, pre, 0, NULL, 0);
        CHECK(head_lo - 3 <= budget / 2 && budget / 2 <= head_hi + 3, "first half: %d-%d tokens, want %d of %d", head_lo,
              head_hi, budget / 2, budget);
        CHECK(strstr(c->context, "Sentence 0 has") == c->context && strstr(c->context, "Sentence 2999 has"), "context kept both ends");
        free(full);
        free(body);
    }
    tc_list_free(&l);
    /* budget from the model context: prompt + generation fit, and nearly fill it */
    o.max_tokens = 0;
    o.max_ctx = test_int(1000, 3000);
    CHECK(lb_load_task(&o, lb_task_index("hotpotqa"), path_of("hotpotqa.jsonl"), &l, &st, err, sizeof err) == 0 && l.n == 1, "%s", err);
    if (l.n == 1)
        CHECK(l.v[0].prompt_tokens + l.v[0].max_new_tokens <= o.max_ctx && l.v[0].prompt_tokens + l.v[0].max_new_tokens >= o.max_ctx - 16,
              "max_ctx %d: prompt %d + %d", o.max_ctx, l.v[0].prompt_tokens, l.v[0].max_new_tokens);
    tc_list_free(&l);
    o.max_ctx = 100;
    CHECK(lb_load_task(&o, lb_task_index("hotpotqa"), path_of("hotpotqa.jsonl"), &l, &st, err, sizeof err) == -1 &&
          strstr(err, "leaves no room"), "%s", err);
    tc_list_free(&l);
    free(context);
    free(rec);
}

static void test_infinitebench(const kv_tokenizer *tok) {
    const char *mc = "{\"id\": 3, \"context\": \"Once upon a time.\", \"input\": \"Who?\", \"answer\": [\"Bob\"], "
                     "\"options\": [\"Ann\", \"Bob\", \"Cy\", \"Di\"]}\n"
                     "{\"id\": 4, \"context\": \"c\", \"input\": \"q\", \"answer\": [\"Zed\"], \"options\": [\"Ann\", \"Bob\", \"Cy\", \"Di\"]}\n"
                     "{\"id\": 5, \"context\": \"c\", \"input\": \"q\", \"answer\": [\"Ann\"], \"options\": [\"Ann\"]}\n";
    write_file("longbook_choice_eng.jsonl", mc, strlen(mc));
    const char *pk = "{\"id\": 0, \"context\": \"noise. The pass key is 71432. noise.\", \"input\": \"What is the pass key?\", \"answer\": [71432]}\n";
    write_file("passkey.jsonl", pk, strlen(pk));
    ib_opts o;
    ib_defaults(&o);
    o.tok = tok;
    o.log = tmpfile();
    tc_list l = {0};
    char err[512];
    int rc = ib_load_dir(&o, tmpdir, "En.MC,passkey", &l, err, sizeof err);
    char *log = slurp(o.log);
    CHECK(rc == 0 && l.n == 2 && l.skipped == 2, "ib %d %d: %s", l.n, l.skipped, err);
    CHECK(strstr(log, ":2: field 'answer' is not one of the options") && strstr(log, ":3: field 'options' must hold 4 options (got 1)"),
          "ib log: %s", log);
    if (l.n == 2) {
        tc_case *c = l.v[1].scorer == TC_SCORE_CHOICE ? &l.v[1] : &l.v[0];
        CHECK(c->scorer == TC_SCORE_CHOICE && c->n_answers == 2 && !strcmp(c->answers[0], "Bob") && !strcmp(c->answers[1], "B") &&
              strstr(c->prompt, "A. Ann\nB. Bob\nC. Cy\nD. Di") && c->max_new_tokens == 40, "choice case");
        CHECK(tc_score(c, "B") == 100.0 && tc_score(c, "A") == 0.0, "choice scoring");
        tc_case *p = c == &l.v[0] ? &l.v[1] : &l.v[0];
        CHECK(p->scorer == TC_SCORE_FIRST_INT && !strcmp(p->answers[0], "71432") && p->max_new_tokens == 6 &&
              !strcmp(p->id, "passkey-0"), "passkey case (numeric answer)");
        CHECK(tc_score(p, " 71432") == 100.0, "passkey scoring");
    }
    free(log);
    tc_list_free(&l);
}

static void test_gsm8k(const kv_tokenizer *tok) {
    const char *train = "{\"question\": \"Q1?\", \"answer\": \"1+1=2\\n#### 2\"}\n"
                        "{\"question\": \"Q2?\", \"answer\": \"no final answer\"}\n"
                        "{\"question\": \"Q3?\", \"answer\": \"#### 1,000\"}\n";
    const char *test = "{\"question\": \"T1?\", \"answer\": \"#### 72\"}\n{\"question\": 5, \"answer\": \"#### 1\"}\n";
    write_file("train.jsonl", train, strlen(train));
    write_file("test.jsonl", test, strlen(test));
    gsm_opts o;
    gsm_defaults(&o);
    o.tok = tok;
    o.n_shots = 2;
    o.log = tmpfile();
    tc_list l = {0};
    char err[512];
    int rc = gsm_load(&o, path_of("test.jsonl"), &l, err, sizeof err);
    char *log = slurp(o.log);
    CHECK(rc == 0 && l.n == 1 && l.skipped == 1, "gsm %d %d: %s", l.n, l.skipped, err);
    CHECK(strstr(log, "train.jsonl:2: field 'answer' has no \"#### N\" final answer") &&
          strstr(log, "test.jsonl:2: field 'question' must be a string (got number)"), "gsm log: %s", log);
    if (l.n == 1) {
        tc_case *c = &l.v[0];
        CHECK(!strcmp(c->prompt, "Question: Q1?\nAnswer: 1+1=2\n#### 2\n\nQuestion: Q3?\nAnswer: #### 1,000\n\n"
                      "Question: T1?\nAnswer:"), "gsm prompt '%s'", c->prompt);
        CHECK(!strcmp(c->answers[0], "72") && c->scorer == TC_SCORE_GSM8K && !strcmp(c->body_question, "Question: T1?\nAnswer:"),
              "gsm case");
        CHECK(tc_score(c, " 70 + 2 = 72.\n#### 72") == 100.0 && tc_score(c, "71") == 0.0, "gsm scoring");
    }
    free(log);
    tc_list_free(&l);
    o.n_shots = 3;
    o.log = tmpfile();
    CHECK(gsm_load(&o, path_of("test.jsonl"), &l, err, sizeof err) == -1 && strstr(err, "only 2 valid examples, 3 shots wanted"), "%s", err);
    fclose(o.log);
    tc_list_free(&l);
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        printf("usage: test_loaders   (JSON parser, JSONL loaders; the model's tokenizer for prompts)\n");
        return 0;
    }
    test_seed();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kvbench_loaders_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    test_json_fixed();
    test_json_roundtrip();
    const char *model = model_default_path();
    gguf_file f;
    char err[512];
    kv_tokenizer *tok = NULL;
    if (access(model, R_OK)) {
        printf("SKIP: loader prompt checks (%s is absent: make model)\n", model);
    } else if (gguf_open(&f, model, err, sizeof err) || !(tok = tok_load(&f, err, sizeof err))) {
        CHECK(0, "%s", err);
    } else {
        test_longbench(tok);
        test_truncation(tok);
        test_infinitebench(tok);
        test_gsm8k(tok);
        tok_free(tok);
        gguf_close(&f);
    }
    static const char *const files[] = {"qasper.jsonl", "trec.jsonl", "lcc.jsonl", "hotpotqa.jsonl", "longbook_choice_eng.jsonl",
                                        "passkey.jsonl", "train.jsonl", "test.jsonl"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(path_of(files[i]));
    rmdir(tmpdir);
    return check_done("test_loaders");
}
