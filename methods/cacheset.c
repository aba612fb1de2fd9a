#include "cacheset.h"
#include "../kernels/core.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void out_of_memory(const char *what) {
    fprintf(stderr, "kvbench: out of memory (%s)\n", what);
    exit(1);
}

int cs_init(kv_cacheset *c, const kv_setup *s, int scored, int cap, const char *name,
            char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (s->n_layers < 1 || s->n_heads < 1 || s->n_kv_heads < 1 || s->head_dim < 1 ||
        s->n_heads % s->n_kv_heads) {
        snprintf(err, errlen, "%s: bad shape (layers %d, heads %d, kv heads %d, head dim %d)",
                 name, s->n_layers, s->n_heads, s->n_kv_heads, s->head_dim);
        return -1;
    }
    if (s->n_prompt < 1 || s->max_decode < 0) {
        snprintf(err, errlen, "%s: bad lengths (n_prompt %d, max_decode %d)", name, s->n_prompt,
                 s->max_decode);
        return -1;
    }
    if (kv_check_type(s, name, err, errlen)) return -1;
    if (s->budget_tokens < 0 || (s->budget_tokens == 0 && !(s->budget_frac > 0 && s->budget_frac <= 1))) {
        if (s->budget_tokens < 0)
            snprintf(err, errlen, "%s: budget %d tokens must be >= 1", name, s->budget_tokens);
        else
            snprintf(err, errlen, "%s: budget fraction %g is not in (0,1]", name, s->budget_frac);
        return -1;
    }
    c->L = s->n_layers; c->H = s->n_heads; c->Hkv = s->n_kv_heads; c->d = s->head_dim;
    c->g = c->H / c->Hkv; c->kv_type = s->kv_type; c->n_prompt = s->n_prompt;
    c->budget = kv_budget(s);
    c->scored = scored;
    c->hold = s->decode_rule == KV_DECODE_HOLD;
    c->slot = calloc((size_t)c->L * c->Hkv, sizeof *c->slot);
    if (!c->slot) goto oom;
    for (int i = 0; i < c->L * c->Hkv; i++) {
        if (kvs_init(&c->slot[i].kv, c->d, cap, c->kv_type)) goto oom;
        if (scored) {
            c->slot[i].score = malloc((size_t)cap * sizeof(double));
            if (!c->slot[i].score) goto oom;
            c->slot[i].score_cap = cap;
        }
    }
    c->probs_cap = cap;
    c->probs = malloc((size_t)c->g * cap * sizeof(float));
    if (!c->probs) goto oom;
    return 0;
oom:
    cs_free(c);
    snprintf(err, errlen, "%s: out of memory for %d rows per kv head", name, cap);
    return -1;
}

void cs_free(kv_cacheset *c) {
    if (c->slot)
        for (int i = 0; i < c->L * c->Hkv; i++) {
            kvs_free(&c->slot[i].kv);
            free(c->slot[i].score);
        }
    free(c->slot);
    free(c->probs);
    memset(c, 0, sizeof *c);
}

kv_slot *cs_slot(kv_cacheset *c, int layer, int kv_head) {
    return &c->slot[(size_t)layer * c->Hkv + kv_head];
}
const kv_slot *cs_slot_c(const kv_cacheset *c, int layer, int kv_head) {
    return &c->slot[(size_t)layer * c->Hkv + kv_head];
}

static size_t row_bytes(const kv_cacheset *c) {
    return (size_t)2 * c->d * kb_kvtype_bytes(c->kv_type) + (c->scored ? sizeof(float) : 0);
}

static void track(kv_cacheset *c, size_t extra) {
    size_t b = (size_t)c->rows * row_bytes(c) + extra;
    if (b > c->peak) c->peak = b;
}

int cs_begin_layer(kv_cacheset *c, const kv_prefill *p, const char *name, char *err,
                   size_t errlen) {
    if (p->layer < 0 || p->layer >= c->L || p->n != c->n_prompt || !p->K || !p->V) {
        snprintf(err, errlen, "%s: bad prefill (layer %d of %d, n %d, expected n_prompt %d)",
                 name, p->layer, c->L, p->n, c->n_prompt);
        return -1;
    }
    for (int j = 0; j < c->Hkv; j++)
        if (cs_slot(c, p->layer, j)->kv.n) {
            snprintf(err, errlen, "%s: layer %d ingested twice", name, p->layer);
            return -1;
        }
    track(c, (size_t)p->n * c->Hkv * row_bytes(c));
    return 0;
}

static int grow_score(kv_slot *s) {
    if (!s->score || s->score_cap >= s->kv.cap) return 0;
    double *sc = realloc(s->score, (size_t)s->kv.cap * sizeof *sc);
    if (!sc) return -1;
    s->score = sc;
    s->score_cap = s->kv.cap;
    return 0;
}

static int push_row(kv_cacheset *c, kv_slot *s, const float *k, const float *v, int pos,
                    double score) {
    if (kvs_push(&s->kv, k, v, pos) || grow_score(s)) return -1;
    if (s->score) s->score[s->kv.n - 1] = score;
    c->rows++;
    track(c, 0);
    return 0;
}

