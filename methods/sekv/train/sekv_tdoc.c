/* SeKV training data: one document's fixed inputs (sekv_tdoc), its cache file, the
 * coverage target and the mining helpers (see sekv_train.h). */
#include "sekv_train.h"
#include "../../../kernels/host.h"
#include <stdint.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- coverage, mining */

/* idx = 0..n-1 sorted by descending mass, ties in index order (a stable merge sort;
 * qsort has no context argument and is not stable). */
static void sort_desc(const double *mass, int *idx, int n) {
    for (int i = 0; i < n; i++) idx[i] = i;
    int *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
    if (!tmp) {   /* fall back to insertion sort */
        for (int i = 1; i < n; i++) {
            int k = idx[i], j = i - 1;
            while (j >= 0 && mass[idx[j]] < mass[k]) idx[j + 1] = idx[j], j--;
            idx[j + 1] = k;
        }
        return;
    }
    for (int w = 1; w < n; w *= 2)
        for (int lo = 0; lo < n - w; lo += 2 * w) {
            int mid = lo + w, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, o = lo;
            while (a < mid && b < hi) tmp[o++] = mass[idx[b]] > mass[idx[a]] ? idx[b++] : idx[a++];
            while (a < mid) tmp[o++] = idx[a++];
            while (b < hi) tmp[o++] = idx[b++];
            memcpy(idx + lo, tmp + lo, (size_t)(hi - lo) * sizeof *idx);
        }
    free(tmp);
}

void sekv_coverage(const double *mass, int n, double rho, uint8_t *y) {
    memset(y, 0, (size_t)(n > 0 ? n : 0));
    double tot = 0;
    for (int i = 0; i < n; i++) tot += mass[i];
    if (n <= 0 || !(tot > 0)) return;
    int *idx = malloc((size_t)n * sizeof *idx);
    if (!idx) return;
    sort_desc(mass, idx, n);
    double c = 0;   /* rho reached up to a relative 1e-12 (rounding of the sums) */
    for (int k = 0; k < n; k++) {
        y[idx[k]] = 1;
        c += mass[idx[k]];
        if (c >= rho * tot * (1 - 1e-12)) break;
    }
    free(idx);
}

int sekv_candidates(int n, int count, int32_t *out) {
    if (n < 2 || count < 1) return 0;
    int m = 0;
    for (int i = 0; i < count; i++) {
        double x = count == 1 ? 1.0 : 1.0 + (double)(n - 2) * i / (count - 1);
        int32_t v = (int32_t)nearbyint(x);
        if (m == 0 || v != out[m - 1]) out[m++] = v;
    }
    return m;
}

int sekv_mine(const int32_t *cand, const double *score, int nc, int keep, int32_t *out) {
    if (nc <= 0 || keep <= 0) return 0;
    int *idx = malloc((size_t)nc * sizeof *idx);
    if (!idx) return 0;
    sort_desc(score, idx, nc);   /* candidates are ascending: ties keep the earlier one */
    int k = keep < nc ? keep : nc;
    for (int i = 0; i < k; i++) out[i] = cand[idx[i]];
    free(idx);
    for (int i = 1; i < k; i++) {   /* ascending positions */
        int32_t v = out[i];
        int j = i - 1;
        while (j >= 0 && out[j] > v) out[j + 1] = out[j], j--;
        out[j + 1] = v;
    }
    return k;
}

/* ---------------------------------------------------------------- building */

void sekv_tdoc_free(sekv_tdoc *d) {
    if (!d) return;
    void *p[] = {d->span, d->rank, d->u_off, d->kbar, d->sK, d->sV, d->U, d->pos, d->nvis,
                 d->q, d->lo_off, d->logit, d->g_off, d->gq, d->c_off, d->cq, d->y};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) free(p[i]);
    memset(d, 0, sizeof *d);
}

size_t sekv_tdoc_elems(const sekv_tdoc *d) { return d->c_off ? d->c_off[d->n_pos] : 0; }

