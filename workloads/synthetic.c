/* The synthetic needle-in-a-haystack workload (see synthetic.h for the model). */
#include "synthetic.h"
#include "../kernels/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Geometry. Logits are q.k/8 at d = 64; the comments give their size there. */
#define S_KEY 8.0      /* sink key norm: sink logit = the query's sink strength */
#define SINK_VAL 0.3   /* per-dim std of sink values: sinks contribute little to outputs */
#define MU_NORM 6.0    /* segment mean coefficient norm: same-topic keys share a large mean */
#define C_SD 1.0       /* per-token coefficient std within a segment */
#define A_POS 2.0      /* positional component of keys */
#define POS_PERIOD 1024.0
#define EPS_K 0.1      /* key noise per dim */
#define EPS_V 0.1      /* value noise per dim */
#define N_KEY 8.0      /* needle key norm: needle logit = A_N * N_KEY / 8 = 16 */
#define SPAN_KEY 4.0   /* the needle sentence's other tokens: half-strength needle keys */
#define SPAN_VAL 0.75  /* their values: random, typical norm */
#define N_VAL 16.0     /* needle value norm: about 2.5x a haystack value */
#define A_N 16.0       /* retrieval query strength along the asked key */
#define A_S2 6.0       /* retrieval queries keep a weak sink component */
#define Q_NOISE 0.5    /* query noise per dim */
#define COS_MULTIKEY 0.6
#define COS_MULTIVALUE 0.8

/* ---------------------------------------------------------------- random streams */

typedef struct {
    uint64_t s;
    int have;
    double spare;
} rng;

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

enum { P_STRUCT = 1, P_DIR, P_KV, P_Q, P_HEAD, P_WO };

/* One independent splitmix64 stream per (seed, purpose, a, b). */
static void rng_init(rng *r, uint64_t seed, uint64_t purpose, uint64_t a, uint64_t b) {
    r->s = mix64(seed + 0x9e3779b97f4a7c15ULL * (purpose + 1)) ^ mix64((a << 32 | (b & 0xffffffffULL)) + purpose);
    r->have = 0;
}

static uint64_t rng_next(rng *r) {
    r->s += 0x9e3779b97f4a7c15ULL;
    return mix64(r->s);
}

