/* Metric tests: every scorer against hand-checked cases (the arithmetic is in the
 * comments), the LCS against brute force on fresh random token strings, and the
 * case-level scoring (max over references, first line only).
 *   test_metrics                 all checks
 *   test_metrics --eval FILE     evaluate the cases of FILE for tests/test_metrics_ref.sh:
 *                                each line "METRIC\tPRED\tREF[\tCLASS|CLASS...]" with \n \t \\
 *                                escaped; prints one result per line (%.12f). */
#include "check.h"
#include "../workloads/metrics.h"
#include "../workloads/pystr.h"
#include "../workloads/textcase.h"

static int near(double a, double b) { return fabs(a - b) < 1e-9; }

static void test_qa_f1(void) {
    char *n = metric_normalize_answer("An apple, the  pie;and A banana");
    /* lower, drop , ; -> "an apple the  pieand a banana"; an/the/a -> " "; collapse */
    CHECK(n && !strcmp(n, "apple pieand banana"), "normalised '%s'", n);
    free(n);
    n = metric_normalize_answer("Theater: the_best THE end");
    /* "theater" and "the_best" are not the article "the" (\b needs a non-word neighbour) */
    CHECK(n && !strcmp(n, "theater thebest end"), "normalised '%s'", n);
    free(n);
    /* "the cat sat" -> {cat, sat}; "a cat sat down" -> {cat, sat, down}: 2 shared,
     * P = 2/2, R = 2/3, F1 = 2 * 1 * 2/3 / (1 + 2/3) = 0.8 */
    CHECK(near(metric_qa_f1("the cat sat", "a cat sat down"), 0.8), "f1 %g", metric_qa_f1("the cat sat", "a cat sat down"));
    CHECK(near(metric_qa_f1("The Eiffel Tower!", "eiffel tower"), 1.0), "case and punctuation");
    CHECK(metric_qa_f1("Paris, France.", "London") == 0.0, "disjoint");
    /* multiset: x x y vs x y y share min(2,1) + min(1,2) = 2: P = R = 2/3, F1 = 2/3 */
    CHECK(near(metric_qa_f1("x x y", "x y y"), 2.0 / 3), "multiset %g", metric_qa_f1("x x y", "x y y"));
    CHECK(metric_qa_f1("", "x") == 0.0 && metric_qa_f1("the", "the") == 0.0, "empty after normalisation");
}

/* ---- ROUGE-L: hand-computed cases (the official packages: tests/test_metrics_ref.sh) ---- */

/* Flat LCS length by trying every subsequence of the shorter sequence (checks metric_lcs). */
static int brute_lcs(const char **a, int n, const char **b, int m) {
    if (n > m) { const char **t = a; a = b; b = t; int k = n; n = m; m = k; }
    int best = 0;
    for (unsigned mask = 0; mask < (1u << n); mask++) {
        int size = __builtin_popcount(mask);
        if (size <= best) continue;
        int j = 0, ok = 1;
        for (int i = 0; i < n && ok; i++) {
            if (!(mask & (1u << i))) continue;
            while (j < m && strcmp(b[j], a[i])) j++;
            if (j == m) ok = 0;
            else j++;
        }
        if (ok) best = size;
    }
    return best;
}

/* pltrdy's F: 2 * (P * R / (P + R + 1e-8)) */
static double f_pltrdy(double p, double r) { return 2.0 * ((p * r) / (p + r + 1e-8)); }

/* Non-ASCII text, as Python's str.lower(), split(), strip() and re's \b and \d read it (the
 * values are Python's; tests/test_metrics_ref.sh checks hundreds more against the scripts). */
