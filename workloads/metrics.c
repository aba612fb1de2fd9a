/* Official text metrics (see metrics.h); the sequence-matcher ratio is in seqmatch.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "metrics.h"

/* Python's str.split() whitespace, ASCII part. */
static int is_ws(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }
/* Python re \w, with every non-ASCII byte counted as a letter. */
static int is_word(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}
static int is_punct(unsigned char c) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

char *metric_normalize_answer(const char *s) {
    size_t n = strlen(s);
    char *a = malloc(n + 1), *b = malloc(n + 1);
    if (!a || !b) { free(a); free(b); return NULL; }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)                      /* lower, remove punctuation */
        if (!is_punct((unsigned char)s[i])) a[k++] = (char)lower((unsigned char)s[i]);
    a[k] = 0;
    size_t m = 0;                                       /* \b(a|an|the)\b -> " " */
    for (size_t i = 0; i < k;) {
        if (i == 0 || !is_word((unsigned char)a[i - 1])) {
            static const char *const art[] = {"a", "an", "the"};
            size_t hit = 0;
            for (int t = 0; t < 3 && !hit; t++) {
                size_t L = strlen(art[t]);
                if (i + L <= k && !memcmp(a + i, art[t], L) && !is_word((unsigned char)a[i + L])) hit = L;
            }
            if (hit) { b[m++] = ' '; i += hit; continue; }
        }
        b[m++] = a[i++];
    }
    b[m] = 0;
    k = 0;                                              /* collapse whitespace */
    for (size_t i = 0; i < m;) {
        while (i < m && is_ws((unsigned char)b[i])) i++;
        if (i >= m) break;
        if (k) a[k++] = ' ';
        while (i < m && !is_ws((unsigned char)b[i])) a[k++] = b[i++];
    }
    a[k] = 0;
    free(b);
    return a;
}

/* Splits s in place at whitespace; *out gets the token pointers (caller frees).
 * Returns the count, -1 on OOM. */
static int split_ws(char *s, char ***out) {
    size_t n = strlen(s), cap = n / 2 + 2;
    char **t = malloc(cap * sizeof *t);
    if (!t) return -1;
    int k = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && is_ws((unsigned char)s[i])) s[i++] = 0;
        if (i >= n) break;
        t[k++] = s + i;
        while (i < n && !is_ws((unsigned char)s[i])) i++;
    }
    *out = t;
    return k;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

double metric_qa_f1(const char *pred, const char *ref) {
    char *p = metric_normalize_answer(pred), *r = metric_normalize_answer(ref);
    char **tp = NULL, **tr = NULL;
    double f1 = 0;
    int np = p ? split_ws(p, &tp) : -1, nr = r ? split_ws(r, &tr) : -1;
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

/* Share of the digit runs of pred that equal want (a digit string of length wn). */
static double share_equal(const char *pred, const char *want, size_t wn) {
    int total = 0, right = 0;
    for (const char *p = pred; *p;) {
        if (!is_digit((unsigned char)*p)) { p++; continue; }
        const char *q = p;
        while (is_digit((unsigned char)*q)) q++;
        total++;
        if ((size_t)(q - p) == wn && !memcmp(p, want, wn)) right++;
        p = q;
    }
    return total ? (double)right / total : 0.0;
}

double metric_retrieval(const char *pred, const char *ref) {
    for (const char *p = strstr(ref, "Paragraph "); p; p = strstr(p + 1, "Paragraph ")) {
        const char *d = p + 10, *e = d;
        while (is_digit((unsigned char)*e)) e++;
        if (e > d) return share_equal(pred, d, (size_t)(e - d));
    }
    return 0.0;
}

double metric_count(const char *pred, const char *ref) { return share_equal(pred, ref, strlen(ref)); }

int metric_contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    if (!n) return 1;
    for (const char *h = hay; *h; h++) {
        size_t i = 0;
        while (i < n && h[i] && lower((unsigned char)h[i]) == lower((unsigned char)needle[i])) i++;
        if (i == n) return 1;
    }
    return 0;
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
    int n = s ? split_ws(s, &w) : -1, hit = 0;
    for (int i = 0; i < n && !hit; i++) hit = !strcmp(w[i], ref);
    free(w); free(s);
    return hit;
}

/* Python's s.strip() (ASCII whitespace) into a fresh string. */
static char *strip_dup(const char *s) {
    while (*s && is_ws((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && is_ws((unsigned char)s[n - 1])) n--;
    char *r = malloc(n + 1);
    if (r) { memcpy(r, s, n); r[n] = 0; }
    return r;
}

static void collapse_double_spaces(char *s) {   /* while "  " in s: replace("  ", " ") */
    size_t k = 0;
    for (size_t i = 0; s[i]; i++)
        if (!(s[i] == ' ' && k && s[k - 1] == ' ')) s[k++] = s[i];
    s[k] = 0;
}

static int starts_with(const char *s, const char *p) { return *p && !strncmp(s, p, strlen(p)); }

int metric_choice(const char *pred, const char *option_text, const char *letter) {
    char *p = strip_dup(pred);
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
        size_t after = (size_t)(at - q) + strlen(prefixes[i]) + 1;
        if (strlen(q) >= after)
            r = starts_with(q + after, option_text) || starts_with(q + after, letter);
        free(q);
        goto done;
    }
    char **w = NULL;                                    /* first word that is in "ABCD" */
    int n = split_ws(q, &w);
    for (int i = 0; i < n; i++)
        if (strstr("ABCD", w[i])) { r = !strcmp(w[i], option_text) || !strcmp(w[i], letter); break; }
    free(w);
    free(q);
done:
    free(p);
    return r;
}

int metric_code_debug(const char *pred, const char *fn_name, const char *letter) {
    char *p = strip_dup(pred);                          /* the official code strips first */
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
        size_t after = (size_t)(at - q) + strlen(prefixes[i]) + 1;
        if (strlen(q) >= after) r = starts_with(q + after, letter) || starts_with(q + after, fn_name);
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
    for (size_t i = 0; i < n;) {                       /* numbers: -?(\d[\d,]*)?(\.\d+)?, a digit at least */
        int dot_first = pred[i] == '.' && i + 1 < n && is_digit((unsigned char)pred[i + 1]);   /* "-.5" is -0.5, not 5 */
        if (!is_digit((unsigned char)pred[i]) && !dot_first) { i++; continue; }
        size_t s = i;
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
