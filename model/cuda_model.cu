// The engine's forward pass on the device (see cuda_model.h).
//
// Weights: one bf16 block holding, per layer, the fused [Wq; Wk; Wv] [(H + 2 Hkv) d][E],
// Wo [E][H d], the fused [gate; up] [2F][E] and down [E][F], then the output matrix and,
// when it is not tied to it, the embedding table; one f32 block for the norms and biases.
// Each matrix is dequantised on the host in slices of rows (or read from its f32 copy),
// copied to a device staging buffer and rounded to bf16 there.
//
// Prefill follows model/prefill.c: layer by layer, prefill_chunk tokens at a time, so
// the residual stream X [n][E] and one layer's K/V [Hkv][n][d] (with its column mass and
// window rows) are the only buffers that grow with n; each layer's K/V and statistics are
// copied into the host kv_prefill_out when the layer is done. Attention is
// kb_cuda_prefill_dev on that device cache. Logits are made 256 rows at a time and only
// their surprisal (and the last row) leaves the device.
//
// Decode: the dense part here; each layer's q, k, v go to the host, through the method's
// append/attend, and the attention output comes back (model/decode.c's contract).
//
// Device copies are kept per model in a small registry keyed by the kv_model pointer and
// a fingerprint of its configuration and some of its weights, so a model freed without
// cuda_model_release and another allocated at the same address are told apart.
extern "C" {
#include "../kernels/core.h"
#include "engine.h"
#include "quant.h"
}
#include "cuda_model.h"
#include "cuda_model_ops.h"
#include "../kernels/cuda_backend.h"
#include "../kernels/cuda_util.h"

#include <cstring>
#include <ctime>
#include <vector>