static void test_unicode(void) {
    char *n = py_lower("\u039f\u0394\u039f\u03a3 \u03a3\u0391 \u039f\u03a3\u0301 \u0130");
    /* final sigma after a cased letter at a word's end (a combining acute is skipped), not
     * before one; U+0130 lowers to "i" + U+0307 */
    CHECK(n && !strcmp(n, "\u03bf\u03b4\u03bf\u03c2 \u03c3\u03b1 \u03bf\u03c2\u0301 i\u0307"), "py_lower '%s'", n);
    free(n);
    n = metric_normalize_answer("\u0301the\u00a0\u0130the a\u00e9 \u00e9the\u2028X");
    /* U+0301 and U+0307 are no word characters, so "the" after them is the article; "a" and
     * "the" next to e-acute (a letter) are not; NBSP and U+2028 are whitespace */
    CHECK(n && !strcmp(n, "\u0301 i\u0307 a\u00e9 \u00e9the x"), "normalised '%s'", n);
    free(n);
    CHECK(near(metric_qa_f1("\u03a9MEGA s\u00e3o", "\u03c9mega S\u00c3O"), 1.0), "qa_f1 Greek and Latin-1 case");
    CHECK(near(metric_qa_f1("x\u2028y\u3000z", "x y z"), 1.0), "qa_f1 Unicode whitespace");
    /* "\uff1112" is one number (re's \d reads fullwidth one) and it is not "12" */
    CHECK(metric_retrieval("Paragraph \uff1112", "Paragraph 12") == 0.0, "retrieval fullwidth digit");
    CHECK(metric_count("\u0661\u0662 12", "12") == 0.5, "count: Arabic-Indic 12 is a number, not 12");
    CHECK(metric_count("x\u0661\u0662y \u00b2", "\u0661\u0662") == 1.0, "count: superscript two is no \\d");
    CHECK(metric_first_int("\uff11\uff12 34", "34"), "first_int reads ASCII [0-9] only, as the official split");
    CHECK(metric_kv_word("key:\u00a0abc", "abc"), "kv_word splits at NBSP");
    CHECK(metric_choice("The answer is:\u00a0B", "foo", "B"), "choice: one code point after the prefix");
    CHECK(metric_code_debug("\u00a0B. foo", "foo", "B"), "code_debug strips NBSP");
    CHECK(metric_code_debug("The answer is:\u3000foo", "foo", "B"), "code_debug: U+3000 after the prefix");
    CHECK(metric_contains_ci("\u03a3\u039f\u03a6\u039f\u03a3", "\u03c3\u03bf\u03c6\u03bf\u03c2"), "RULER match: final sigma");
    CHECK(metric_contains_ci("STRA\u1e9eE", "stra\u00dfe") && !metric_contains_ci("STRASSE", "stra\u00dfe"), "RULER match: capital sharp s");
}

