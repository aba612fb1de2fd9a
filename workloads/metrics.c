/* Official text metrics (see metrics.h); the sequence-matcher ratio is in seqmatch.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "metrics.h"
#include "pystr.h"

/* ASCII classes, where the official code is ASCII too (GSM8K's [0-9], InfiniteBench's [^0-9]). */
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_ws(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }

/* string.punctuation: ASCII only, in the official scripts too. */
static int is_punct(uint32_t c) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

char *metric_normalize_answer(const char *s) {
    char *low = py_lower(s);                            /* str.lower() */
    if (!low) return NULL;
    size_t len = strlen(low), k = 0;
    uint32_t *a = malloc((len + 1) * sizeof *a), *b = malloc((len + 1) * sizeof *b);
    char *out = malloc(len + 1);
    if (!a || !b || !out) { free(a); free(b); free(out); free(low); return NULL; }
    for (size_t i = 0; i < len;) {                      /* remove punctuation */
        uint32_t cp;
        i += (size_t)py_decode(low + i, &cp);
        if (!is_punct(cp)) a[k++] = cp;
    }
    free(low);
    size_t m = 0;                                       /* re.sub(r"\b(a|an|the)\b", " ") */
    for (size_t i = 0; i < k;) {
        if (i == 0 || !py_isword(a[i - 1])) {
            static const char *const art[] = {"a", "an", "the"};
            size_t hit = 0;
            for (int t = 0; t < 3 && !hit; t++) {
                size_t L = strlen(art[t]), j = 0;
                while (j < L && i + j < k && a[i + j] == (uint32_t)art[t][j]) j++;
                if (j == L && (i + L == k || !py_isword(a[i + L]))) hit = L;
            }
            if (hit) { b[m++] = ' '; i += hit; continue; }
        }
        b[m++] = a[i++];
    }
    size_t o = 0;                                       /* " ".join(s.split()) */
    for (size_t i = 0; i < m;) {
        while (i < m && py_isspace(b[i])) i++;
        if (i >= m) break;
        if (o) out[o++] = ' ';
        while (i < m && !py_isspace(b[i])) o += (size_t)py_encode(b[i++], out + o);
    }
    out[o] = 0;
    free(a); free(b);
    return out;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

double metric_qa_f1(const char *pred, const char *ref) {
    char *p = metric_normalize_answer(pred), *r = metric_normalize_answer(ref);
    char **tp = NULL, **tr = NULL;
    double f1 = 0;
    int np = p ? py_split(p, &tp) : -1, nr = r ? py_split(r, &tr) : -1;
    if (np > 0 && nr > 0) {
        qsort(tp, (size_t)np, sizeof *tp, cmp_str);     /* multiset overlap by merging */
        qsort(tr, (size_t)nr, sizeof *tr, cmp_str);
        int same = 0;
        for (int i = 0, j = 0; i < np && j < nr;) {
            int c = strcmp(tp[i], tr[j]);
            if (c == 0) { same++; i++; j++; }
            else if (c < 0) i++;
            else j++;
        }
        if (same) {
            double prec = (double)same / np, rec = (double)same / nr;
            f1 = 2 * prec * rec / (prec + rec);
        }
    }
    free(tp); free(tr); free(p); free(r);
    return f1;
}

int metric_lcs(const char *const *a, int n, const char *const *b, int m) {
    int *prev = calloc((size_t)m + 1, sizeof *prev), *cur = calloc((size_t)m + 1, sizeof *cur);
    int best = 0;
    if (prev && cur) {
        for (int i = 1; i <= n; i++) {
            for (int j = 1; j <= m; j++)
                cur[j] = !strcmp(a[i - 1], b[j - 1]) ? prev[j - 1] + 1 : (prev[j] > cur[j - 1] ? prev[j] : cur[j - 1]);
            int *t = prev; prev = cur; cur = t;
        }
        best = prev[m];
    }
    free(prev); free(cur);
    return best;
}

double metric_classification(const char *pred, const char *ref, const char *const *classes, int n) {
    const char **m = malloc(((size_t)n + 1) * sizeof *m);
    if (!m) return 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strstr(pred, classes[i])) m[k++] = classes[i];
    /* Python: for term in list: if cond: list.remove(term)  (index advances regardless) */
    for (int i = 0; i < k; i++) {
        const char *t = m[i];
        if (strstr(ref, t) && strcmp(t, ref)) {
            int at = 0;
            while (strcmp(m[at], t)) at++;               /* remove() takes the first equal one */
            memmove(m + at, m + at + 1, (size_t)(k - at - 1) * sizeof *m);
            k--;
        }
    }
    double s = 0;
    for (int i = 0; i < k; i++)
        if (!strcmp(m[i], ref)) { s = 1.0 / k; break; }
    free(m);
    return s;
}