namespace {

using kbm::bf16;

struct DevLayer {
    const bf16 *qkv, *wo, *gu, *down;
    const float *attn_norm, *ffn_norm, *bq, *bk, *bv;
};

struct DevModel {
    const kv_model *m = nullptr;
    uint64_t print = 0;
    bf16 *wbuf = nullptr;
    float *sbuf = nullptr;
    size_t bytes = 0;
    std::vector<DevLayer> layers;
    const bf16 *out_w = nullptr, *embd = nullptr;
    const float *out_norm = nullptr;
    // decode buffers, made on the first decode step
    float *x = nullptr, *y = nullptr, *qkv = nullptr, *att = nullptr, *logits = nullptr, *cs = nullptr;
    int32_t *id = nullptr;
    bf16 *hb = nullptr;
    float *h_qkv = nullptr, *h_att = nullptr;   // pinned
    double prefill_ms = -1;
    size_t used = 0;
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;   // guards g_models
std::vector<DevModel *> &g_models = *new std::vector<DevModel *>();

double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ---------------------------------------------------------------- registry

uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

bool is_random(const kv_model *m) { return !strncmp(m->gf.path, "random:", 7); }

// The shape, the path, the owners of the weights, and the first values of a few
// tensors: cheap (a few KB), and different for any two models in practice. Once a random
// model's host weights are freed (cuda_model_drop_host_weights), its name (with the seed)
// stands for their values, and the registry entry is re-keyed then.
uint64_t fingerprint(const kv_model *m) {
    const kv_model_config *c = &m->cfg;
    uint64_t h = 1469598103934665603ull;
    h = fnv(h, m->gf.path, strlen(m->gf.path));
    h = fnv(h, c->arch, strlen(c->arch));
    const int dims[] = {c->n_layer, c->n_embd, c->n_head, c->n_head_kv, c->head_dim, c->n_ff, c->n_vocab,
                        c->has_qkv_bias, m->tied};
    h = fnv(h, dims, sizeof dims);
    const void *owners[] = {m->layers, m->small, m->gf.tensors};
    h = fnv(h, owners, sizeof owners);
    h = fnv(h, c->name, strlen(c->name));
    const size_t few = (size_t)(c->n_embd < 256 ? c->n_embd : 256) * sizeof(float);
    const layer_weights *first = &m->layers[0], *last = &m->layers[c->n_layer - 1];
    h = fnv(h, m->output_norm, few);
    h = fnv(h, first->attn_norm, few);
    h = fnv(h, last->ffn_norm, few);
    const weight *rows[] = {&first->wq, &last->down, &m->output, &m->embd};
    if (!m->host_weights_gone)
        for (const weight *w : rows) h = fnv(h, w->t->data, w->row_bytes < 1024 ? w->row_bytes : 1024);
    return h;
}

void dev_free(DevModel *d) {
    if (!d) return;
    void *dev[] = {d->wbuf, d->sbuf, d->x, d->y, d->qkv, d->att, d->logits, d->cs, d->id, d->hb};
    for (void *p : dev) kb_cuda_free(p);
    kb_cuda_host_free(d->h_qkv);
    kb_cuda_host_free(d->h_att);
    delete d;
}

// ---------------------------------------------------------------- upload

struct DeqCtx {
    const weight *w;
    int r0, nr, tasks;
    float *dst;
};

void deq_task(void *vctx, int t) {
    const DeqCtx *c = static_cast<const DeqCtx *>(vctx);
    int a = (int)((long)c->nr * t / c->tasks), b = (int)((long)c->nr * (t + 1) / c->tasks);
    for (int r = a; r < b; r++)
        dequant_row(c->w->t->type, static_cast<const uint8_t *>(c->w->t->data) + (size_t)(c->r0 + r) * c->w->row_bytes,
                    c->dst + (size_t)r * c->w->cols, c->w->cols);
}

// w (all rows) into dst as bf16, through the staging buffers of `stage` floats each.
int upload_weight(const weight *w, bf16 *dst, float *d_stage, float *h_stage, size_t stage) {
    const size_t cols = (size_t)w->cols;
    const int per = (int)(stage / cols);
    for (int r0 = 0; r0 < w->rows; r0 += per) {
        const int nr = w->rows - r0 < per ? w->rows - r0 : per;
        DeqCtx c = {w, r0, nr, kb_threads() * 2 < nr ? kb_threads() * 2 : nr, h_stage};
        kb_parallel_for(c.tasks, deq_task, &c);
        CK(cudaMemcpy(d_stage, h_stage, (size_t)nr * cols * sizeof(float), cudaMemcpyHostToDevice));
        if (kbm::to_bf16(d_stage, dst + (size_t)r0 * cols, (size_t)nr * cols)) return -1;
    }
    return 0;
}

int upload_small(float *dst, const float *src, size_t n) {
    CK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice));
    return 0;
}

// Offsets rounded up to 128 elements, so every matrix starts 256-byte aligned.
size_t align128(size_t x) { return (x + 127) & ~(size_t)127; }