static void test_rouge(void) {
    /* one sentence each: LCS "the cat on the mat" has the distinct words {the, cat, on,
     * mat} = 4; distinct words: pred 5, ref 5: P = R = 4/5 */
    CHECK(near(metric_rouge_l("the cat sat on the mat", "the cat lay on the mat"), f_pltrdy(0.8, 0.8)), "rouge-l one sentence %.12f",
          metric_rouge_l("the cat sat on the mat", "the cat lay on the mat"));
    /* sentences in another order: each ref sentence's LCS with its twin covers its words */
    CHECK(near(metric_rouge_l("b c. a d", "a d. b c"), f_pltrdy(1, 1)), "rouge-l shuffled sentences");
    /* case-sensitive, punctuation attached: "Cat," != "cat": union {sat} of 2 and 2 */
    CHECK(near(metric_rouge_l("Cat, sat", "cat sat"), f_pltrdy(0.5, 0.5)), "rouge-l case and punctuation");
    CHECK(metric_rouge_l("", "x") == 0.0 && metric_rouge_l("x", "") == 0.0 && metric_rouge_l("...", "x") == 0.0, "rouge-l empty");
    /* " . x": sentences [" ", " x"] -> ["", "x"]: words {"", x} = 2 of which x matches */
    CHECK(near(metric_rouge_l(" . x", "x"), f_pltrdy(0.5, 1)), "rouge-l blank sentence is one empty word");
    CHECK(metric_rouge_l("a b", "c d") == 0.0, "rouge-l no overlap");
    /* rougeLsum: lowercased, punctuation dropped, lines are sentences. "The cat!\nsat" vs
     * "sat\nthe CAT": tokens [the cat][sat] vs [sat][the cat]: all 3 hit: F = 1 */
    CHECK(near(metric_rouge_lsum("The cat!\nsat", "sat\nthe CAT"), 1.0), "rougeLsum lines");
    /* one line each: "a b c d" vs "d c b a": LCS 1, P = R = 1/4 */
    CHECK(near(metric_rouge_lsum("a b c d", "d c b a"), 0.25), "rougeLsum one LCS");
    /* counts: ref "x x" (2), pred "x" (1): hits limited by pred's count 1: P = 1, R = 1/2 */
    CHECK(near(metric_rouge_lsum("x", "x x"), 2.0 / 3), "rougeLsum counts %.12f", metric_rouge_lsum("x", "x x"));
    CHECK(metric_rouge_lsum("", "x") == 0.0 && metric_rouge_lsum("!!", "x") == 0.0 && metric_rouge_lsum("x", "\n\n") == 0.0,
          "rougeLsum empty");
    /* U+0130 lowercases to "i" + a combining dot, which ends the token: "\xc4\xb0x" -> [i, x] */
    CHECK(near(metric_rouge_lsum("\xc4\xb0x", "i x"), 1.0), "rougeLsum dotted I");
    static const char *const vocab[] = {"the", "cat", "sat", "on", "mat", "The"};
    int fails = 0;
    for (int t = 0; t < 2000; t++) {
        int n = test_int(0, 10), m = test_int(0, 10);
        const char *a[10], *b[10];
        for (int i = 0; i < n; i++) a[i] = vocab[test_int(0, 5)];
        for (int i = 0; i < m; i++) b[i] = vocab[test_int(0, 5)];
        if (metric_lcs(a, n, b, m) != brute_lcs(a, n, b, m)) fails++;
    }
    CHECK(fails == 0, "%d random LCS mismatches", fails);
}

static void test_match(void) {
    const char *refs[] = {"Apple", "banana", "cherry"};
    /* 2 of 3 references appear (case-insensitive): 100 * 2/3 */
    CHECK(near(metric_match_all("I like APPLE and Banana", refs, 3), 200.0 / 3), "match_all");
    CHECK(metric_match_part("I like APPLE and Banana", refs, 3) == 100.0, "match_part");
    CHECK(metric_match_all("none here", refs, 3) == 0.0 && metric_match_part("none", refs, 3) == 0.0, "no match");
    CHECK(metric_match_all("x", refs, 0) == 0.0, "no references");
    tc_case c;
    tc_case_init(&c);
    const char *niah[] = {"sandwich", "Dolores Park"};
    tc_set_answers(&c, niah, 2);
    c.scorer = TC_SCORE_NIAH;
    CHECK(tc_score(&c, "Eat a Sandwich and sit in dolores park.") == 100.0, "niah both");
    CHECK(tc_score(&c, "Eat a sandwich.") == 0.0, "niah one of two scores 0");
    c.scorer = TC_SCORE_MATCH_ALL;
    CHECK(tc_score(&c, "Eat a sandwich.") == 50.0, "match_all one of two");
    tc_case_free(&c);
}

static void test_longbench_small(void) {
    const char *cls[] = {"Location", "Entity"};
    CHECK(metric_classification("Entity", "Entity", cls, 2) == 1.0, "class exact");
    CHECK(metric_classification("Location or Entity", "Entity", cls, 2) == 0.5, "two classes named: 1/2");
    CHECK(metric_classification("Location", "Entity", cls, 2) == 0.0, "wrong class");
    /* Official removal quirk: matches [Human being, Human, being]; "Human" is in the
     * reference and not equal, removed; the loop index then passes the end, so "being"
     * stays: 1 / len([Human being, being]) = 0.5 */
    const char *q[] = {"Human being", "Human", "being"};
    CHECK(metric_classification("Human being", "Human being", q, 3) == 0.5, "removal quirk %g",
          metric_classification("Human being", "Human being", q, 3));
    CHECK(metric_retrieval("Paragraph 12", "Paragraph 12") == 1.0, "retrieval");
    CHECK(metric_retrieval("Paragraph 3 and Paragraph 12", "Paragraph 12") == 0.5, "retrieval 1 of 2 numbers");
    CHECK(metric_retrieval("12, 112", "Paragraph 12") == 0.5, "retrieval: 112 is not 12");
    CHECK(metric_retrieval("none", "Paragraph 12") == 0.0, "retrieval no number");
    CHECK(metric_count("There are 7 unique paragraphs out of 17", "7") == 0.5, "count [7, 17]");
    CHECK(metric_count("7", "7") == 1.0 && metric_count("", "7") == 0.0, "count");
}