/* Bytes of the \d+ run at p (re's \d: Unicode decimal digits), 0 if none. */
static size_t digit_run(const char *p) {
    size_t n = 0;
    int k;
    while ((k = py_decimal_len(p + n)) > 0) n += (size_t)k;
    return n;
}

/* Share of the \d+ runs of pred that equal want (compared as strings, as the official
 * str(number) == str(ground_truth): a fullwidth or Arabic-Indic digit is not its ASCII twin). */
static double share_equal(const char *pred, const char *want, size_t wn) {
    int total = 0, right = 0;
    for (const char *p = pred; *p;) {
        size_t r = digit_run(p);
        if (!r) { uint32_t cp; p += py_decode(p, &cp); continue; }
        total++;
        if (r == wn && !memcmp(p, want, wn)) right++;
        p += r;
    }
    return total ? (double)right / total : 0.0;
}

double metric_retrieval(const char *pred, const char *ref) {
    for (const char *p = strstr(ref, "Paragraph "); p; p = strstr(p + 1, "Paragraph ")) {
        size_t r = digit_run(p + 10);
        if (r) return share_equal(pred, p + 10, r);
    }
    return 0.0;
}

double metric_count(const char *pred, const char *ref) { return share_equal(pred, ref, strlen(ref)); }

/* RULER: r.lower() in pred.lower(), with Python's full lowercase. */
int metric_contains_ci(const char *hay, const char *needle) {
    if (!*needle) return 1;
    char *h = py_lower(hay), *n = py_lower(needle);
    int r = h && n && strstr(h, n) != NULL;
    free(h); free(n);
    return r;
}

double metric_match_all(const char *pred, const char *const *refs, int n) {
    if (n <= 0) return 0;
    int found = 0;
    for (int i = 0; i < n; i++) found += metric_contains_ci(pred, refs[i]);
    return 100.0 * found / n;
}

double metric_match_part(const char *pred, const char *const *refs, int n) {
    for (int i = 0; i < n; i++)
        if (metric_contains_ci(pred, refs[i])) return 100.0;
    return 0.0;
}

int metric_first_int(const char *pred, const char *ref) {
    const char *p = pred;
    while (*p && !is_digit((unsigned char)*p)) p++;
    const char *q = p;
    while (is_digit((unsigned char)*q)) q++;
    return (size_t)(q - p) == strlen(ref) && !memcmp(p, ref, (size_t)(q - p));
}

/* Copy of s with every occurrence of each of the n strings in from[] replaced by a space,
 * in order (as chained str.replace calls). */
static char *replace_all_space(const char *s, const char *const *from, int n) {
    char *cur = strdup(s);
    for (int f = 0; cur && f < n; f++) {
        size_t L = strlen(from[f]), k = 0;
        char *out = malloc(strlen(cur) + 1);
        if (!out) { free(cur); return NULL; }
        for (const char *p = cur; *p;) {
            if (!strncmp(p, from[f], L)) { out[k++] = ' '; p += L; }
            else out[k++] = *p++;
        }
        out[k] = 0;
        free(cur);
        cur = out;
    }
    return cur;
}

int metric_kv_word(const char *pred, const char *ref) {
    static const char *const chars[] = {"\n", ":", "\"", "'", ".", ",", "?", "!", "{", "}"};
    char *s = replace_all_space(pred, chars, 10);
    char **w = NULL;
    int n = s ? py_split(s, &w) : -1, hit = 0;
    for (int i = 0; i < n && !hit; i++) hit = !strcmp(w[i], ref);
    free(w); free(s);
    return hit;
}

static void collapse_double_spaces(char *s) {   /* while "  " in s: replace("  ", " ") */
    size_t k = 0;
    for (size_t i = 0; s[i]; i++)
        if (!(s[i] == ' ' && k && s[k - 1] == ' ')) s[k++] = s[i];
    s[k] = 0;
}

/* pred[idx + len(prefix) + 1:]: one code point (not byte) past the prefix's end e; NULL
 * where the official length check fails (nothing follows the prefix). */
static const char *after_prefix(const char *e) {
    uint32_t cp;
    int k = py_decode(e, &cp);
    return k ? e + k : NULL;
}

static int starts_with(const char *s, const char *p) { return *p && !strncmp(s, p, strlen(p)); }