int upload(const kv_model *m, DevModel *d, char *err, size_t errlen) {
    const kv_model_config *c = &m->cfg;
    if (m->host_weights_gone) {
        snprintf(err, errlen, "%s: the host copy of the weights was freed after an earlier upload", m->gf.path);
        return -1;
    }
    const int L = c->n_layer, E = c->n_embd, F = c->n_ff, V = c->n_vocab;
    const size_t qd = (size_t)c->n_head * c->head_dim, kvd = (size_t)c->n_head_kv * c->head_dim;
    // element offsets in the bf16 block
    std::vector<size_t> off;
    size_t at = 0, widest = (size_t)(E > F ? E : F);
    if ((size_t)qd > widest) widest = qd;
    auto take = [&](size_t n) {
        off.push_back(at);
        at = align128(at + n);
    };
    for (int l = 0; l < L; l++) {
        take((qd + 2 * kvd) * E);
        take((size_t)E * qd);
        take((size_t)2 * F * E);
        take((size_t)E * F);
    }
    take((size_t)V * E);
    if (!m->tied) take((size_t)V * E);
    const size_t per_layer = 2 * (size_t)E + (c->has_qkv_bias ? qd + 2 * kvd : 0);
    const size_t nsmall = (size_t)L * per_layer + E;
    d->bytes = at * sizeof(bf16) + nsmall * sizeof(float);

    d->wbuf = static_cast<bf16 *>(kb_cuda_malloc(at * sizeof(bf16), "model weights (bf16)"));
    d->sbuf = static_cast<float *>(kb_cuda_malloc(nsmall * sizeof(float), "model norms and biases"));
    size_t stage = (size_t)1 << 22;
    if (stage < widest) stage = widest;
    float *d_stage = static_cast<float *>(kb_cuda_malloc(stage * sizeof(float), "weight staging"));
    float *h_stage = static_cast<float *>(malloc(stage * sizeof(float)));
    int rc = d->wbuf && d->sbuf && d_stage && h_stage ? 0 : -1;
    float *s = d->sbuf;
    d->layers.resize(L);
    for (int l = 0; l < L && !rc; l++) {
        const layer_weights *w = &m->layers[l];
        DevLayer &dl = d->layers[l];
        bf16 *qkv = d->wbuf + off[4 * l], *wo = d->wbuf + off[4 * l + 1], *gu = d->wbuf + off[4 * l + 2],
             *down = d->wbuf + off[4 * l + 3];
        dl.qkv = qkv, dl.wo = wo, dl.gu = gu, dl.down = down;
        rc = upload_weight(&w->wq, qkv, d_stage, h_stage, stage) ||
             upload_weight(&w->wk, qkv + qd * E, d_stage, h_stage, stage) ||
             upload_weight(&w->wv, qkv + (qd + kvd) * E, d_stage, h_stage, stage) ||
             upload_weight(&w->wo, wo, d_stage, h_stage, stage) ||
             upload_weight(&w->gate, gu, d_stage, h_stage, stage) ||
             upload_weight(&w->up, gu + (size_t)F * E, d_stage, h_stage, stage) ||
             upload_weight(&w->down, down, d_stage, h_stage, stage);
        const float *small[5] = {w->attn_norm, w->ffn_norm, w->bq, w->bk, w->bv};
        const float **dst[5] = {&dl.attn_norm, &dl.ffn_norm, &dl.bq, &dl.bk, &dl.bv};
        const size_t len[5] = {(size_t)E, (size_t)E, qd, kvd, kvd};
        for (int k = 0; k < 5; k++) {
            *dst[k] = nullptr;
            if (k >= 2 && !c->has_qkv_bias) continue;
            *dst[k] = s;
            rc = rc || upload_small(s, small[k], len[k]);
            s += len[k];
        }
    }
    if (!rc) {
        bf16 *out = d->wbuf + off[4 * L];
        d->out_w = out;
        rc = upload_weight(&m->output, out, d_stage, h_stage, stage);
        d->embd = out;
        if (!rc && !m->tied) {
            bf16 *embd = d->wbuf + off[4 * L + 1];
            d->embd = embd;
            rc = upload_weight(&m->embd, embd, d_stage, h_stage, stage);
        }
        d->out_norm = s;
        rc = rc || upload_small(s, m->output_norm, E);
    }
    if (!rc && cudaDeviceSynchronize() != cudaSuccess) rc = -1;   // conversion errors surface here
    kb_cuda_free(d_stage);
    free(h_stage);
    if (rc) snprintf(err, errlen, "%s: uploading the weights to the device (%.1f MB in bf16) failed; see above",
                     m->gf.path, d->bytes / 1e6);
    return rc;
}