int cs_load(kv_cacheset *c, const kv_prefill *p, int j, const int32_t *keep, int nk,
            const double *score) {
    if (nk < 0 || nk > p->n || j < 0 || j >= c->Hkv || p->layer < 0 || p->layer >= c->L) return -2;
    for (int i = 0; i < nk; i++)   /* rows of this prompt, each once: checked before any is read */
        if (keep[i] < 0 || keep[i] >= p->n || (i && keep[i] <= keep[i - 1])) return -2;
    kv_slot *s = cs_slot(c, p->layer, j);
    const float *K = p->K + (size_t)j * p->kv_stride, *V = p->V + (size_t)j * p->kv_stride;
    for (int i = 0; i < nk; i++) {
        int t = keep[i];
        if (push_row(c, s, K + (size_t)t * c->d, V + (size_t)t * c->d, t, score ? score[t] : 0))
            return -1;
    }
    s->events += p->n - nk;
    return 0;
}

void cs_push(kv_cacheset *c, kv_slot *s, const float *k, const float *v, int pos, double score) {
    if (push_row(c, s, k, v, pos, score)) out_of_memory("appending a decoded token");
}

void cs_append_decoded(kv_cacheset *c, int layer, const float *k, const float *v, int pos, int cap) {
    for (int j = 0; j < c->Hkv; j++) {
        kv_slot *s = cs_slot(c, layer, j);
        cs_push(c, s, k + (size_t)j * c->d, v + (size_t)j * c->d, pos, INFINITY);
        if (c->hold && s->kv.n > cap) cs_remove(c, s, cs_argmin(s, s->kv.n));
    }
}

void cs_remove(kv_cacheset *c, kv_slot *s, int i) {
    if (s->score)
        memmove(s->score + i, s->score + i + 1, (size_t)(s->kv.n - i - 1) * sizeof *s->score);
    kvs_remove(&s->kv, i);
    c->rows--;
    s->events++;
}

int cs_argmin(const kv_slot *s, int end) {
    int best = 0;
    if (!s->score) return 0;   /* no scores (cs_init scored=0): all tie, the oldest row goes */
    for (int i = 1; i < end; i++)
        if (s->score[i] < s->score[best]) best = i;
    return best;
}

const float *cs_attend_group(kv_cacheset *c, int layer, int j, const float *q, float *out,
                             int want_probs) {
    kv_slot *s = cs_slot(c, layer, j);
    if (want_probs && s->kv.n > c->probs_cap) {
        int cap = s->kv.n * 2;
        float *p = realloc(c->probs, (size_t)c->g * cap * sizeof *p);
        if (!p) out_of_memory("attention probabilities");
        c->probs = p;
        c->probs_cap = cap;
    }
    kb_decode_args a = {
        .g = c->g, .d = c->d, .n = s->kv.n, .q = q, .bias = NULL, .out = out,
        .probs = want_probs ? c->probs : NULL,
    };
    kvs_decode(&s->kv, &a);   /* on the store's device copy with the CUDA backend */
    return want_probs ? c->probs : NULL;
}

void cs_attend(kv_cacheset *c, int layer, const float *q, float *out) {
    size_t gd = (size_t)c->g * c->d;
    kv_store *st[c->Hkv];
    kb_decode_args a[c->Hkv];
    for (int j = 0; j < c->Hkv; j++) {
        st[j] = &cs_slot(c, layer, j)->kv;
        a[j] = (kb_decode_args){.g = c->g, .d = c->d, .n = st[j]->n, .q = q + j * gd, .out = out + j * gd};
    }
    kvs_decode_many(st, a, c->Hkv);   /* the layer's kv heads share the threads */
}

void cs_memory(const kv_cacheset *c, kv_mem *out) {
    memset(out, 0, sizeof *out);
    size_t kv = 0;
    for (int i = 0; i < c->L * c->Hkv; i++) kv += kvs_bytes(&c->slot[i].kv);
    out->fast_aux_bytes = c->scored ? (size_t)c->rows * sizeof(float) : 0;
    out->fast_bytes = kv + out->fast_aux_bytes;
    out->fast_peak = c->peak > out->fast_bytes ? c->peak : out->fast_bytes;
    out->fast_tokens = c->rows;
}

void cs_head_stats(const kv_cacheset *c, int layer, int head, kv_headstat *out) {
    const kv_slot *s = cs_slot_c(c, layer, head / c->g);
    out->kept = s->kv.n;
    out->events = (double)s->events;
}

int cs_rows(const kv_cacheset *c, int layer, int kv_head, int32_t *pos, int cap, int *npos) {
    const kv_slot *s = cs_slot_c(c, layer, kv_head);
    if (pos) {
        int n = s->kv.n < cap ? s->kv.n : cap;
        memcpy(pos, s->kv.pos, (size_t)n * sizeof *pos);
        *npos = n;
    }
    return s->kv.n;
}

const kv_store *kv_a_store(const kv_state *st, int layer, int kv_head) {
    return &cs_slot_c((const kv_cacheset *)st, layer, kv_head)->kv;
}

/* The door members: a state that begins with its cache set is one (see cacheset.h). */
#define CS(st) ((kv_cacheset *)(st))
#define CS_C(st) ((const kv_cacheset *)(st))

void cs_door_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t) {
    cs_append_decoded(CS(st), layer, k, v, t->pos, CS(st)->budget);
}
void cs_door_attend(kv_state *st, int layer, const float *q, float *out) { cs_attend(CS(st), layer, q, out); }
void cs_door_memory(const kv_state *st, kv_mem *out) { cs_memory(CS_C(st), out); }
void cs_door_head_stats(const kv_state *st, int layer, int head, kv_headstat *out) {
    cs_head_stats(CS_C(st), layer, head, out);
}
int cs_door_rows(const kv_state *st, int layer, int kv_head, int32_t *pos, int cap, int *npos) {
    return cs_rows(CS_C(st), layer, kv_head, pos, cap, npos);
}
void cs_door_free(kv_state *st) {
    if (!st) return;
    cs_free(CS(st));
    free(st);
}