static void test_code_sim(void) {
    /* difflib: "abcd" vs "bcde": one block "bcd", M = 3, T = 8: 2*3/8 = 0.75 */
    CHECK(near(metric_seq_ratio("abcd", "bcde"), 0.75), "ratio %g", metric_seq_ratio("abcd", "bcde"));
    /* "hello world" vs "world hello": the first longest block is "hello" (earliest in a),
     * nothing is left on its right in b: M = 5, T = 22 */
    CHECK(near(metric_seq_ratio("hello world", "world hello"), 10.0 / 22), "ratio block order");
    /* autojunk: b has 222 elements, 'a' and 'b' occur > 222/100 + 1 times and are
     * dropped from the index, 'x' is not in b: nothing matches */
    char a[300], b[300];
    a[0] = 'x';
    for (int i = 0; i < 120; i++) { a[1 + 2 * i] = 'a'; a[2 + 2 * i] = 'b'; }
    a[241] = 0;
    for (int i = 0; i < 110; i++) { b[2 * i] = 'a'; b[2 * i + 1] = 'b'; }
    strcpy(b + 220, "zz");
    CHECK(metric_seq_ratio(a, b) == 0.0, "autojunk %g", metric_seq_ratio(a, b));
    /* a match made only of popular elements is still found by the extension step:
     * "aaa" vs a*150 b*60: M = 3, T = 213 */
    char c[220];
    memset(c, 'a', 150);
    memset(c + 150, 'b', 60);
    c[210] = 0;
    CHECK(near(metric_seq_ratio("aaa", c), 6.0 / 213), "popular extension %g", metric_seq_ratio("aaa", c));
    CHECK(metric_seq_ratio("", "") == 1.0, "both empty");
    /* code_sim: lines with // and ``` are skipped; "x = foo(1)" vs "x = foo(2)": blocks
     * "x = foo(" and ")", M = 9, T = 20 -> 0.9 */
    CHECK(near(metric_code_sim("\n// comment\n```python\nx = foo(1)\n", "x = foo(2)"), 0.90), "code_sim");
    CHECK(metric_code_sim("same", "same") == 1.0 && metric_code_sim("# only comments", "x") == 0.0, "code_sim edges");
    /* unicode: code points, not bytes: "é" vs "e" share nothing, "éa" vs "ea" share "a" */
    CHECK(near(metric_seq_ratio("\xc3\xa9" "a", "ea"), 0.5), "code points");
}

static void test_infinitebench(void) {
    CHECK(metric_choice("B", "Paris", "B"), "choice letter");
    CHECK(metric_choice("  The answer is: B", "Paris", "B"), "choice prefix");
    CHECK(!metric_choice("C", "Paris", "B"), "choice wrong");
    CHECK(metric_choice("I think the correct one is D because", "Rome", "D"), "choice first A-D word");
    CHECK(!metric_choice("", "Paris", "B"), "choice empty");
    CHECK(metric_choice("Paris", "Paris", "B"), "choice text");
    CHECK(metric_code_debug("B. foo", "foo", "B"), "debug letter");
    CHECK(metric_code_debug("The answer is: foo", "foo", "C"), "debug function name");
    CHECK(!metric_code_debug("maybe foo", "foo", "C"), "debug no prefix");
    CHECK(metric_code_debug(" B. foo", "foo", "B") && metric_code_debug("\nB: foo", "foo", "B"), "debug strips first");
    CHECK(!metric_code_debug(" C. foo", "bar", "B"), "debug other letter");
    CHECK(metric_first_int("The pass key is 71432.", "71432"), "passkey");
    CHECK(!metric_first_int("71432x", "7143") && !metric_first_int("none", "1"), "first int exact");
    CHECK(metric_kv_word("The value is \"abc-123\".", "abc-123"), "kv word");
    CHECK(!metric_kv_word("abc-1234", "abc-123"), "kv whole word");
}

