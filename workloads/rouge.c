/* The two summary-level ROUGE-L variants the benchmarks score with (see metrics.h):
 *   metric_rouge_l     pltrdy `rouge` 1.0.1, Rouge().get_scores(...)["rouge-l"]["f"] (LongBench)
 *   metric_rouge_lsum  Google `rouge-score` 0.1.2, rougeLsum fmeasure, as HF `evaluate`'s
 *                      "rouge" computes it (InfiniteBench En.Sum)
 * Both build one LCS table per (reference sentence, candidate sentence) pair and read one
 * LCS back out of it; which LCS is read out matters (pltrdy counts distinct words), so the
 * tie-breaking of each package's backtrack is kept exactly. Words are mapped to integer
 * ids once (sorted, unique) so sets and counters are arrays. */
#include <stdlib.h>
#include <string.h>
#include "metrics.h"
#include "pystr.h"

/* ---- text pieces ---------------------------------------------------------------------- */

/* Length of the UTF-8 whitespace character at s (Python's str.isspace()), 0 if none. */
static int ws_len(const unsigned char *s) { return py_space_len((const char *)s); }

typedef struct {             /* words of a text, grouped in sentences */
    char **w;                /* word strings (owned) */
    int n, cap;
    int *start;              /* sentence s holds words start[s] .. start[s+1]-1 */
    int ns, scap;
} sents;

static void sents_free(sents *s) {
    for (int i = 0; i < s->n; i++) free(s->w[i]);
    free(s->w); free(s->start);
}

static int push_word(sents *s, const char *p, size_t len) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        char **w = realloc(s->w, (size_t)cap * sizeof *w);
        if (!w) return -1;
        s->w = w; s->cap = cap;
    }
    char *d = malloc(len + 1);
    if (!d) return -1;
    memcpy(d, p, len);
    d[len] = 0;
    s->w[s->n++] = d;
    return 0;
}

static int open_sentence(sents *s) {          /* also keeps start[ns] = n as the end mark */
    if (s->ns + 2 > s->scap) {
        int cap = s->scap ? 2 * s->scap : 8;
        int *t = realloc(s->start, (size_t)cap * sizeof *t);
        if (!t) return -1;
        s->start = t; s->scap = cap;
    }
    s->start[s->ns++] = s->n;
    s->start[s->ns] = s->n;
    return 0;
}
static void close_sentence(sents *s) { s->start[s->ns] = s->n; }

/* pltrdy: sentences = [" ".join(x.split()) for x in text.split(".") if len(x) > 0], each
 * then split(" "): so a sentence of whitespace only is one empty word "". */
static int pltrdy_sentences(const char *text, sents *s) {
    const unsigned char *p = (const unsigned char *)text;
    while (1) {
        size_t seg = strcspn((const char *)p, ".");
        if (seg > 0) {
            if (open_sentence(s)) return -1;
            const unsigned char *q = p, *end = p + seg;
            int words = 0;
            while (q < end) {
                int k;
                while (q < end && (k = ws_len(q)) > 0) q += k;
                if (q >= end) break;
                const unsigned char *w = q;
                while (q < end && ws_len(q) == 0) q++;
                if (push_word(s, (const char *)w, (size_t)(q - w))) return -1;
                words++;
            }
            if (!words && push_word(s, "", 0)) return -1;
            close_sentence(s);
        }
        if (!p[seg]) break;
        p += seg + 1;
    }
    return 0;
}

/* rouge-score: sentences = [x for x in text.split("\n") if len(x)], each tokenised as
 * text.lower(), [^a-z0-9]+ -> " ", the runs of [a-z0-9] that remain. Two non-ASCII
 * letters lower to ASCII in Python: U+0130 (to "i" + U+0307) and U+212A KELVIN (to "k"). */