int metric_choice(const char *pred, const char *option_text, const char *letter) {
    char *p = py_strip(pred);
    if (!p) return 0;
    int r = 0;
    if (!*p) goto done;
    if (strchr("ABCD", p[0])) {                        /* pred[0] in label */
        char c[2] = {p[0], 0};
        r = !strcmp(c, option_text) || !strcmp(c, letter);
        goto done;
    }
    if (!strcmp(p, option_text) || !strcmp(p, letter)) { r = 1; goto done; }
    static const char *const chars[] = {"\n", "\"", "'", ".", ",", "?", "!", "{", "}"};
    char *q = replace_all_space(p, chars, 9);
    if (!q) goto done;
    collapse_double_spaces(q);
    static const char *const prefixes[] = {"answer is:", "answer:", "answer is", "option is"};
    for (int i = 0; i < 4; i++) {
        const char *at = strstr(q, prefixes[i]);
        if (!at) continue;
        const char *after = after_prefix(at + strlen(prefixes[i]));
        if (after) r = starts_with(after, option_text) || starts_with(after, letter);
        free(q);
        goto done;
    }
    char **w = NULL;                                    /* first word that is in "ABCD" */
    int n = py_split(q, &w);
    for (int i = 0; i < n; i++)
        if (strstr("ABCD", w[i])) { r = !strcmp(w[i], option_text) || !strcmp(w[i], letter); break; }
    free(w);
    free(q);
done:
    free(p);
    return r;
}

int metric_code_debug(const char *pred, const char *fn_name, const char *letter) {
    char *p = py_strip(pred);                          /* the official code strips first */
    if (!p) return 0;
    size_t L = strlen(letter);                          /* pred[:2] in ["X.", "X:"] */
    if (L == 1 && p[0] == letter[0] && (p[1] == '.' || p[1] == ':')) { free(p); return 1; }
    static const char *const chars[] = {"\n", "`", "'", "\"", "-", "*", "Option", "option"};
    char *q = replace_all_space(p, chars, 8);
    free(p);
    if (!q) return 0;
    collapse_double_spaces(q);
    static const char *const prefixes[] = {"answer is:", "is:", "answer:", "correct option is:"};
    int r = 0;
    for (int i = 0; i < 4; i++) {
        const char *at = strstr(q, prefixes[i]);
        if (!at) continue;
        const char *after = after_prefix(at + strlen(prefixes[i]));
        if (after) r = starts_with(after, letter) || starts_with(after, fn_name);
        break;
    }
    free(q);
    return r;
}

/* Digits with commas removed and a trailing '.' dropped. */
static int clean_number(const char *s, size_t n, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        if (s[i] != ',') out[k++] = s[i];
    while (k && out[k - 1] == '.') k--;
    if (cap) out[k < cap ? k : cap - 1] = 0;
    return (int)k;
}

int metric_gsm8k_extract(const char *pred, char *out, size_t cap) {
    const char *end = strstr(pred, "Question:");
    size_t n = end ? (size_t)(end - pred) : strlen(pred);
    const char *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0; i < n;) {                       /* numbers: -?\d[\d,]*(\.\d+)? or -?\.\d+ */
        if (!is_digit((unsigned char)pred[i])) { i++; continue; }
        size_t s = i;
        if (s > 0 && pred[s - 1] == '.') s--;          /* ".5", "-.5": the point is the number's */
        if (s > 0 && pred[s - 1] == '-') s--;
        while (i < n && (is_digit((unsigned char)pred[i]) || (pred[i] == ',' && i + 1 < n && is_digit((unsigned char)pred[i + 1])))) i++;
        if (i + 1 < n && pred[i] == '.' && is_digit((unsigned char)pred[i + 1])) {
            i++;
            while (i < n && is_digit((unsigned char)pred[i])) i++;
        }
        best = pred + s;
        best_n = i - s;
    }
    if (!best) { if (cap) out[0] = 0; return 0; }
    return clean_number(best, best_n, out, cap);
}

int metric_gsm8k_reference(const char *answer, char *out, size_t cap) {
    const char *p = strstr(answer, "####");
    if (!p) { if (cap) out[0] = 0; return 0; }
    p += 4;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strcspn(p, "\r\n");
    while (n && is_ws((unsigned char)p[n - 1])) n--;
    return clean_number(p, n, out, cap);
}

int metric_gsm8k_match(const char *pred, const char *ref) {
    char a[64], b[64];
    if (!metric_gsm8k_extract(pred, a, sizeof a)) return 0;
    clean_number(ref, strlen(ref), b, sizeof b);
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (*ea || *eb || ea == a || eb == b) return !strcmp(a, b);
    return x == y;
}

char *metric_first_line(const char *s) {
    while (*s == '\n') s++;
    size_t n = strcspn(s, "\n");
    char *r = malloc(n + 1);
    if (r) { memcpy(r, s, n); r[n] = 0; }
    return r;
}