static void test_gsm8k(void) {
    char out[64];
    CHECK(metric_gsm8k_extract("so 3 + 4 = 7. The answer is 1,234.", out, sizeof out) && !strcmp(out, "1234"), "last number '%s'", out);
    CHECK(metric_gsm8k_extract("-5 degrees", out, sizeof out) && !strcmp(out, "-5"), "negative '%s'", out);
    /* issue 27 item 7: a fraction without its leading 0 keeps its point and sign */
    CHECK(metric_gsm8k_extract("it changes by -.5 each day", out, sizeof out) && !strcmp(out, "-.5"), "-.5 read as '%s'", out);
    CHECK(metric_gsm8k_extract("about .25 of them", out, sizeof out) && !strcmp(out, ".25"), ".25 read as '%s'", out);
    CHECK(metric_gsm8k_match("The answer is -.5", "-0.5") && !metric_gsm8k_match("The answer is -.5", "5"), "-.5 == -0.5");
    CHECK(metric_gsm8k_extract("It is 3. Then 7.", out, sizeof out) && !strcmp(out, "7"), "sentence end '%s'", out);
    CHECK(metric_gsm8k_extract("12 apples and 3 pears\n\nQuestion: next has 99", out, sizeof out) && !strcmp(out, "3"),
          "cut at Question: '%s'", out);
    CHECK(metric_gsm8k_extract("no digits", out, sizeof out) == 0 && !out[0], "none");
    CHECK(metric_gsm8k_reference("She sold 48/2 = <<48/2=24>>24 clips.\n#### 72", out, sizeof out) && !strcmp(out, "72"), "ref");
    CHECK(metric_gsm8k_reference("#### 1,000", out, sizeof out) && !strcmp(out, "1000"), "ref commas");
    CHECK(metric_gsm8k_match("She has $18.00 left.", "18"), "18.00 == 18");
    CHECK(!metric_gsm8k_match("72.5", "72") && metric_gsm8k_match("72 clips", "72"), "match");
}

static void test_case_scoring(void) {
    tc_case c;
    tc_case_init(&c);
    const char *refs[] = {"London", "Paris"};
    tc_set_answers(&c, refs, 2);
    c.scorer = TC_SCORE_QA_F1;
    /* max over references: "Paris London" vs "Paris": P = 1/2, R = 1, F1 = 2/3 */
    CHECK(near(tc_score(&c, "\nParis\nLondon"), 200.0 / 3), "all lines %g", tc_score(&c, "\nParis\nLondon"));
    c.first_line_only = 1;                      /* "\nParis\nLondon" -> "Paris" */
    CHECK(tc_score(&c, "\nParis\nLondon") == 100.0, "first line");
    tc_case_free(&c);
    const char *cls[] = {"Location", "Entity"};
    tc_case_init(&c);
    const char *ans[] = {"Entity"};
    tc_set_answers(&c, ans, 1);
    c.classes = malloc(2 * sizeof *c.classes);
    c.classes[0] = strdup(cls[0]);
    c.classes[1] = strdup(cls[1]);
    c.n_classes = 2;
    c.scorer = TC_SCORE_CLASSIFICATION;
    CHECK(tc_score(&c, "Location or Entity") == 50.0, "classification case");
    tc_case_free(&c);
    for (int s = 0; s < TC_SCORE_COUNT_; s++) CHECK(strcmp(tc_scorer_name(s), "?"), "scorer %d named", s);
}

/* ---- --eval mode for the Python reference ------------------------------------------- */

static void unescape(char *s) {
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '\\' && r[1]) {
            r++;
            *w++ = *r == 'n' ? '\n' : *r == 't' ? '\t' : *r;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}

