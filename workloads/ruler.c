/* RULER task table, shared helpers and the length fitting (see ruler.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ruler_internal.h"

const ruler_task_def RULER_TASKS[RULER_N_TASKS] = {
    {"niah_single_1", R_NIAH, HAY_NOISE, KEY_WORDS, KEY_NUMBERS, 1, 1, 1, 128},
    {"niah_single_2", R_NIAH, HAY_ESSAY, KEY_WORDS, KEY_NUMBERS, 1, 1, 1, 128},
    {"niah_single_3", R_NIAH, HAY_ESSAY, KEY_WORDS, KEY_UUIDS, 1, 1, 1, 128},
    {"niah_multikey_1", R_NIAH, HAY_ESSAY, KEY_WORDS, KEY_NUMBERS, 4, 1, 1, 128},
    {"niah_multikey_2", R_NIAH, HAY_NEEDLE, KEY_WORDS, KEY_NUMBERS, 1, 1, 1, 128},
    {"niah_multikey_3", R_NIAH, HAY_NEEDLE, KEY_UUIDS, KEY_UUIDS, 1, 1, 1, 128},
    {"niah_multivalue", R_NIAH, HAY_ESSAY, KEY_WORDS, KEY_NUMBERS, 1, 4, 1, 128},
    {"niah_multiquery", R_NIAH, HAY_ESSAY, KEY_WORDS, KEY_NUMBERS, 4, 1, 4, 128},
    {"vt", R_VT, HAY_NOISE, 0, 0, 1, 5, 1, 30},
    {"cwe", R_CWE, 0, 0, 0, 10, 1, 1, 120},
    {"fwe", R_FWE, 0, 0, 0, 3, 1, 1, 50},
    {"qa_1", R_QA, HAY_SQUAD, 0, 0, 1, 1, 1, 32},
    {"qa_2", R_QA, HAY_HOTPOT, 0, 0, 1, 1, 1, 32},
};

void ruler_defaults(ruler_opts *o) {
    memset(o, 0, sizeof *o);
    o->seed = RULER_DEFAULT_SEED;
    o->use_chat = 1;
}

const char *ruler_task_name(int i) { return i >= 0 && i < RULER_N_TASKS ? RULER_TASKS[i].name : NULL; }

int ruler_task_index(const char *name) {
    for (int i = 0; i < RULER_N_TASKS; i++)
        if (!strcmp(name, RULER_TASKS[i].name)) return i;
    return -1;
}

int ruler_task_max_new(int task) { return task >= 0 && task < RULER_N_TASKS ? RULER_TASKS[task].max_new : 0; }

int ruler_task_needs_essays(int task) {
    return task >= 0 && task < RULER_N_TASKS && RULER_TASKS[task].hay == HAY_ESSAY && RULER_TASKS[task].family == R_NIAH;
}

int ruler_task_qa(int task) {
    if (task < 0 || task >= RULER_N_TASKS || RULER_TASKS[task].family != R_QA) return 0;
    return RULER_TASKS[task].hay == HAY_SQUAD ? 1 : 2;
}

/* FNV-1a */
static size_t hash_str(const char *s) {
    size_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

int strset_has(const strset *s, const char *v) {
    if (!s->cap) return 0;
    for (size_t i = hash_str(v) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->slot[i]) return 0;
        if (!strcmp(s->slot[i], v)) return 1;
    }
}

int strset_add(strset *s, const char *v) {
    if (strset_has(s, v)) return 0;
    if (2 * (s->n + 1) > s->cap) {                  /* grow, keep the load under 1/2 */
        size_t nc = s->cap ? 2 * s->cap : 64;
        char **ns = calloc(nc, sizeof *ns);
        if (!ns) return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i]) continue;
            size_t j = hash_str(s->slot[i]) & (nc - 1);
            while (ns[j]) j = (j + 1) & (nc - 1);
            ns[j] = s->slot[i];
        }
        free(s->slot);
        s->slot = ns;
        s->cap = nc;
    }
    char *copy = strdup(v);
    if (!copy) return -1;
    size_t j = hash_str(v) & (s->cap - 1);
    while (s->slot[j]) j = (j + 1) & (s->cap - 1);
    s->slot[j] = copy;
    s->n++;
    return 1;
}

void strset_free(strset *s) {
    for (size_t i = 0; i < s->cap; i++) free(s->slot[i]);
    free(s->slot);
    memset(s, 0, sizeof *s);
}

int ruler_in_split(const char *item, wl_split split) {
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = item; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return (int)(h & 1) == (int)split;
}