static int lsum_sentences(const char *text, sents *s) {
    const unsigned char *p = (const unsigned char *)text;
    size_t tlen = strlen(text);
    char *tok = malloc(tlen + 1);
    if (!tok) return -1;
    int rc = 0;
    while (!rc) {
        size_t seg = strcspn((const char *)p, "\n");
        if (seg > 0) {
            if (open_sentence(s)) { rc = -1; break; }
            size_t k = 0;
            for (const unsigned char *q = p, *end = p + seg; q <= end && !rc; ) {
                char c = 0;
                int adv = 1;
                if (q < end) {
                    if ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')) c = (char)*q;
                    else if (*q >= 'A' && *q <= 'Z') c = (char)(*q + 32);
                    else if (q + 2 < end && q[0] == 0xe2 && q[1] == 0x84 && q[2] == 0xaa) { c = 'k'; adv = 3; }
                    else if (q + 1 < end && q[0] == 0xc4 && q[1] == 0xb0) { tok[k++] = 'i'; adv = 2; }  /* then U+0307 ends the token */
                }
                if (c) { tok[k++] = c; q += adv; continue; }
                if (k && push_word(s, tok, k)) rc = -1;
                k = 0;
                q += adv;
            }
            close_sentence(s);
        }
        if (!p[seg]) break;
        p += seg + 1;
    }
    free(tok);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Replaces the words of a and b by ids into one sorted vocabulary: *ida, *idb (caller
 * frees); returns the vocabulary size, -1 on OOM. */
static int word_ids(const sents *a, const sents *b, int **ida, int **idb) {
    int n = a->n + b->n;
    char **all = malloc((size_t)(n ? n : 1) * sizeof *all);
    int *ia = malloc((size_t)(a->n ? a->n : 1) * sizeof *ia), *ib = malloc((size_t)(b->n ? b->n : 1) * sizeof *ib);
    if (!all || !ia || !ib) { free(all); free(ia); free(ib); return -1; }
    memcpy(all, a->w, (size_t)a->n * sizeof *all);
    memcpy(all + a->n, b->w, (size_t)b->n * sizeof *all);
    qsort(all, (size_t)n, sizeof *all, cmp_str);
    int v = 0;
    for (int i = 0; i < n; i++)
        if (!v || strcmp(all[v - 1], all[i])) all[v++] = all[i];
    for (int i = 0; i < a->n; i++) ia[i] = (int)((char **)bsearch(&a->w[i], all, (size_t)v, sizeof *all, cmp_str) - all);
    for (int i = 0; i < b->n; i++) ib[i] = (int)((char **)bsearch(&b->w[i], all, (size_t)v, sizeof *all, cmp_str) - all);
    free(all);
    *ida = ia; *idb = ib;
    return v;
}

/* LCS table of x (n) and y (m), row-major (n+1) x (m+1); NULL on OOM. */
static int *lcs_table(const int *x, int n, const int *y, int m) {
    int *t = calloc(((size_t)n + 1) * ((size_t)m + 1), sizeof *t);
    if (!t) return NULL;
    size_t w = (size_t)m + 1;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++)
            t[i * w + j] = x[i - 1] == y[j - 1] ? t[(i - 1) * w + j - 1] + 1
                         : (t[(i - 1) * w + j] > t[i * w + j - 1] ? t[(i - 1) * w + j] : t[i * w + j - 1]);
    return t;
}

/* ---- pltrdy rouge-l ------------------------------------------------------------------- */