/* 1 if ref holds, per code point of pred, the digit isspace + 2 isword + 4 isdecimal. */
static int classes_match(const char *pred, const char *ref) {
    size_t k = 0;
    for (const char *p = pred; *p; k++) {
        uint32_t cp;
        p += py_decode(p, &cp);
        if (ref[k] != '0' + py_isspace(cp) + 2 * py_isword(cp) + 4 * py_isdecimal(cp)) return 0;
    }
    return ref[k] == 0;
}

static int eval_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "%s: cannot open\n", path); return 2; }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = 0;
        char *field[4] = {0};
        int k = 0;
        for (char *p = line; k < 4;) {
            field[k++] = p;
            char *tab = strchr(p, '\t');
            if (!tab) break;
            *tab = 0;
            p = tab + 1;
        }
        if (k < 3) { fprintf(stderr, "%s: bad line\n", path); return 2; }
        for (int i = 1; i < k; i++) unescape(field[i]);
        const char *m = field[0], *pred = field[1], *ref = field[2];
        double r = NAN;
        if (!strcmp(m, "qa_f1")) r = metric_qa_f1(pred, ref);
        else if (!strcmp(m, "rouge_l")) r = metric_rouge_l(pred, ref);
        else if (!strcmp(m, "rouge_lsum")) r = metric_rouge_lsum(pred, ref);
        else if (!strcmp(m, "code_debug")) {                /* ref is "FUNCTION|LETTER" */
            char *bar = strchr(ref, '|');
            if (!bar) { fprintf(stderr, "%s: code_debug needs FUNCTION|LETTER\n", path); return 2; }
            *bar = 0;
            r = metric_code_debug(pred, ref, bar + 1);
        }
        else if (!strcmp(m, "ratio")) r = metric_seq_ratio(pred, ref);
        else if (!strcmp(m, "code_sim")) r = metric_code_sim(pred, ref);
        else if (!strcmp(m, "count")) r = metric_count(pred, ref);
        else if (!strcmp(m, "retrieval")) r = metric_retrieval(pred, ref);
        else if (!strcmp(m, "lower")) {                     /* 1 if py_lower(pred) is ref */
            char *low = py_lower(pred);
            r = low && !strcmp(low, ref);
            free(low);
        }
        else if (!strcmp(m, "classes")) r = classes_match(pred, ref);
        else if (!strcmp(m, "kv_word")) r = metric_kv_word(pred, ref);
        else if (!strcmp(m, "first_int")) r = metric_first_int(pred, ref);
        else if (!strcmp(m, "choice")) {                    /* ref is "OPTION|LETTER" */
            char *bar = strchr(ref, '|');
            if (!bar) { fprintf(stderr, "%s: choice needs OPTION|LETTER\n", path); return 2; }
            *bar = 0;
            r = metric_choice(pred, ref, bar + 1);
        }
        else if (!strcmp(m, "match_all") || !strcmp(m, "match_part")) {   /* ref is "R1|R2|..." */
            const char *refs[64];
            int n = 0;
            for (char *p = field[2], *save = NULL, *t = strtok_r(p, "|", &save); t && n < 64; t = strtok_r(NULL, "|", &save)) refs[n++] = t;
            r = (m[6] == 'a' ? metric_match_all(pred, refs, n) : metric_match_part(pred, refs, n)) / 100.0;
        }
        else if (!strcmp(m, "classification")) {
            const char *cls[64];
            int n = 0;
            for (char *p = field[3], *save = NULL, *t = strtok_r(p, "|", &save); t && n < 64; t = strtok_r(NULL, "|", &save)) cls[n++] = t;
            r = metric_classification(pred, ref, cls, n);
        }
        printf("%.12f\n", r);
    }
    free(line);
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--eval")) return eval_file(argv[2]);
    if (argc > 1) {
        fprintf(stderr, "usage: test_metrics [--eval FILE]\n");
        return 2;
    }
    test_seed();
    test_qa_f1();
    test_unicode();
    test_rouge();
    test_match();
    test_longbench_small();
    test_code_sim();
    test_infinitebench();
    test_gsm8k();
    test_case_scoring();
    return check_done("test_metrics");
}