/* Array sizes, in cache-file order (elements, element bytes). */
typedef struct { void **ptr; size_t n, sz; } tarr;
static int tdoc_arrays(sekv_tdoc *d, tarr a[17]) {
    size_t L = d->L, H = d->H, J = d->Hkv, D = d->d, R = d->R, ns = d->n_spans, P = d->n_pos;
    size_t ublock = d->u_off ? d->u_off[ns] : 0;
    tarr t[17] = {
        {(void **)&d->span, ns, sizeof *d->span},      {(void **)&d->rank, ns, sizeof *d->rank},
        {(void **)&d->u_off, ns + 1, sizeof *d->u_off}, {(void **)&d->kbar, L * J * ns * D, 4},
        {(void **)&d->sK, L * J * ns * R, 4},           {(void **)&d->sV, L * J * ns * R, 4},
        {(void **)&d->U, L * J * ublock, 4},            {(void **)&d->pos, P, 4},
        {(void **)&d->nvis, P, 4},                      {(void **)&d->q, P * L * H * D, 4},
        {(void **)&d->lo_off, P + 1, sizeof(size_t)},   {(void **)&d->logit, d->lo_off ? d->lo_off[P] : 0, 4},
        {(void **)&d->g_off, P + 1, sizeof(size_t)},    {(void **)&d->gq, d->g_off ? d->g_off[P] : 0, 4},
        {(void **)&d->c_off, P + 1, sizeof(size_t)},    {(void **)&d->cq, d->c_off ? d->c_off[P] : 0, 4},
        {(void **)&d->y, d->c_off ? d->c_off[P] : 0, 1},
    };
    memcpy(a, t, sizeof t);
    (void)H;
    return 17;
}

size_t sekv_tdoc_bytes(const sekv_tdoc *d) {
    tarr a[17];
    size_t b = 0;
    for (int i = 0, n = tdoc_arrays((sekv_tdoc *)d, a); i < n; i++) b += a[i].n * a[i].sz;
    return b;
}

static int fail(char *err, size_t errlen, const char *msg) {
    snprintf(err, errlen, "sekv training data: %s", msg);
    return -1;
}

/* Offsets that depend only on shapes, spans and positions. */
static int layout(sekv_tdoc *d) {
    int ns = d->n_spans, P = d->n_pos;
    size_t LH = (size_t)d->L * d->H;
    d->u_off = malloc((size_t)(ns + 1) * sizeof *d->u_off);
    d->lo_off = malloc((size_t)(P + 1) * sizeof *d->lo_off);
    d->g_off = malloc((size_t)(P + 1) * sizeof *d->g_off);
    d->c_off = malloc((size_t)(P + 1) * sizeof *d->c_off);
    d->nvis = malloc((size_t)(P > 0 ? P : 1) * sizeof *d->nvis);
    if (!d->u_off || !d->lo_off || !d->g_off || !d->c_off || !d->nvis) return -1;
    d->u_off[0] = 0;
    for (int s = 0; s < ns; s++) d->u_off[s + 1] = d->u_off[s] + (size_t)d->span[s].len * d->rank[s];
    d->lo_off[0] = d->g_off[0] = d->c_off[0] = 0;
    for (int p = 0; p < P; p++) {
        int t = d->pos[p], nv = 0;
        size_t G = 0;
        while (nv < ns && d->span[nv].start + d->span[nv].len <= t - d->local) G += d->rank[nv++];
        d->nvis[p] = nv;
        d->lo_off[p + 1] = d->lo_off[p] + LH * (size_t)(t + 1);
        d->g_off[p + 1] = d->g_off[p] + LH * G;
        d->c_off[p + 1] = d->c_off[p] + LH * (size_t)nv;
    }
    return 0;
}