static void random_item(wl_rng *r, int kind, char *buf) {
    if (kind == KEY_NUMBERS) {
        snprintf(buf, 40, "%d", 1000000 + (int)wl_below(r, 9000000));
    } else if (kind == KEY_UUIDS) {                 /* version 4, RFC 4122 variant */
        uint64_t hi = wl_next(r), lo = wl_next(r);
        hi = (hi & ~0xF000ULL) | 0x4000ULL;
        lo = (lo & ~(3ULL << 62)) | (2ULL << 62);
        snprintf(buf, 40, "%08x-%04x-%04x-%04x-%012llx", (unsigned)(hi >> 32), (unsigned)((hi >> 16) & 0xFFFF),
                 (unsigned)(hi & 0xFFFF), (unsigned)(lo >> 48), (unsigned long long)(lo & 0xFFFFFFFFFFFFULL));
    } else {
        int na, nn;
        const char *const *adj = ruler_adjectives(&na), *const *noun = ruler_nouns(&nn);
        int a = (int)wl_below(r, (uint64_t)na), b = (int)wl_below(r, (uint64_t)nn);
        snprintf(buf, 40, "%s-%s", adj[a], noun[b]);
    }
}

void ruler_random_item(wl_rng *r, int kind, wl_split split, char *buf) {
    do random_item(r, kind, buf);
    while (!ruler_in_split(buf, split));
}

int ruler_count(const char *hay, const char *needle) {
    int k = 0;
    size_t n = strlen(needle);
    if (!n) return 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) k++;
    return k;
}

/* Essay words: RULER's re.sub(r"\s+", " ", essay).split(" "). */
static int split_words(ruler_ctx *x) {
    const char *s = x->o->essays;
    size_t n = x->o->essays_len, cap = n / 4 + 16;
    x->words = malloc(cap * sizeof *x->words);
    x->word_len = malloc(cap * sizeof *x->word_len);
    if (!x->words || !x->word_len) return -1;
    int k = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && (s[i] == ' ' || (s[i] >= 9 && s[i] <= 13))) i++;
        if (i >= n) break;
        size_t j = i;
        while (j < n && !(s[j] == ' ' || (s[j] >= 9 && s[j] <= 13))) j++;
        if ((size_t)k == cap) {
            cap *= 2;
            const char **nw = realloc(x->words, cap * sizeof *nw);
            int *nl = nw ? realloc(x->word_len, cap * sizeof *nl) : NULL;
            if (nw) x->words = nw;
            if (!nw || !nl) return -1;
            x->word_len = nl;
        }
        x->words[k] = s + i;
        x->word_len[k++] = (int)(j - i);
        i = j;
    }
    x->n_words = k;
    /* the splits read disjoint halves of the essays (a haystack longer than a half wraps
     * around within it) */
    int half = k / 2;
    if (half > 0 && x->o->split == WL_SPLIT_DEV) {
        memmove(x->words, x->words + half, (size_t)(k - half) * sizeof *x->words);
        memmove(x->word_len, x->word_len + half, (size_t)(k - half) * sizeof *x->word_len);
        x->n_words = k - half;
    } else if (half > 0) {
        x->n_words = half;
    }
    return 0;
}

typedef int (*build_fn)(const ruler_ctx *, int, wl_rng, tc_case *);

static build_fn builder(int family) {
    return family == R_NIAH ? ruler_build_niah : family == R_VT ? ruler_build_vt
         : family == R_CWE ? ruler_build_cwe : family == R_QA ? ruler_build_qa : ruler_build_fwe;
}

/* Smallest haystack size a family accepts. */
static int min_size(const ruler_task_def *d) {
    if (d->family == R_NIAH) return d->n_keys * d->n_values + 1;
    if (d->family == R_VT) return 6;
    if (d->family == R_CWE) return 11;
    if (d->family == R_QA) return 1;
    return 100;                          /* fwe: ranks 2-5 get distinct counts from here on */
}

/* Builds with size h; *fits: prompt + generation within the length. */
static int try_size(const ruler_ctx *x, int h, wl_rng r, tc_case *c, int *fits) {
    tc_case_free(c);
    if (builder(x->def->family)(x, h, r, c)) return -1;
    *fits = c->prompt_tokens >= 0 && c->prompt_tokens + x->def->max_new <= x->length;
    return 0;
}

