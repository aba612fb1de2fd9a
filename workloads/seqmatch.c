/* difflib.SequenceMatcher's ratio (isjunk=None, autojunk=True) on Unicode code points,
 * written from its documented algorithm: the longest matching block first (earliest in a,
 * then in b, on ties), then the same recursively on the pieces left and right of it;
 * ratio = 2 * (matched elements) / (len(a) + len(b)). And LongBench's code_sim on top. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "metrics.h"

/* UTF-8 to code points; an invalid byte stands for itself (0xDC00 + byte, as Python's
 * surrogateescape would). Returns the count; *out allocated (at least 1 element). */
static int utf8_points(const char *s, uint32_t **out) {
    size_t n = strlen(s);
    uint32_t *p = malloc((n + 1) * sizeof *p);
    if (!p) return -1;
    int k = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0 && i + (size_t)len <= n;
        for (int j = 1; ok && j < len; j++) ok = (u[i + j] & 0xC0) == 0x80;
        if (!ok) { p[k++] = 0xDC00 + c; i++; continue; }
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
        for (int j = 1; j < len; j++) cp = (cp << 6) | (u[i + j] & 0x3F);
        p[k++] = cp;
        i += (size_t)len;
    }
    *out = p;
    return k;
}

typedef struct { uint32_t v; int j; } b2j_entry;

static int cmp_entry(const void *x, const void *y) {
    const b2j_entry *a = x, *b = y;
    if (a->v != b->v) return a->v < b->v ? -1 : 1;
    return a->j - b->j;
}

typedef struct {
    const uint32_t *a, *b;
    int na, nb;
    b2j_entry *idx;          /* (value, position in b), sorted; popular values removed */
    int nidx;
    int *len_prev, *len_cur; /* j2len of the previous / current row of a */
    int *touched_prev, *touched_cur;
} matcher;

/* First entry of value v in idx, or nidx. */
static int lower_bound(const matcher *m, uint32_t v) {
    int lo = 0, hi = m->nidx;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (m->idx[mid].v < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void longest_match(matcher *m, int alo, int ahi, int blo, int bhi, int *bi, int *bj, int *bk) {
    int besti = alo, bestj = blo, best = 0, ntp = 0;
    for (int i = alo; i < ahi; i++) {
        int ntc = 0;
        for (int e = lower_bound(m, m->a[i]); e < m->nidx && m->idx[e].v == m->a[i]; e++) {
            int j = m->idx[e].j;
            if (j < blo) continue;
            if (j >= bhi) break;
            int k = (j > 0 ? m->len_prev[j - 1] : 0) + 1;
            m->len_cur[j] = k;
            m->touched_cur[ntc++] = j;
            if (k > best) { besti = i - k + 1; bestj = j - k + 1; best = k; }
        }
        for (int t = 0; t < ntp; t++) m->len_prev[m->touched_prev[t]] = 0;
        int *s = m->len_prev; m->len_prev = m->len_cur; m->len_cur = s;
        s = m->touched_prev; m->touched_prev = m->touched_cur; m->touched_cur = s;
        ntp = ntc;
    }
    for (int t = 0; t < ntp; t++) m->len_prev[m->touched_prev[t]] = 0;
    /* Extend with equal elements the index left out (difflib's "popular" ones). */
    while (besti > alo && bestj > blo && m->a[besti - 1] == m->b[bestj - 1]) { besti--; bestj--; best++; }
    while (besti + best < ahi && bestj + best < bhi && m->a[besti + best] == m->b[bestj + best]) best++;
    *bi = besti; *bj = bestj; *bk = best;
}

double metric_seq_ratio(const char *sa, const char *sb) {
    uint32_t *a = NULL, *b = NULL;
    int na = utf8_points(sa, &a), nb = utf8_points(sb, &b);
    double r = 0;
    matcher m = {0};
    int *stack = NULL;
    if (na < 0 || nb < 0) goto out;
    if (na + nb == 0) { r = 1.0; goto out; }
    m.a = a; m.b = b; m.na = na; m.nb = nb;
    m.idx = malloc(((size_t)nb + 1) * sizeof *m.idx);
    m.len_prev = calloc((size_t)nb + 1, sizeof(int));
    m.len_cur = calloc((size_t)nb + 1, sizeof(int));
    m.touched_prev = malloc(((size_t)nb + 1) * sizeof(int));
    m.touched_cur = malloc(((size_t)nb + 1) * sizeof(int));
    stack = malloc(4 * ((size_t)na + (size_t)nb + 2) * sizeof *stack);
    if (!m.idx || !m.len_prev || !m.len_cur || !m.touched_prev || !m.touched_cur || !stack) goto out;
    for (int j = 0; j < nb; j++) m.idx[j] = (b2j_entry){b[j], j};
    qsort(m.idx, (size_t)nb, sizeof *m.idx, cmp_entry);
    m.nidx = nb;
    if (nb >= 200) {                 /* autojunk: drop values seen more than nb/100 + 1 times */
        int ntest = nb / 100 + 1, k = 0;
        for (int s = 0; s < nb;) {
            int e = s;
            while (e < nb && m.idx[e].v == m.idx[s].v) e++;
            if (e - s <= ntest)
                for (int t = s; t < e; t++) m.idx[k++] = m.idx[t];
            s = e;
        }
        m.nidx = k;
    }
    long matched = 0;
    int sp = 0;
    stack[sp++] = 0; stack[sp++] = na; stack[sp++] = 0; stack[sp++] = nb;
    while (sp) {
        int bhi = stack[--sp], blo = stack[--sp], ahi = stack[--sp], alo = stack[--sp];
        int i, j, k;
        longest_match(&m, alo, ahi, blo, bhi, &i, &j, &k);
        if (!k) continue;
        matched += k;
        if (alo < i && blo < j) { stack[sp++] = alo; stack[sp++] = i; stack[sp++] = blo; stack[sp++] = j; }
        if (i + k < ahi && j + k < bhi) { stack[sp++] = i + k; stack[sp++] = ahi; stack[sp++] = j + k; stack[sp++] = bhi; }
    }
    r = 2.0 * (double)matched / (double)(na + nb);
out:
    free(a); free(b); free(m.idx); free(m.len_prev); free(m.len_cur);
    free(m.touched_prev); free(m.touched_cur); free(stack);
    return r;
}

double metric_code_sim(const char *pred, const char *ref) {
    while (*pred == '\n') pred++;
    const char *line = "";
    size_t n = 0;
    for (const char *p = pred;;) {                    /* first line without ` # // */
        size_t L = strcspn(p, "\n");
        int bad = 0;
        for (size_t i = 0; i < L && !bad; i++)
            bad = p[i] == '`' || p[i] == '#' || (p[i] == '/' && i + 1 < L && p[i + 1] == '/');
        if (!bad) { line = p; n = L; break; }
        if (!p[L]) break;
        p += L + 1;
    }
    char *s = malloc(n + 1);
    if (!s) return 0;
    memcpy(s, line, n);
    s[n] = 0;
    double score;
    if (!strcmp(s, ref)) score = 1.0;                  /* fuzz.ratio: equal -> 100, empty -> 0 */
    else if (!*s || !*ref) score = 0.0;
    else score = nearbyint(100.0 * metric_seq_ratio(s, ref)) / 100.0;  /* round half to even */
    free(s);
    return score;
}