static double dotf(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

int sekv_tdoc_build(sekv_tdoc *d, const float *K, const float *V, const float *surprisal,
                    int n, int L, int Hkv, int D, int H, const sekv_seg *seg, int R, int local,
                    const int32_t *pos, int P, const float *Q, double rho, char *err,
                    size_t errlen) {
    memset(d, 0, sizeof *d);
    if (n < 1 || L < 1 || Hkv < 1 || D < 1 || H < 1 || H % Hkv || R < 1 || R > SEKV_RMAX ||
        local < 0 || P < 0 || seg->n != n)
        return fail(err, errlen, "bad shapes");
    for (int p = 0; p < P; p++)
        if (pos[p] < 0 || pos[p] >= n || (p && pos[p] <= pos[p - 1]))
            return fail(err, errlen, "positions must be ascending and inside the document");
    *d = (sekv_tdoc){.L = L, .H = H, .Hkv = Hkv, .d = D, .R = R, .n = n, .local = local,
                     .n_spans = seg->n_spans, .n_pos = P};
    int ns = seg->n_spans, g = H / Hkv;
    d->span = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *d->span);
    d->rank = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *d->rank);
    d->pos = malloc((size_t)(P > 0 ? P : 1) * sizeof *d->pos);
    if (!d->span || !d->rank || !d->pos) goto oom;
    for (int s = 0; s < ns; s++) {
        d->span[s] = seg->span[s];
        d->rank[s] = sekv_factor_rank(seg->span[s].len, D, R);
    }
    memcpy(d->pos, pos, (size_t)P * sizeof *pos);
    if (layout(d)) goto oom;
    size_t LJ = (size_t)L * Hkv, ub = d->u_off[ns];
    d->kbar = calloc(LJ * ns * D + 1, 4);
    d->sK = calloc(LJ * ns * R + 1, 4);
    d->sV = calloc(LJ * ns * R + 1, 4);
    d->U = calloc(LJ * ub + 1, 4);
    d->q = malloc(((size_t)P * L * H * D + 1) * 4);
    d->logit = malloc((d->lo_off[P] + 1) * 4);
    d->gq = malloc((d->g_off[P] + 1) * 4);
    d->cq = malloc((d->c_off[P] + 1) * 4);
    d->y = malloc(d->c_off[P] + 1);
    int maxlen = 1;
    for (int s = 0; s < ns; s++) maxlen = seg->span[s].len > maxlen ? seg->span[s].len : maxlen;
    float *fbuf = malloc(sekv_factor_floats(maxlen, D, R) * 4);
    float *vt = malloc((size_t)(ns > 0 ? ns : 1) * R * D * 4);   /* Vt of K_S, one (l, j) */
    float *vbar = malloc((size_t)D * 4);
    double *mass = malloc(((size_t)ns + 1) * sizeof *mass), *a = malloc(((size_t)n + 1) * sizeof *a);
    if (!d->kbar || !d->sK || !d->sV || !d->U || !d->q || !d->logit || !d->gq || !d->cq || !d->y ||
        !fbuf || !vt || !vbar || !mass || !a) {
        free(fbuf), free(vt), free(vbar), free(mass), free(a);
        goto oom;
    }
    memcpy(d->q, Q, (size_t)P * L * H * D * 4);
    double isd = 1.0 / sqrt((double)D);
    int rc = 0;
    for (int l = 0; l < L && !rc; l++)
        for (int j = 0; j < Hkv && !rc; j++) {
            size_t lj = (size_t)l * Hkv + j;
            const float *Kl = K + lj * n * D, *Vl = V + lj * n * D;
            /* Span summaries and factors; Vt of K_S kept for this (l, j) only. */
            for (int s = 0; s < ns && !rc; s++) {
                int st = seg->span[s].start, len = seg->span[s].len, r = d->rank[s];
                sekv_coarse(Kl + (size_t)st * D, Vl + (size_t)st * D, surprisal ? surprisal + st : NULL,
                            len, D, d->kbar + (lj * ns + s) * D, vbar, NULL);
                sekv_factor f;
                if (sekv_factorize(Kl + (size_t)st * D, len, D, R, fbuf, &f)) {
                    rc = fail(err, errlen, "SVD of a span's keys failed");
                    break;
                }
                memcpy(d->U + lj * ub + d->u_off[s], f.U, (size_t)len * r * 4);
                memcpy(d->sK + (lj * ns + s) * R, f.s, (size_t)r * 4);
                memcpy(vt + (size_t)s * R * D, f.Vt, (size_t)r * D * 4);
                if (sekv_factorize(Vl + (size_t)st * D, len, D, R, fbuf, &f)) {
                    rc = fail(err, errlen, "SVD of a span's values failed");
                    break;
                }
                memcpy(d->sV + (lj * ns + s) * R, f.s, (size_t)r * 4);
            }
            /* Query-dependent products for the heads of this group. */
            for (int p = 0; p < P && !rc; p++) {
                int t = pos[p], nv = d->nvis[p];
                for (int h = j * g; h < (j + 1) * g; h++) {
                    size_t row = (size_t)l * H + h;
                    const float *q = Q + (((size_t)p * L + l) * H + h) * D;
                    float *lo = d->logit + d->lo_off[p] + row * (t + 1);
                    float *gq = d->gq + d->g_off[p] + row * ((d->g_off[p + 1] - d->g_off[p]) / ((size_t)L * H));
                    float *cq = d->cq + d->c_off[p] + row * nv;
                    uint8_t *y = d->y + d->c_off[p] + row * nv;
                    double mx = -INFINITY, z = 0;
                    for (int i = 0; i <= t; i++) {
                        lo[i] = (float)(dotf(q, Kl + (size_t)i * D, D) * isd);
                        mx = lo[i] > mx ? lo[i] : mx;
                    }
                    for (int i = 0; i <= t; i++) z += a[i] = exp(lo[i] - mx);
                    for (int s = 0, o = 0; s < nv; s++) {
                        cq[s] = (float)(dotf(q, d->kbar + (lj * ns + s) * D, D) * isd);
                        for (int c = 0; c < d->rank[s]; c++)
                            gq[o++] = (float)(dotf(q, vt + ((size_t)s * R + c) * D, D) * isd);
                        mass[s] = 0;
                        for (int i = 0; i < d->span[s].len; i++) mass[s] += a[d->span[s].start + i] / z;
                    }
                    sekv_coverage(mass, nv, rho, y);
                }
            }
        }
    free(fbuf), free(vt), free(vbar), free(mass), free(a);
    if (rc) sekv_tdoc_free(d);
    return rc;