int ruler_generate(const ruler_opts *o, int task, int length, int n_samples, tc_list *out, char *err,
                   size_t errlen) {
    if (task < 0 || task >= RULER_N_TASKS) { snprintf(err, errlen, "ruler: no task %d", task); return -1; }
    const ruler_task_def *d = &RULER_TASKS[task];
    if (!o->tok) { snprintf(err, errlen, "ruler: no tokenizer"); return -1; }
    ruler_ctx x = {o, d, length, NULL, NULL, 0, 0};
    int rc = -1, fits = 0;
    tc_case c;
    tc_case_init(&c);
    if (ruler_task_needs_essays(task)) {
        if (!o->essays || !o->essays_len) { snprintf(err, errlen, "ruler:%s: needs the essay haystack (make haystack)", d->name); return -1; }
        if (split_words(&x)) goto oom;
    }
    if (d->family == R_QA) {
        const ruler_qa_data *q = d->hay == HAY_SQUAD ? o->squad : o->hotpot;
        if (!q) {
            snprintf(err, errlen, "ruler:%s: needs --qa-data DIR with %s", d->name, ruler_qa_file(d->hay == HAY_SQUAD));
            return -1;
        }
        if (n_samples > q->n_qa) {
            snprintf(err, errlen, "ruler:%s: %d samples asked, %s has %d questions", d->name, n_samples, q->path, q->n_qa);
            return -1;
        }
    }
    /* Largest size that fits, on sample 0's stream: grow until it does not fit, bisect. */
    int lo = min_size(d), hi = lo;
    uint64_t seed = wl_split_seed(o->seed, o->split);
    wl_rng r0 = wl_stream(seed, d->name, (uint64_t)length, 0);
    if (try_size(&x, lo, r0, &c, &fits)) goto oom;
    if (!fits) {
        snprintf(err, errlen, "ruler:%s: length %d is too short (the smallest prompt takes %d tokens + %d generated)",
                 d->name, length, c.prompt_tokens, d->max_new);
        goto done;
    }
    int per = c.prompt_tokens > 0 ? c.prompt_tokens : 1;           /* tokens at the minimum size */
    hi = lo + 1;
    for (;;) {
        if (try_size(&x, hi, r0, &c, &fits)) goto oom;
        if (!fits) break;
        lo = hi;
        if (d->family == R_QA) {                          /* every document fits */
            const ruler_qa_data *q = d->hay == HAY_SQUAD ? o->squad : o->hotpot;
            if (hi >= q->n_docs) { lo = q->n_docs; hi = lo + 1; break; }
        }
        int used = c.prompt_tokens - per > 0 ? c.prompt_tokens - per : 1;
        long grow = (long)(hi - min_size(d)) * (length - d->max_new - per) / used;   /* extrapolate */
        grow = grow + grow / 4 + 16;                                  /* overshoot: an upper bound */
        long next = grow > 2L * hi ? grow : 2L * hi;
        hi = next > 1 << 28 ? 1 << 28 : (int)next;
        if (hi <= lo) { snprintf(err, errlen, "ruler:%s: haystack size overflow", d->name); goto done; }
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (try_size(&x, mid, r0, &c, &fits)) goto oom;
        if (fits) lo = mid;
        else hi = mid;
    }
    int qa = d->family == R_QA;        /* qa.py: the bisection's count as is; samples step down by 10 */
    for (int i = 0; i < n_samples; i++) {
        wl_rng r = wl_stream(seed, d->name, (uint64_t)length, (uint64_t)i);
        int h = lo, step = qa ? 10 : lo / 100 > 0 ? lo / 100 : 1;
        x.sample = i;
        for (;;) {
            if (try_size(&x, h, r, &c, &fits)) goto oom;
            if (fits) break;
            if (qa && h > min_size(d) && h - step < min_size(d)) { h = min_size(d); continue; }
            if (h - step < min_size(d)) { snprintf(err, errlen, "ruler:%s: sample %d does not fit length %d", d->name, i, length); goto done; }
            h -= step;
        }
        strbuf id = {0}, tk = {0};
        sb_printf(&id, "%s-L%d-%d", d->name, length, i);
        sb_printf(&tk, "ruler:%s", d->name);
        free(c.id); free(c.task);
        c.id = sb_take(&id);
        c.task = sb_take(&tk);
        if (!c.id || !c.task) goto oom;
        c.length = length;
        c.settings.question_after = o->question_after;
        if (tc_list_push(out, &c)) goto oom;
    }
    rc = 0;
    goto done;
oom:
    snprintf(err, errlen, "ruler:%s: out of memory", d->name);
done:
    tc_case_free(&c);
    free(x.words);
    free(x.word_len);
    return rc;
}