// The device copy of m, made or remade as needed. NULL with err.
DevModel *get(const kv_model *m, char *err, size_t errlen) {
    const uint64_t fp = fingerprint(m);
    pthread_mutex_lock(&g_lock);
    DevModel *found = nullptr;
    for (size_t i = 0; i < g_models.size(); i++)
        if (g_models[i]->m == m) {
            if (g_models[i]->print == fp) {
                found = g_models[i];
            } else {   // a freed model's copy, and a new model at its address
                dev_free(g_models[i]);
                g_models.erase(g_models.begin() + i);
            }
            break;
        }
    if (!found) {
        DevModel *d = new DevModel();
        d->m = m;
        d->print = fp;
        if (upload(m, d, err, errlen)) {
            dev_free(d);
        } else {
            g_models.push_back(d);
            found = d;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

// ---------------------------------------------------------------- prefill

// Device buffers of one call, freed on the way out.
struct Bufs {
    std::vector<void *> all;
    bool ok = true;
    template <class T>
    T *get(size_t count, const char *what) {
        void *p = kb_cuda_malloc(count * sizeof(T), what);
        if (p) all.push_back(p);
        else ok = false;
        return static_cast<T *>(p);
    }
    ~Bufs() {
        for (void *p : all) kb_cuda_free(p);
    }
};

int prefill_device(const kv_model *m, DevModel *dm, const int32_t *ids, int n, int win, bool want_mass,
                   kv_prefill_out *out) {
    const kv_model_config *cf = &m->cfg;
    const int L = cf->n_layer, H = cf->n_head, Hkv = cf->n_head_kv, d = cf->head_dim, E = cf->n_embd, F = cf->n_ff,
              V = cf->n_vocab, nr = m->n_rot, qd = H * d, kvd = Hkv * d;
    const int C = m->prefill_chunk < n ? m->prefill_chunk : n, CL = C < 256 ? C : 256;
    const int wqkv = qd + 2 * kvd, wy = wqkv > 2 * F ? wqkv : 2 * F;
    const int wh = E > qd ? (E > F ? E : F) : (qd > F ? qd : F);
    const float eps = cf->norm_eps;
    const size_t kvn = (size_t)Hkv * n * d;
    Bufs b;
    int32_t *d_ids = b.get<int32_t>(n, "prefill token ids");
    float *d_cs = b.get<float>((size_t)n * nr, "prefill rope table");
    float *X = b.get<float>((size_t)n * E, "prefill residual stream");
    bf16 *hb = b.get<bf16>((size_t)C * wh, "prefill GEMM inputs");
    float *Y = b.get<float>((size_t)C * wy, "prefill GEMM outputs");
    float *Q = b.get<float>((size_t)C * qd, "prefill queries");
    float *A = b.get<float>((size_t)C * qd, "prefill attention output");
    float *Kc = b.get<float>(kvn, "prefill keys of a layer");
    float *Vc = b.get<float>(kvn, "prefill values of a layer");
    float *mass = want_mass ? b.get<float>((size_t)H * n, "prefill column mass") : nullptr;
    float *wp = win ? b.get<float>((size_t)H * win * n, "prefill window rows") : nullptr;
    float *lg = b.get<float>((size_t)CL * V, "prefill logits");
    float *sp = b.get<float>(n, "prefill surprisal");
    if (!b.ok) return -1;

    std::vector<float> cs((size_t)n * nr);
    for (int t = 0; t < n; t++) rope_cossin(m, t, cs.data() + (size_t)t * nr);
    CK(cudaMemcpy(d_ids, ids, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_cs, cs.data(), cs.size() * sizeof(float), cudaMemcpyHostToDevice));
    if (kbm::embed(dm->embd, E, d_ids, n, X)) return -1;

    for (int l = 0; l < L; l++) {
        const DevLayer &w = dm->layers[l];
        kb_cuda_mem_sample(nullptr);   // the driver's view during the prefill, once a layer
        if (mass) CK(cudaMemset(mass, 0, (size_t)H * n * sizeof(float)));
        for (int c0 = 0; c0 < n; c0 += C) {
            const int cn = n - c0 < C ? n - c0 : C;
            float *Xc = X + (size_t)c0 * E;
            kbm::QkvPost p = {Y, wqkv, cn, d_cs + (size_t)c0 * nr, nr, m->rope_neox, w.bq, w.bk, w.bv,
                              H, Hkv, d, Q, Kc, Vc, (size_t)n, c0};
            kb_prefill_args a;
            memset(&a, 0, sizeof a);
            a.H = H, a.Hkv = Hkv, a.d = d, a.t0 = c0, a.m = cn;
            a.Q = Q, a.K = Kc, a.V = Vc, a.kv_stride = (size_t)n * d, a.out = A;
            a.col_mass = mass, a.mass_ld = (size_t)n;
            a.win_probs = wp, a.win = win, a.win_start = n - win, a.win_ld = (size_t)n;
            if (kbm::rmsnorm(Xc, cn, E, w.attn_norm, eps, hb) || kbm::gemm(w.qkv, wqkv, E, hb, cn, 0.0f, Y, wqkv) ||
                kbm::qkv_post(p) || kb_cuda_prefill_dev(&a) || kbm::to_bf16(A, hb, (size_t)cn * qd) ||
                kbm::gemm(w.wo, E, qd, hb, cn, 1.0f, Xc, E) || kbm::rmsnorm(Xc, cn, E, w.ffn_norm, eps, hb) ||
                kbm::gemm(w.gu, 2 * F, E, hb, cn, 0.0f, Y, 2 * F) || kbm::silu(Y, cn, F, hb) ||
                kbm::gemm(w.down, E, F, hb, cn, 1.0f, Xc, E))
                return -1;
        }
        CK(cudaMemcpy(out->K + (size_t)l * kvn, Kc, kvn * sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(out->V + (size_t)l * kvn, Vc, kvn * sizeof(float), cudaMemcpyDeviceToHost));
        if (mass)
            CK(cudaMemcpy(out->col_mass + (size_t)l * H * n, mass, (size_t)H * n * sizeof(float),
                          cudaMemcpyDeviceToHost));
        if (wp)
            CK(cudaMemcpy(out->win_probs + (size_t)l * H * win * n, wp, (size_t)H * win * n * sizeof(float),
                          cudaMemcpyDeviceToHost));
    }
    // every position's logits, CL rows at a time, into the surprisal of the next token
    for (int c0 = 0; c0 < n; c0 += CL) {
        const int cn = n - c0 < CL ? n - c0 : CL, with_next = n - 1 - c0 < cn ? n - 1 - c0 : cn;
        if (kbm::rmsnorm(X + (size_t)c0 * E, cn, E, dm->out_norm, eps, hb) ||
            kbm::gemm(dm->out_w, V, E, hb, cn, 0.0f, lg, V) ||
            kbm::surprisal(lg, with_next, V, d_ids + c0 + 1, sp + c0 + 1))
            return -1;
        if (c0 + cn == n)
            CK(cudaMemcpy(out->last_logits, lg + (size_t)(cn - 1) * V, (size_t)V * sizeof(float),
                          cudaMemcpyDeviceToHost));
    }
    size_t fr = 0, tot = 0;   // the peak point: every buffer of the call is held
    if (kb_cuda_mem_stats(nullptr, nullptr, &fr, &tot) == 0) dm->used = tot - fr;
    out->surprisal[0] = 0.0f;
    if (n > 1)
        CK(cudaMemcpy(out->surprisal + 1, sp + 1, (size_t)(n - 1) * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

// ---------------------------------------------------------------- decode

int decode_buffers(const kv_model *m, DevModel *d) {
    if (d->x) return 0;
    const kv_model_config *c = &m->cfg;
    const int E = c->n_embd, F = c->n_ff, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    const int wqkv = qd + 2 * kvd, wy = wqkv > 2 * F ? wqkv : 2 * F, wh = E > qd ? (E > F ? E : F) : (qd > F ? qd : F);
    const size_t f = sizeof(float);
    d->x = static_cast<float *>(kb_cuda_malloc(E * f, "decode residual"));
    d->y = static_cast<float *>(kb_cuda_malloc(wy * f, "decode GEMM output"));
    d->qkv = static_cast<float *>(kb_cuda_malloc(wqkv * f, "decode q, k, v"));
    d->att = static_cast<float *>(kb_cuda_malloc(qd * f, "decode attention output"));
    d->logits = static_cast<float *>(kb_cuda_malloc((size_t)c->n_vocab * f, "decode logits"));
    d->cs = static_cast<float *>(kb_cuda_malloc(m->n_rot * f, "decode rope row"));
    d->id = static_cast<int32_t *>(kb_cuda_malloc(sizeof(int32_t), "decode token id"));
    d->hb = static_cast<bf16 *>(kb_cuda_malloc(wh * sizeof(bf16), "decode GEMM input"));
    d->h_qkv = static_cast<float *>(kb_cuda_host_alloc(wqkv * f));
    d->h_att = static_cast<float *>(kb_cuda_host_alloc(qd * f));
    if (d->x && d->y && d->qkv && d->att && d->logits && d->cs && d->id && d->hb && d->h_qkv && d->h_att) return 0;
    void *dev[] = {d->x, d->y, d->qkv, d->att, d->logits, d->cs, d->id, d->hb};
    for (void *p : dev) kb_cuda_free(p);
    kb_cuda_host_free(d->h_qkv);
    kb_cuda_host_free(d->h_att);
    d->x = d->y = d->qkv = d->att = d->logits = d->cs = d->h_qkv = d->h_att = nullptr;
    d->id = nullptr;
    d->hb = nullptr;
    return -1;
}

int decode_device(const kv_model *m, DevModel *d, const kv_method *meth, kv_state *st, int id, int pos,
                  const kv_token *info, float *logits) {
    const kv_model_config *c = &m->cfg;
    const int E = c->n_embd, F = c->n_ff, H = c->n_head, Hkv = c->n_head_kv, hd = c->head_dim, V = c->n_vocab;
    const int qd = H * hd, kvd = Hkv * hd, wqkv = qd + 2 * kvd;
    const float eps = c->norm_eps;
    std::vector<float> cs(m->n_rot);
    rope_cossin(m, pos, cs.data());
    CK(cudaMemcpy(d->cs, cs.data(), cs.size() * sizeof(float), cudaMemcpyHostToDevice));
    const int32_t id32 = id;
    CK(cudaMemcpy(d->id, &id32, sizeof id32, cudaMemcpyHostToDevice));
    if (kbm::embed(d->embd, E, d->id, 1, d->x)) return -1;
    for (int l = 0; l < c->n_layer; l++) {
        const DevLayer &w = d->layers[l];
        kbm::QkvPost p = {d->y, wqkv, 1, d->cs, m->n_rot, m->rope_neox, w.bq, w.bk, w.bv,
                          H, Hkv, hd, d->qkv, d->qkv + qd, d->qkv + qd + kvd, 1, 0};
        if (kbm::rmsnorm(d->x, 1, E, w.attn_norm, eps, d->hb) || kbm::gemm(w.qkv, wqkv, E, d->hb, 1, 0.0f, d->y, wqkv) ||
            kbm::qkv_post(p))
            return -1;
        CK(cudaMemcpy(d->h_qkv, d->qkv, (size_t)wqkv * sizeof(float), cudaMemcpyDeviceToHost));
        meth->append(st, l, d->h_qkv + qd, d->h_qkv + qd + kvd, info);
        meth->attend(st, l, d->h_qkv, d->h_att);
        CK(cudaMemcpy(d->att, d->h_att, (size_t)qd * sizeof(float), cudaMemcpyHostToDevice));
        if (kbm::to_bf16(d->att, d->hb, qd) || kbm::gemm(w.wo, E, qd, d->hb, 1, 1.0f, d->x, E) ||
            kbm::rmsnorm(d->x, 1, E, w.ffn_norm, eps, d->hb) || kbm::gemm(w.gu, 2 * F, E, d->hb, 1, 0.0f, d->y, 2 * F) ||
            kbm::silu(d->y, 1, F, d->hb) || kbm::gemm(w.down, E, F, d->hb, 1, 1.0f, d->x, E))
            return -1;
    }
    if (kbm::rmsnorm(d->x, 1, E, d->out_norm, eps, d->hb) || kbm::gemm(d->out_w, V, E, d->hb, 1, 0.0f, d->logits, V))
        return -1;
    CK(cudaMemcpy(logits, d->logits, (size_t)V * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

}  // namespace

// ---------------------------------------------------------------- the C API

extern "C" int cuda_model_selected(void) {
    const kb_backend *b = kb_get();
    return b && b == kb_cuda(nullptr);
}

extern "C" int cuda_model_load(kv_model *m, char *err, size_t errlen) {
    if (!kb_cuda(nullptr)) {
        snprintf(err, errlen, "%s: no usable CUDA device for the weights", m->gf.path);
        return -1;
    }
    return get(m, err, errlen) ? 0 : -1;
}

extern "C" long long cuda_model_drop_host_weights(kv_model *m) {
    if (!is_random(m) || !m->owned_weights) return 0;
    char err[256];
    DevModel *d = get(m, err, sizeof err);   // on the device first (already there: a lookup)
    if (!d) return -1;
    size_t bytes = 0;
    auto drop = [&bytes](weight *w) { bytes += (size_t)w->rows * w->row_bytes; };
    for (int l = 0; l < m->cfg.n_layer; l++) {
        layer_weights *w = &m->layers[l];
        for (weight *x : {&w->wq, &w->wk, &w->wv, &w->wo, &w->gate, &w->up, &w->down}) drop(x);
    }
    drop(&m->output);
    if (!m->tied) drop(&m->embd);
    else m->embd = m->output;
    for (int i = 0; i < m->gf.n_tensors; i++) m->gf.tensors[i].data = nullptr;
    free(m->owned_weights);
    m->owned_weights = nullptr;
    m->host_weights_gone = 1;
    pthread_mutex_lock(&g_lock);
    d->print = fingerprint(m);   // the same model, now known without its weights' values
    pthread_mutex_unlock(&g_lock);
    return (long long)bytes;
}

extern "C" void cuda_model_release(const kv_model *m) {
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_models.size(); i++)
        if (g_models[i]->m == m) {
            dev_free(g_models[i]);
            g_models.erase(g_models.begin() + i);
            break;
        }
    pthread_mutex_unlock(&g_lock);
}

extern "C" int cuda_model_prefill(kv_model *m, const int32_t *ids, int n, const kv_needs *needs, kv_prefill_out *out,
                                  char *err, size_t errlen) {
    const kv_model_config *cf = &m->cfg;
    memset(out, 0, sizeof *out);
    if (n < 1 || n > cf->n_ctx_train) {
        snprintf(err, errlen, n < 1 ? "empty prompt" : "prompt of %d tokens is beyond the model's context of %d", n,
                 cf->n_ctx_train);
        return -1;
    }
    for (int t = 0; t < n; t++)
        if (ids[t] < 0 || ids[t] >= cf->n_vocab) {
            snprintf(err, errlen, "token id %d at position %d is outside the vocabulary of %d", ids[t], t, cf->n_vocab);
            return -1;
        }
    if (cf->head_dim > 256) {
        snprintf(err, errlen, "%s: head dim %d is above the device attention kernel's 256 (use --backend cpu)",
                 m->gf.path, cf->head_dim);
        return -1;
    }
    DevModel *dm = get(m, err, errlen);   // the one-time upload is not part of the prefill's time
    if (!dm) return -1;
    const double t_start = now_s();
    const int L = cf->n_layer, H = cf->n_head, nv = cf->n_vocab;
    const int win = needs && needs->window > 0 ? (needs->window < n ? needs->window : n) : 0;
    const bool want_mass = needs && needs->col_mass;
    const size_t kv_n = (size_t)L * cf->n_head_kv * n * cf->head_dim;
    out->n = n;
    out->n_layer = L;
    out->n_head = H;
    out->n_head_kv = cf->n_head_kv;
    out->head_dim = cf->head_dim;
    out->win = win;
    out->K = static_cast<float *>(malloc(kv_n * sizeof(float)));
    out->V = static_cast<float *>(malloc(kv_n * sizeof(float)));
    out->surprisal = static_cast<float *>(malloc((size_t)n * sizeof(float)));
    out->sent_end = static_cast<uint8_t *>(malloc((size_t)n));
    out->last_logits = static_cast<float *>(malloc((size_t)nv * sizeof(float)));
    if (want_mass) out->col_mass = static_cast<float *>(malloc((size_t)L * H * n * sizeof(float)));
    if (win) out->win_probs = static_cast<float *>(malloc((size_t)L * H * win * n * sizeof(float)));
    if (!out->K || !out->V || !out->surprisal || !out->sent_end || !out->last_logits || (want_mass && !out->col_mass) ||
        (win && !out->win_probs)) {
        prefill_out_free(out);
        snprintf(err, errlen, "out of memory for a prefill of %d tokens", n);
        return -1;
    }
    for (int t = 0; t < n; t++) out->sent_end[t] = m->sent_end[ids[t]];
    kb_cuda_timer *timer = kb_cuda_timer_new();
    int rc = timer && kb_cuda_timer_start(timer) == 0 ? prefill_device(m, dm, ids, n, win, want_mass, out) : -1;
    double ms = rc == 0 ? kb_cuda_timer_stop(timer) : -1;
    kb_cuda_timer_free(timer);
    if (rc || ms < 0) {
        prefill_out_free(out);
        snprintf(err, errlen, "%s: the prefill of %d tokens failed on the device (the CUDA error is above)", m->gf.path,
                 n);
        return -1;
    }
    dm->prefill_ms = ms;
    out->seconds = now_s() - t_start;
    return 0;
}

extern "C" int cuda_model_decode(kv_model *m, const kv_method *meth, kv_state *st, int id, int pos,
                                 const kv_token *info, float *logits) {
    const kv_model_config *c = &m->cfg;
    if (id < 0 || id >= c->n_vocab || pos < 0 || pos >= c->n_ctx_train) return -1;
    char err[512];
    DevModel *d = get(m, err, sizeof err);
    if (!d) {
        fprintf(stderr, "kb cuda model: %s\n", err);
        return -1;
    }
    if (decode_buffers(m, d)) return -1;
    kv_token deflt = {pos, 0.0f, 0};
    if (decode_device(m, d, meth, st, id, pos, info ? info : &deflt, logits)) {
        fprintf(stderr, "kb cuda model: decode step at position %d failed on the device\n", pos);
        return -1;
    }
    return 0;
}

extern "C" int cuda_model_info_get(const kv_model *m, cuda_model_info *out) {
    const uint64_t fp = fingerprint(m);
    int rc = -1;
    pthread_mutex_lock(&g_lock);
    for (DevModel *d : g_models)
        if (d->m == m && d->print == fp) {
            out->weight_bytes = d->bytes;
            out->prefill_ms = d->prefill_ms;
            out->used_bytes = d->used;
            rc = 0;
        }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

extern "C" int cuda_model_gemm_check(const float *W, int rows, int cols, const float *X, int n, float beta, float *Y) {
    if (rows <= 0 || cols <= 0 || n <= 0 || (beta != 0.0f && beta != 1.0f)) return -1;
    const size_t nw = (size_t)rows * cols, nx = (size_t)n * cols, ny = (size_t)n * rows;
    Bufs b;
    float *dw = b.get<float>(nw, "gemm check W"), *dx = b.get<float>(nx, "gemm check X");
    float *dy = b.get<float>(ny, "gemm check Y");
    bf16 *hw = b.get<bf16>(nw, "gemm check W bf16"), *hx = b.get<bf16>(nx, "gemm check X bf16");
    if (!b.ok) return -1;
    CK(cudaMemcpy(dw, W, nw * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, X, nx * sizeof(float), cudaMemcpyHostToDevice));
    if (beta != 0.0f) CK(cudaMemcpy(dy, Y, ny * sizeof(float), cudaMemcpyHostToDevice));
    if (kbm::to_bf16(dw, hw, nw) || kbm::to_bf16(dx, hx, nx) || kbm::gemm(hw, rows, cols, hx, n, beta, dy, rows))
        return -1;
    CK(cudaMemcpy(Y, dy, ny * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}