oom:
    sekv_tdoc_free(d);
    return fail(err, errlen, "out of memory");
}

/* A loaded file's spans, ranks, positions and offsets must be what layout() gives. */
static int layout_ok(const sekv_tdoc *d) {
    int ns = d->n_spans, P = d->n_pos;
    for (int s = 0; s < ns; s++) {
        sekv_span sp = d->span[s];
        if (sp.len < 1 || sp.start < 0 || sp.start + sp.len > d->n ||
            (s && sp.start < d->span[s - 1].start + d->span[s - 1].len) ||
            d->rank[s] != sekv_factor_rank(sp.len, d->d, d->R))
            return 0;
    }
    for (int p = 0; p < P; p++)
        if (d->pos[p] < 0 || d->pos[p] >= d->n || (p && d->pos[p] <= d->pos[p - 1])) return 0;
    sekv_tdoc e = {.L = d->L, .H = d->H, .n_spans = ns, .n_pos = P, .local = d->local,
                   .span = d->span, .rank = d->rank, .pos = d->pos};
    int ok = layout(&e) == 0 &&
             !memcmp(e.u_off, d->u_off, (size_t)(ns + 1) * sizeof *e.u_off) &&
             !memcmp(e.lo_off, d->lo_off, (size_t)(P + 1) * sizeof *e.lo_off) &&
             !memcmp(e.g_off, d->g_off, (size_t)(P + 1) * sizeof *e.g_off) &&
             !memcmp(e.c_off, d->c_off, (size_t)(P + 1) * sizeof *e.c_off) &&
             !memcmp(e.nvis, d->nvis, (size_t)P * sizeof *e.nvis);
    free(e.u_off), free(e.lo_off), free(e.g_off), free(e.c_off), free(e.nvis);
    return ok;
}

