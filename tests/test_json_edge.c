/* Regression tests of two JSON defects (issue 14, items 1 and 2):
 *  - an empty string (a key "" or a value "", as LongBench's "input" of its summarisation
 *    and code tasks) came back without its terminator: a heap over-read, and records
 *    dropped as "contains a NUL character" when the unterminated bytes were not zero.
 *    The heap is dirtied first so the old behaviour fails every time, not by chance.
 *  - a JSON number outside long long's range (answers like 5e23) was converted to long
 *    long, undefined behaviour (UBSan's float-cast-overflow, make SAN=1); numbers are
 *    now written as Python's str() writes them.
 * With the model present, 20 LongBench samsum records with "input": "" all load. */
#include <unistd.h>
#include "check.h"
#include "../model/gguf.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "../kernels/jsonl.h"
#include "../workloads/longbench.h"

/* Leaves freed 64-byte blocks full of 'x' where the next small allocations come from. */
static void dirty_heap(void) {
    void *p[8];
    for (int i = 0; i < 8; i++) memset(p[i] = malloc(64), 'x', 64);
    for (int i = 7; i >= 0; i--) free(p[i]);
}

static void test_empty_strings(void) {
    json_value v;
    char err[256];
    const char *s;
    dirty_heap();
    CHECK(json_parse("{\"\":1}", 6, &v, err, sizeof err) == 0, "%s", err);
    CHECK(v.n == 1 && v.keys[0][0] == 0 && json_get(&v, "") && json_get(&v, "")->num == 1, "empty key");
    json_free(&v);
    dirty_heap();
    const char *rec = "{\"input\": \"\", \"context\": \"c\"}";
    CHECK(json_parse(rec, strlen(rec), &v, err, sizeof err) == 0, "%s", err);
    CHECK(json_field_string(&v, "input", &s, err, sizeof err) == 0 && s[0] == 0, "empty value: %s", err);
    json_free(&v);
    dirty_heap();
    CHECK(json_parse("\"\"", 2, &v, err, sizeof err) == 0 && v.type == JSON_STRING && v.len == 0 && v.str[0] == 0,
          "empty top-level string");
    json_free(&v);
}

static void expect_number(const char *json, const char *want) {
    char doc[128], err[256], **out = NULL;
    int n = 0;
    json_value v;
    snprintf(doc, sizeof doc, "{\"a\": [%s]}", json);
    if (json_parse(doc, strlen(doc), &v, err, sizeof err)) { CHECK(0, "%s: %s", json, err); return; }
    int rc = json_field_strings(&v, "a", 0, 1, &out, &n, err, sizeof err);
    CHECK(rc == 0 && n == 1 && !strcmp(out[0], want), "%s: got '%s', want '%s'", json, rc ? err : out[0], want);
    if (!rc) json_strings_free(out, n);
    json_free(&v);
}

static void test_numbers(void) {
    expect_number("5e23", "5e+23");
    expect_number("-5e23", "-5e+23");
    expect_number("1e300", "1e+300");
    expect_number("9223372036854775808", "9.223372036854776e+18");   /* 2^63: just out of range */
    expect_number("-9223372036854775808", "-9223372036854775808");    /* -2^63: just in range */
    expect_number("42", "42");
    expect_number("-7", "-7");
    expect_number("0.1", "0.1");
    expect_number("2.5e-3", "0.0025");
    /* fresh random doubles: the text reads back to the same value */
    for (int i = 0; i < 200; i++) {
        uint64_t r = test_rng_state = test_rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        double x = ldexp((double)(r >> 11) / 9007199254740992.0 + 0.5, (int)(r % 160) - 60) * ((r >> 7) & 1 ? -1 : 1);
        char lit[64], doc[128], err[256], **out;
        int n;
        json_value v;
        snprintf(lit, sizeof lit, "%.17g", x);
        snprintf(doc, sizeof doc, "[%s]", lit);
        if (json_parse(doc, strlen(doc), &v, err, sizeof err) == 0) {
            json_value wrap = {.type = JSON_OBJECT, .n = 1, .items = &v, .keys = (char *[]){"k"}};
            if (json_field_strings(&wrap, "k", 0, 1, &out, &n, err, sizeof err) == 0) {
                CHECK(strtod(out[0], NULL) == x && strlen(out[0]) <= strlen(lit), "%s -> %s", lit, out[0]);
                json_strings_free(out, n);
            } else CHECK(0, "%s", err);
            json_free(&v);
        } else CHECK(0, "%s: %s", lit, err);
    }
}

static void test_longbench_empty_input(const char *model) {
    gguf_file f;
    char err[512], path[] = "/tmp/kvbench_json_edge_XXXXXX";
    kv_tokenizer *tok;
    if (gguf_open(&f, model, err, sizeof err) || !(tok = tok_load(&f, err, sizeof err))) { CHECK(0, "%s", err); return; }
    int fd = mkstemp(path);
    FILE *w = fdopen(fd, "w");
    for (int i = 0; i < 20; i++)
        fprintf(w, "{\"input\": \"\", \"context\": \"A: hi %d\\nB: hello\", \"answers\": [\"They greet.\"], \"_id\": \"s%d\"}\n", i, i);
    fclose(w);
    lb_opts o;
    lb_defaults(&o);
    o.tok = tok;
    o.log = tmpfile();
    tc_list l = {0};
    jsonl_stats st;
    dirty_heap();
    int rc = lb_load_task(&o, lb_task_index("samsum"), path, &l, &st, err, sizeof err);
    CHECK(rc == 0 && l.n == 20 && st.skipped == 0, "samsum with empty inputs: rc %d, %d cases, %d skipped", rc, l.n, st.skipped);
    tc_list_free(&l);
    fclose(o.log);
    unlink(path);
    tok_free(tok);
    gguf_close(&f);
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        printf("usage: test_json_edge   (empty JSON strings, huge JSON numbers)\n");
        return 0;
    }
    test_seed();
    test_empty_strings();
    test_numbers();
    const char *model = model_default_path();
    if (access(model, R_OK)) printf("SKIP: LongBench empty-input records (%s is absent: make model)\n", model);
    else test_longbench_empty_input(model);
    return check_done("test_json_edge");
}