double metric_rouge_l(const char *pred, const char *ref) {
    sents h = {0}, r = {0};
    int *ih = NULL, *ir = NULL;
    unsigned char *in_h = NULL, *in_r = NULL, *u = NULL;
    double f = 0;
    if (pltrdy_sentences(pred, &h) || pltrdy_sentences(ref, &r)) goto out;
    if (!h.ns || !r.ns) goto out;                /* the package raises; LongBench scores 0 */
    int v = word_ids(&h, &r, &ih, &ir);
    if (v < 0) goto out;
    in_h = calloc((size_t)v, 1); in_r = calloc((size_t)v, 1); u = calloc((size_t)v, 1);
    if (!in_h || !in_r || !u) goto out;
    int n = 0, m = 0, llcs = 0;                  /* distinct words (exclusive=True: sets) */
    for (int i = 0; i < h.n; i++) if (!in_h[ih[i]]) { in_h[ih[i]] = 1; n++; }
    for (int i = 0; i < r.n; i++) if (!in_r[ir[i]]) { in_r[ir[i]] = 1; m++; }
    for (int a = 0; a < r.ns; a++) {             /* union over every (ref, hyp) sentence pair */
        const int *x = ir + r.start[a];
        int nx = r.start[a + 1] - r.start[a];
        for (int b = 0; b < h.ns; b++) {
            const int *y = ih + h.start[b];
            int ny = h.start[b + 1] - h.start[b];
            int *t = lcs_table(x, nx, y, ny);
            if (!t) goto out;
            size_t w = (size_t)ny + 1;
            /* _recon: match -> diagonal; table[i-1][j] > table[i][j-1] -> up; else left */
            for (int i = nx, j = ny; i > 0 && j > 0;) {
                if (x[i - 1] == y[j - 1]) {
                    if (!u[x[i - 1]]) { u[x[i - 1]] = 1; llcs++; }
                    i--; j--;
                } else if (t[(i - 1) * w + j] > t[i * w + j - 1]) i--;
                else j--;
            }
            free(t);
        }
    }
    double rl = (double)llcs / m, pl = (double)llcs / n;
    f = 2.0 * ((pl * rl) / (pl + rl + 1e-8));
out:
    free(ih); free(ir); free(in_h); free(in_r); free(u);
    sents_free(&h); sents_free(&r);
    return f;
}

/* ---- rouge-score rougeLsum ------------------------------------------------------------ */

double metric_rouge_lsum(const char *pred, const char *ref) {
    sents c = {0}, r = {0};
    int *ic = NULL, *ir = NULL, *cnt_c = NULL, *cnt_r = NULL;
    unsigned char *mark = NULL;
    double f = 0;
    if (lsum_sentences(pred, &c) || lsum_sentences(ref, &r)) goto out;
    if (!c.ns || !r.ns || !c.n || !r.n) goto out;
    int v = word_ids(&c, &r, &ic, &ir);
    if (v < 0) goto out;
    cnt_c = calloc((size_t)v, sizeof *cnt_c); cnt_r = calloc((size_t)v, sizeof *cnt_r);
    if (!cnt_c || !cnt_r) goto out;
    for (int i = 0; i < c.n; i++) cnt_c[ic[i]]++;
    for (int i = 0; i < r.n; i++) cnt_r[ir[i]]++;
    int hits = 0;
    for (int a = 0; a < r.ns; a++) {
        const int *x = ir + r.start[a];
        int nx = r.start[a + 1] - r.start[a];
        free(mark);
        if (!(mark = calloc((size_t)nx + 1, 1))) goto out;
        for (int b = 0; b < c.ns; b++) {        /* union of the LCS index sets into ref */
            const int *y = ic + c.start[b];
            int ny = c.start[b + 1] - c.start[b];
            int *t = lcs_table(x, nx, y, ny);
            if (!t) goto out;
            size_t w = (size_t)ny + 1;
            /* _backtrack_norec: match -> diagonal; t[i][j-1] > t[i-1][j] -> left; else up */
            for (int i = nx, j = ny; i > 0 && j > 0;) {
                if (x[i - 1] == y[j - 1]) { mark[i - 1] = 1; i--; j--; }
                else if (t[i * w + j - 1] > t[(i - 1) * w + j]) j--;
                else i--;
            }
            free(t);
        }
        for (int i = 0; i < nx; i++)              /* sorted indices; no double counting */
            if (mark[i] && cnt_c[x[i]] > 0 && cnt_r[x[i]] > 0) { hits++; cnt_c[x[i]]--; cnt_r[x[i]]--; }
    }
    double recall = (double)hits / r.n, precision = (double)hits / c.n;
    f = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
out:
    free(ic); free(ir); free(cnt_c); free(cnt_r); free(mark);
    sents_free(&c); sents_free(&r);
    return f;
}