/* ---------------------------------------------------------------- cache files */

enum { TDOC_VERSION = 1 };
static const char TDOC_MAGIC[8] = {'S', 'E', 'K', 'V', 'D', 'O', 'C', '1'};

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

int sekv_tdoc_save(const sekv_tdoc *d, const char *path, char *err, size_t errlen) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot write", tmp);
        return -1;
    }
    int32_t hdr[10] = {TDOC_VERSION, d->L, d->H, d->Hkv, d->d, d->R, d->n, d->local, d->n_spans, d->n_pos};
    uint64_t h = fnv(0xcbf29ce484222325ULL, hdr, sizeof hdr);
    int ok = fwrite(TDOC_MAGIC, 8, 1, f) == 1 && fwrite(hdr, sizeof hdr, 1, f) == 1;
    tarr a[17];
    int na = tdoc_arrays((sekv_tdoc *)d, a);
    for (int i = 0; i < na && ok; i++) {
        size_t b = a[i].n * a[i].sz;
        ok = !b || fwrite(*a[i].ptr, b, 1, f) == 1;
        if (b) h = fnv(h, *a[i].ptr, b);
    }
    ok = ok && fwrite(&h, 8, 1, f) == 1;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path)) {
        remove(tmp);
        snprintf(err, errlen, "%s: write failed", path);
        return -1;
    }
    return 0;
}

int sekv_tdoc_load(sekv_tdoc *d, const char *path, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    char why[160];
    FILE *f = kb_fopen_regular(path, SIZE_MAX, why, sizeof why);   /* read by its header's sizes */
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, why);
        return -1;
    }
    char magic[8];
    int32_t hdr[10];
    if (fread(magic, 8, 1, f) != 1 || memcmp(magic, TDOC_MAGIC, 8) || fread(hdr, sizeof hdr, 1, f) != 1 ||
        hdr[0] != TDOC_VERSION) {
        fclose(f);
        snprintf(err, errlen, "%s: not a SeKV training-data file of version %d", path, TDOC_VERSION);
        return -1;
    }
    uint64_t h = fnv(0xcbf29ce484222325ULL, hdr, sizeof hdr);
    *d = (sekv_tdoc){.L = hdr[1], .H = hdr[2], .Hkv = hdr[3], .d = hdr[4], .R = hdr[5], .n = hdr[6],
                     .local = hdr[7], .n_spans = hdr[8], .n_pos = hdr[9]};
    int ok = d->L > 0 && d->H > 0 && d->Hkv > 0 && d->d > 0 && d->R > 0 && d->R <= SEKV_RMAX &&
             d->n > 0 && d->n_spans >= 0 && d->n_spans <= d->n && d->n_pos >= 0 && d->n_pos <= d->n;
    tarr a[17];
    /* Arrays are read in order; later sizes depend on offsets read earlier. */
    for (int i = 0; i < 17 && ok; i++) {
        int na = tdoc_arrays(d, a);
        (void)na;
        size_t b = a[i].n * a[i].sz;
        *a[i].ptr = malloc(b ? b : 1);
        ok = *a[i].ptr && (!b || fread(*a[i].ptr, b, 1, f) == 1);
        if (ok && b) h = fnv(h, *a[i].ptr, b);
    }
    uint64_t stored;
    ok = ok && fread(&stored, 8, 1, f) == 1 && stored == h && layout_ok(d);
    fclose(f);
    if (!ok) {
        sekv_tdoc_free(d);
        snprintf(err, errlen, "%s: truncated or corrupt (checksum)", path);
        return -1;
    }
    return 0;
}