static double rng_unif(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

static int rng_int(rng *r, int lo, int hi) {   /* uniform in [lo, hi] */
    return lo + (int)(rng_unif(r) * (hi - lo + 1));
}

static double rng_normal(rng *r) {
    if (r->have) {
        r->have = 0;
        return r->spare;
    }
    double u = rng_unif(r), v = rng_unif(r);
    double rad = sqrt(-2.0 * log(1.0 - u));   /* 1-u in (0,1] */
    r->spare = rad * sin(6.283185307179586 * v);
    r->have = 1;
    return rad * cos(6.283185307179586 * v);
}

/* ---------------------------------------------------------------- names, config */

const char *syn_kind_name(syn_kind k) {
    return k == SYN_MULTIKEY ? "multikey" : k == SYN_MULTIVALUE ? "multivalue" : "single";
}

int syn_kind_parse(const char *s, syn_kind *out) {
    static const struct { const char *name; syn_kind k; } names[] = {
        {"single", SYN_SINGLE},     {"niah", SYN_SINGLE},         {"synthetic-niah", SYN_SINGLE},
        {"multikey", SYN_MULTIKEY}, {"synthetic-multikey", SYN_MULTIKEY},
        {"multivalue", SYN_MULTIVALUE}, {"synthetic-multivalue", SYN_MULTIVALUE},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(s, names[i].name)) {
            *out = names[i].k;
            return 0;
        }
    return -1;
}

void syn_defaults(syn_config *c) {
    memset(c, 0, sizeof *c);
    c->n_layers = 4;
    c->n_heads = 8;
    c->n_kv_heads = 2;
    c->head_dim = 64;
    c->ctx = 4096;
    c->n_decode = 8;
    c->depth = 0.5;
    c->kind = SYN_SINGLE;
    c->n_needles = 4;
    c->seed = 1;
}

static int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

/* The layout sizes for a context length. */
typedef struct {
    int n_sink, q_len, span_len, n_needles, n_phase;
} layout;

static layout layout_of(const syn_config *c) {
    layout L;
    L.n_sink = clampi(c->ctx / 64, 1, 4);
    L.q_len = clampi(c->ctx / 16, 2, 16);
    L.span_len = clampi(c->ctx / 64, 1, 6);
    L.n_needles = c->kind == SYN_SINGLE ? 1 : c->n_needles;
    L.n_phase = c->kind == SYN_MULTIVALUE ? L.n_needles + 1 : 2;
    return L;
}

int syn_check(const syn_config *c, char *err, size_t errlen) {
    if (c->n_layers < 1 || c->n_layers > 1024) {
        snprintf(err, errlen, "synthetic: layers %d is not in 1..1024", c->n_layers);
        return -1;
    }
    if (c->n_kv_heads < 1 || c->n_heads < 1 || c->n_heads % c->n_kv_heads) {
        snprintf(err, errlen, "synthetic: %d query heads cannot share %d kv heads evenly", c->n_heads,
                 c->n_kv_heads);
        return -1;
    }
    if (c->n_heads > 1024 || c->head_dim < 8 || c->head_dim > 1024) {
        snprintf(err, errlen, "synthetic: heads %d / head dim %d out of range (heads <= 1024, dim 8..1024)",
                 c->n_heads, c->head_dim);
        return -1;
    }
    if (!(c->depth >= 0 && c->depth <= 1)) {
        snprintf(err, errlen, "synthetic: depth %g is not in [0,1]", c->depth);
        return -1;
    }
    if (c->kind != SYN_SINGLE && (c->n_needles < 2 || c->n_needles > SYN_MAX_NEEDLES)) {
        snprintf(err, errlen, "synthetic: %s needs 2..%d needles, got %d", syn_kind_name(c->kind),
                 SYN_MAX_NEEDLES, c->n_needles);
        return -1;
    }
    if (c->ctx < 16 || c->ctx > (1 << 24)) {
        snprintf(err, errlen, "synthetic: ctx %d is not in 16..%d", c->ctx, 1 << 24);
        return -1;
    }
    layout L = layout_of(c);
    int hay = c->ctx - L.n_sink - L.q_len;
    int need = L.n_needles * (2 * L.span_len + 2) + L.span_len;
    if (hay < need) {
        snprintf(err, errlen, "synthetic: ctx %d leaves a %d-token haystack, too small for %d needle(s) (needs %d)",
                 c->ctx, hay, L.n_needles, need);
        return -1;
    }
    if (c->n_decode < L.n_phase || c->n_decode > 1 << 20) {
        snprintf(err, errlen, "synthetic: %s needs at least %d decode steps (retrieval phase), got %d",
                 syn_kind_name(c->kind), L.n_phase, c->n_decode);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- structure */

void syn_free(syn_workload *w) {
    if (!w) return;
    free(w->surprisal);
    free(w->sent_end);
    free(w->role);
    free(w->segment);
    free(w->seg_start);
    free(w->retrieval);
    free(w);
}

static int span_free(const syn_workload *w, int start, int placed) {
    for (int i = 0; i < placed; i++)
        if (abs(start - w->span_start[i]) < w->span_len + 1) return 0;
    return 1;
}

/* Needle 0 at the requested depth, the others at random free places. */
static void place_needles(syn_workload *w, rng *r) {
    int lo = w->n_sink, hi = w->q_start - w->span_len;   /* span starts in [lo, hi] */
    w->span_start[0] = lo + (int)lround(w->cfg.depth * (hi - lo));
    for (int i = 1; i < w->n_needles; i++) {
        int s = -1;
        for (int tries = 0; tries < 1000 && s < 0; tries++) {
            int c = rng_int(r, lo, hi);
            if (span_free(w, c, i)) s = c;
        }
        for (int c = lo; c <= hi && s < 0; c++)   /* crowded: first free place (syn_check leaves room) */
            if (span_free(w, c, i)) s = c;
        w->span_start[i] = s;
    }
    for (int i = 0; i < w->n_needles; i++) w->needle_pos[i] = w->span_start[i] + w->span_len / 2;
}

syn_workload *syn_create(const syn_config *c, char *err, size_t errlen) {
    if (syn_check(c, err, errlen)) return NULL;
    syn_workload *w = calloc(1, sizeof *w);
    if (!w) goto oom;
    layout L = layout_of(c);
    w->cfg = *c;
    w->n_total = c->ctx + c->n_decode;
    w->n_sink = L.n_sink;
    w->q_start = c->ctx - L.q_len;
    w->span_len = L.span_len;
    w->n_needles = L.n_needles;
    w->n_phase = L.n_phase;
    w->asked = c->kind == SYN_MULTIVALUE ? -1 : 0;
    int n = w->n_total;
    w->surprisal = calloc((size_t)n, sizeof *w->surprisal);
    w->sent_end = calloc((size_t)n, 1);
    w->role = calloc((size_t)n, 1);
    w->segment = calloc((size_t)n, sizeof *w->segment);
    w->seg_start = calloc((size_t)n + 2, sizeof *w->seg_start);
    w->retrieval = calloc((size_t)c->n_layers * c->n_heads, 1);
    if (!w->surprisal || !w->sent_end || !w->role || !w->segment || !w->seg_start || !w->retrieval) goto oom;

    rng r;
    rng_init(&r, c->seed, P_STRUCT, 0, 0);

    /* Segments: 0 = sinks, then topics of 50..400 tokens (less for tiny contexts), then
     * the question, which decoding continues. */
    int hay_len = w->q_start - w->n_sink;
    int seg_min = clampi(hay_len / 4, 2, 50), seg_max = clampi(hay_len, seg_min, 400);
    int ns = 0;
    w->seg_start[ns++] = 0;
    for (int t = w->n_sink; t < w->q_start;) {
        int len = rng_int(&r, seg_min, seg_max);
        if (w->q_start - (t + len) < seg_min) len = w->q_start - t;   /* no runt at the end */
        w->seg_start[ns++] = t;
        t += len;
    }
    w->seg_start[ns++] = w->q_start;
    w->seg_start[ns] = n;
    w->n_segments = ns;
    for (int s = 0; s < ns; s++)
        for (int t = w->seg_start[s]; t < w->seg_start[s + 1]; t++) w->segment[t] = s;

    /* Roles, surprisal baseline (log-normal) and sentence ends (every 15..30 tokens,
     * and at every segment end). */
    for (int t = 0; t < n; t++) {
        w->role[t] = t < w->n_sink ? SYN_ROLE_SINK
                   : t < w->q_start ? SYN_ROLE_HAY
                   : t < c->ctx ? SYN_ROLE_QUESTION : SYN_ROLE_DECODE;
        w->surprisal[t] = (float)exp(0.2 + 0.6 * rng_normal(&r));
    }
    for (int s = 1; s < ns - 1; s++) {
        int a = w->seg_start[s], b = w->seg_start[s + 1];
        w->surprisal[a] = (float)(6.5 + 0.5 * rng_normal(&r));
        for (int t = a + rng_int(&r, 15, 30) - 1; t < b; t += rng_int(&r, 15, 30)) w->sent_end[t] = 1;
        w->sent_end[b - 1] = 1;
    }
    w->surprisal[w->q_start] = (float)(6.5 + 0.5 * rng_normal(&r));
    w->sent_end[c->ctx - 1] = 1;                              /* the question mark */
    int pre = c->ctx + c->n_decode - w->n_phase - 1;          /* the answer is its own sentence */
    if (pre >= c->ctx) w->sent_end[pre] = 1;

    /* Needles. With oracle hints (an ablation), each span is a sentence of its own,
     * surprising at its start and at the needle; without, the text statistics above
     * know nothing of where the needles are. */
    place_needles(w, &r);
    for (int i = 0; i < w->n_needles; i++) {
        int a = w->span_start[i];
        for (int t = a; t < a + w->span_len; t++) w->role[t] = SYN_ROLE_NEEDLE_SPAN;
        w->role[w->needle_pos[i]] = SYN_ROLE_NEEDLE;
        if (!c->oracle_hints) continue;
        if (a - 1 >= 0) w->sent_end[a - 1] = 1;
        for (int t = a; t < a + w->span_len; t++) w->sent_end[t] = 0;
        w->sent_end[a + w->span_len - 1] = 1;
        w->surprisal[a] = (float)(6.5 + 0.5 * rng_normal(&r));
        w->surprisal[w->needle_pos[i]] = (float)(7.5 + 0.5 * rng_normal(&r));
    }
    w->surprisal[0] = 0;

    /* Retrieval heads: one per kv group in every layer but the first (real models have
     * none in layer 0), rotating within the group from layer to layer. */
    int g = c->n_heads / c->n_kv_heads;
    for (int l = 0; l < c->n_layers; l++) {
        if (l == 0 && c->n_layers > 1) continue;
        for (int j = 0; j < c->n_kv_heads; j++) w->retrieval[l * c->n_heads + j * g + (l + j) % g] = 1;
    }

    /* Distractor sample: haystack tokens evenly spread over the haystack. */
    int n_plain = 0;
    for (int t = w->n_sink; t < w->q_start; t++) n_plain += w->role[t] == SYN_ROLE_HAY;
    w->n_hay = n_plain < SYN_N_HAY ? n_plain : SYN_N_HAY;
    for (int k = 0, seen = 0, t = w->n_sink; t < w->q_start && k < w->n_hay; t++) {
        if (w->role[t] != SYN_ROLE_HAY) continue;
        if (seen == (int)(((long)k * 2 + 1) * n_plain / (2L * w->n_hay))) w->hay[k++] = t;
        seen++;
    }
    return w;
oom:
    snprintf(err, errlen, "synthetic: out of memory for ctx %d", c->ctx);
    syn_free(w);
    return NULL;
}

/* ---------------------------------------------------------------- one layer */

/* Per (layer, kv head) directions, in double. */
typedef struct {
    double *s, *r1, *r2;          /* sink direction, positional plane */
    double *qdir;                 /* the question's query direction */
    double *ucommon;              /* multivalue: the shared key direction */
    double *dir[SYN_MAX_NEEDLES]; /* needle key directions (unit) */
    double *val[SYN_MAX_NEEDLES]; /* needle values (norm N_VAL) */
    double *bk, *bv;              /* [n_segments][SYN_RANK][d] orthonormal topic bases */
    double *mu;                   /* [n_segments][SYN_RANK] segment mean coefficients */
    double *mhat;                 /* [n_segments][d] unit mean key direction of a segment */
    double *mem;
} group_dirs;

typedef struct {
    const syn_workload *w;
    int layer;
    float *Q, *K, *V;
    size_t kv_stride;
    group_dirs *gd;               /* [Hkv] */
} layer_job;

/* v = random unit vector orthogonal to the n unit rows of basis (Gram-Schmidt). */
static void random_unit(rng *r, double *v, int d, double *const *basis, int n) {
    for (;;) {
        for (int i = 0; i < d; i++) v[i] = rng_normal(r);
        for (int pass = 0; pass < 2; pass++)
            for (int b = 0; b < n; b++) {
                double dot = 0;
                for (int i = 0; i < d; i++) dot += v[i] * basis[b][i];
                for (int i = 0; i < d; i++) v[i] -= dot * basis[b][i];
            }
        double nn = 0;
        for (int i = 0; i < d; i++) nn += v[i] * v[i];
        if (nn > 1e-6) {
            nn = 1.0 / sqrt(nn);
            for (int i = 0; i < d; i++) v[i] *= nn;
            return;
        }
    }
}

/* unit(a*x + b*y) into out. */
static void blend_unit(double *out, double a, const double *x, double b, const double *y, int d) {
    double nn = 0;
    for (int i = 0; i < d; i++) {
        out[i] = a * x[i] + b * y[i];
        nn += out[i] * out[i];
    }
    nn = 1.0 / sqrt(nn);
    for (int i = 0; i < d; i++) out[i] *= nn;
}

static void make_dirs(void *ctx, int j) {
    layer_job *job = ctx;
    const syn_workload *w = job->w;
    const int d = w->cfg.head_dim, ns = w->n_segments, nn = w->n_needles;
    group_dirs *g = &job->gd[j];
    double *p = g->mem;
    g->s = p, p += d;
    g->r1 = p, p += d;
    g->r2 = p, p += d;
    g->qdir = p, p += d;
    g->ucommon = p, p += d;
    for (int i = 0; i < nn; i++) g->dir[i] = p, p += d;
    for (int i = 0; i < nn; i++) g->val[i] = p, p += d;
    g->bk = p, p += (size_t)ns * SYN_RANK * d;
    g->bv = p, p += (size_t)ns * SYN_RANK * d;
    g->mu = p, p += (size_t)ns * SYN_RANK;
    g->mhat = p;

    rng r;
    rng_init(&r, w->cfg.seed, P_DIR, (uint64_t)job->layer, (uint64_t)j);
    double *basis[3 + SYN_RANK];
    random_unit(&r, g->s, d, NULL, 0);
    basis[0] = g->s;
    random_unit(&r, g->r1, d, basis, 1);
    basis[1] = g->r1;
    random_unit(&r, g->r2, d, basis, 2);
    basis[2] = g->r2;

    /* Needle keys: orthogonal to the sink direction; needle-shaped ones share ucommon. */
    random_unit(&r, g->ucommon, d, basis, 1);
    double *own = malloc((size_t)d * sizeof *own);
    double *with_common[2] = {g->s, g->ucommon};
    double cosine = w->cfg.kind == SYN_MULTIKEY ? COS_MULTIKEY : COS_MULTIVALUE;
    for (int i = 0; i < nn; i++) {
        if (w->cfg.kind == SYN_SINGLE) {
            memcpy(g->dir[i], g->ucommon, (size_t)d * sizeof *own);
        } else {
            random_unit(&r, own, d, with_common, 2);
            blend_unit(g->dir[i], sqrt(cosine), g->ucommon, sqrt(1 - cosine), own, d);
        }
        random_unit(&r, g->val[i], d, NULL, 0);
        for (int k = 0; k < d; k++) g->val[i][k] *= N_VAL;
    }
    free(own);
    const double *q = w->cfg.kind == SYN_MULTIVALUE ? g->ucommon : g->dir[w->asked];
    memcpy(g->qdir, q, (size_t)d * sizeof *q);

    /* Topic bases: keys orthogonal to the sink and positional directions. */
    for (int s = 1; s < ns; s++) {
        double *bk = g->bk + (size_t)s * SYN_RANK * d, *bv = g->bv + (size_t)s * SYN_RANK * d;
        for (int k = 0; k < SYN_RANK; k++) {
            basis[3 + k] = bk + (size_t)k * d;
            random_unit(&r, basis[3 + k], d, basis, 3 + k);
        }
        double *vb[SYN_RANK];
        for (int k = 0; k < SYN_RANK; k++) {
            vb[k] = bv + (size_t)k * d;
            random_unit(&r, vb[k], d, vb, k);
        }
        double *mu = g->mu + (size_t)s * SYN_RANK, norm = 0;
        for (int k = 0; k < SYN_RANK; k++) {
            mu[k] = rng_normal(&r);
            norm += mu[k] * mu[k];
        }
        norm = MU_NORM / sqrt(norm);
        for (int k = 0; k < SYN_RANK; k++) mu[k] *= norm;
        double *m = g->mhat + (size_t)s * d, mm = 0;
        for (int i = 0; i < d; i++) {
            m[i] = 0;
            for (int k = 0; k < SYN_RANK; k++) m[i] += mu[k] * bk[(size_t)k * d + i];
            mm += m[i] * m[i];
        }
        mm = 1.0 / sqrt(mm);
        for (int i = 0; i < d; i++) m[i] *= mm;
    }
}

static int needle_of(const syn_workload *w, int t) {
    for (int i = 0; i < w->n_needles; i++)
        if (t >= w->span_start[i] && t < w->span_start[i] + w->span_len) return i;
    return -1;
}

static void fill_kv(const layer_job *job, int j) {
    const syn_workload *w = job->w;
    const int d = w->cfg.head_dim;
    const group_dirs *g = &job->gd[j];
    rng r;
    rng_init(&r, w->cfg.seed, P_KV, (uint64_t)job->layer, (uint64_t)j);
    const double omega = 6.283185307179586 / POS_PERIOD;
    for (int t = 0; t < w->n_total; t++) {
        float *k = job->K + (size_t)j * job->kv_stride + (size_t)t * d;
        float *v = job->V + (size_t)j * job->kv_stride + (size_t)t * d;
        double ct = cos(omega * t), st = sin(omega * t);
        int role = w->role[t];
        if (role == SYN_ROLE_SINK) {
            for (int i = 0; i < d; i++) {
                k[i] = (float)(S_KEY * g->s[i] + EPS_K * rng_normal(&r));
                v[i] = (float)(SINK_VAL * rng_normal(&r));
            }
        } else if (role == SYN_ROLE_NEEDLE) {
            int ni = needle_of(w, t);
            for (int i = 0; i < d; i++) {
                k[i] = (float)(N_KEY * g->dir[ni][i] + EPS_K * rng_normal(&r));
                v[i] = (float)(g->val[ni][i] + EPS_V * rng_normal(&r));
            }
        } else if (role == SYN_ROLE_NEEDLE_SPAN) {
            int ni = needle_of(w, t);
            for (int i = 0; i < d; i++) {
                k[i] = (float)(SPAN_KEY * g->dir[ni][i] + A_POS * (ct * g->r1[i] + st * g->r2[i]) +
                               EPS_K * rng_normal(&r));
                v[i] = (float)(SPAN_VAL * rng_normal(&r));
            }
        } else {
            int s = w->segment[t];
            const double *mu = g->mu + (size_t)s * SYN_RANK;
            const double *bk = g->bk + (size_t)s * SYN_RANK * d, *bv = g->bv + (size_t)s * SYN_RANK * d;
            double c[SYN_RANK];
            for (int q = 0; q < SYN_RANK; q++) c[q] = mu[q] + C_SD * rng_normal(&r);
            for (int i = 0; i < d; i++) {
                double kk = A_POS * (ct * g->r1[i] + st * g->r2[i]), vv = 0;
                for (int q = 0; q < SYN_RANK; q++) {
                    kk += c[q] * bk[(size_t)q * d + i];
                    vv += c[q] * bv[(size_t)q * d + i];
                }
                k[i] = (float)(kk + EPS_K * rng_normal(&r));
                v[i] = (float)(vv + EPS_V * rng_normal(&r));
            }
        }
    }
}

/* The query direction of a retrieval head at token t, or NULL when it acts locally. */
static const double *retrieval_dir(const syn_workload *w, const group_dirs *g, int t) {
    if (w->role[t] == SYN_ROLE_QUESTION) return g->qdir;
    if (w->role[t] != SYN_ROLE_DECODE) return NULL;
    int k = t - (w->n_total - w->n_phase);   /* step within the retrieval phase */
    if (k < 0) return NULL;
    if (w->cfg.kind != SYN_MULTIVALUE) return g->qdir;
    return k == 0 ? g->ucommon : g->dir[k - 1];
}

static void fill_q(const layer_job *job, int h) {
    const syn_workload *w = job->w;
    const int d = w->cfg.head_dim, H = w->cfg.n_heads, gsz = H / w->cfg.n_kv_heads;
    const group_dirs *g = &job->gd[h / gsz];
    const int retr = w->retrieval[job->layer * H + h];
    rng r;
    rng_init(&r, w->cfg.seed, P_HEAD, (uint64_t)job->layer, (uint64_t)h);
    /* Per-head strengths: sink 12..14 (sink logit), topic 8..12, position 4..10. */
    double a_s = 12 + 2 * rng_unif(&r), a_loc = 8 + 4 * rng_unif(&r), a_p = 4 + 6 * rng_unif(&r);
    rng_init(&r, w->cfg.seed, P_Q, (uint64_t)job->layer, (uint64_t)h);
    const double omega = 6.283185307179586 / POS_PERIOD;
    for (int t = 0; t < w->n_total; t++) {
        float *q = job->Q + ((size_t)t * H + h) * d;
        const double *rd = retr ? retrieval_dir(w, g, t) : NULL;
        if (rd) {
            for (int i = 0; i < d; i++) q[i] = (float)(A_N * rd[i] + A_S2 * g->s[i] + Q_NOISE * rng_normal(&r));
        } else if (w->role[t] == SYN_ROLE_SINK) {
            for (int i = 0; i < d; i++) q[i] = (float)(a_s * g->s[i] + Q_NOISE * rng_normal(&r));
        } else {
            const double *m = g->mhat + (size_t)w->segment[t] * d;
            double ct = cos(omega * t), st = sin(omega * t);
            for (int i = 0; i < d; i++)
                q[i] = (float)(a_s * g->s[i] + a_loc * m[i] + a_p * (ct * g->r1[i] + st * g->r2[i]) +
                               Q_NOISE * rng_normal(&r));
        }
    }
}

/* Tasks 0..Hkv-1 fill K/V of a kv head, the next H fill Q of a query head. */
static void fill_task(void *ctx, int i) {
    layer_job *job = ctx;
    if (i < job->w->cfg.n_kv_heads) fill_kv(job, i);
    else fill_q(job, i - job->w->cfg.n_kv_heads);
}

void syn_layer(const syn_workload *w, int layer, float *Q, float *K, float *V, size_t kv_stride) {
    const int d = w->cfg.head_dim, Hkv = w->cfg.n_kv_heads, ns = w->n_segments;
    size_t per = (size_t)d * (5 + 2 * w->n_needles) + (size_t)ns * (2 * SYN_RANK * d + SYN_RANK + d);
    group_dirs gd[Hkv];
    memset(gd, 0, sizeof gd);
    for (int j = 0; j < Hkv; j++) {
        gd[j].mem = calloc(per, sizeof(double));
        if (!gd[j].mem) {
            fprintf(stderr, "kvbench: out of memory generating synthetic layer %d\n", layer);
            exit(1);
        }
    }
    layer_job job = {.w = w, .layer = layer, .Q = Q, .K = K, .V = V, .kv_stride = kv_stride, .gd = gd};
    kb_parallel_for(Hkv, make_dirs, &job);
    kb_parallel_for(Hkv + w->cfg.n_heads, fill_task, &job);
    for (int j = 0; j < Hkv; j++) free(gd[j].mem);
}

/* ---------------------------------------------------------------- scoring */

int syn_scored_needle(const syn_workload *w, int step) {
    int k = step - (w->cfg.n_decode - w->n_phase);
    if (k < 0 || step >= w->cfg.n_decode) return -1;
    if (w->cfg.kind == SYN_MULTIVALUE) return k >= 1 ? k - 1 : -1;
    return k == w->n_phase - 1 ? w->asked : -1;
}

static double dist2(const float *a, const float *b, int d) {
    double s = 0;
    for (int i = 0; i < d; i++) {
        double e = (double)a[i] - b[i];
        s += e * e;
    }
    return s;
}

int syn_nearest(const float *o, const float *target, const float *distract, int n, int d) {
    double dt = dist2(o, target, d);
    if (!(dt == dt)) return 0;
    for (int i = 0; i < n; i++)
        if (!(dt < dist2(o, distract + (size_t)i * d, d))) return 0;
    return 1;
}

double syn_score(const syn_workload *w, const float *const *V, size_t kv_stride, const float *out,
                 int *hits, int *probes) {
    const int d = w->cfg.head_dim, H = w->cfg.n_heads, g = H / w->cfg.n_kv_heads, T = w->cfg.n_decode;
    float *distract = malloc((size_t)(w->n_needles + w->n_hay) * d * sizeof *distract);
    int nh = 0, np = 0;
    for (int l = 0; l < w->cfg.n_layers; l++)
        for (int h = 0; h < H; h++) {
            if (!w->retrieval[l * H + h]) continue;
            const float *Vj = V[l] + (size_t)(h / g) * kv_stride;
            for (int s = 0; s < T; s++) {
                int ni = syn_scored_needle(w, s);
                if (ni < 0) continue;
                int n = 0;
                for (int i = 0; i < w->n_needles; i++)
                    if (i != ni) memcpy(distract + (size_t)n++ * d, Vj + (size_t)w->needle_pos[i] * d, (size_t)d * 4);
                for (int k = 0; k < w->n_hay; k++)
                    memcpy(distract + (size_t)n++ * d, Vj + (size_t)w->hay[k] * d, (size_t)d * 4);
                const float *o = out + (((size_t)l * T + s) * H + h) * d;
                nh += syn_nearest(o, Vj + (size_t)w->needle_pos[ni] * d, distract, n, d);
                np++;
            }
        }
    free(distract);
    if (hits) *hits = nh;
    if (probes) *probes = np;
    return np ? (double)nh / np : 0.0;
}

double syn_layer_errors(const syn_workload *w, const float *out, const float *ref, double *err) {
    const size_t per = (size_t)w->cfg.n_decode * w->cfg.n_heads * w->cfg.head_dim;
    double mean = 0;
    for (int l = 0; l < w->cfg.n_layers; l++) {
        const float *o = out + (size_t)l * per, *r = ref + (size_t)l * per;
        double num = 0, den = 0;
        for (size_t i = 0; i < per; i++) {
            double e = (double)o[i] - r[i];
            num += e * e;
            den += (double)r[i] * r[i];
        }
        double e = den > 0 ? sqrt(num / den) : sqrt(num);
        if (!(e == e)) e = INFINITY;
        if (err) err[l] = e;
        mean += e;
    }
    return mean / w->cfg.n_layers;
}

/* An output projection for the methods that ask for one (kv_needs.wo): entries
 * N(0, 1/cols), its own stream per layer, so nothing else the workload draws changes. */
void syn_wo(const syn_workload *w, int layer, float *Wo, int rows, int cols) {
    rng r;
    rng_init(&r, w->cfg.seed, P_WO, (uint64_t)layer, 0);
    double sd = 1.0 / sqrt((double)cols);
    for (size_t i = 0; i < (size_t)rows * cols; i++) Wo[i] = (float)(rng_normal(&r) * sd);
}
