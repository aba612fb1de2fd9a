/* Random-weight models in the shapes of known checkpoints (see random_model.h). */
#include "random_model.h"
#include "engine.h"
#include "quant.h"
#include "quantize.h"
#include "tok_internal.h"
#include "../kernels/core.h"
#include "../kernels/model_hash.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *name, *arch;
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
    float rope_base, norm_eps;
    int tied;
    int hidden;        /* test-only shape: loads, but is not listed */
    int wtype;         /* the 2-D weights' type unless the spec names one */
    kv_rope_type rope; /* RoPE scaling as the published config.json has it (llama3: low and
                          high frequency factors 1 and 4, as every Llama-3.x) */
    float rope_factor;
    int rope_orig_ctx; /* original_max_position_embeddings */
} preset;

/* The shapes of the published configs. n_ctx: the longest context the family is used at
 * (Llama 3.1's 128K for llama3-8b, whose shapes it shares without its RoPE scaling;
 * llama3.1-8b has it). The tiny ones are for tests
 * that run the engine under the CUDA emulation (tests/test_cuda_model.c): both rope
 * layouts, tied and untied output, qwen2 biases, group sizes 3 and 4. */
static const preset presets[] = {
    {"smollm2-135m", "llama", 30, 576, 9, 3, 64, 1536, 49152, 8192, 100000.0f, 1e-5f, 1, 0, GGML_F32, KV_ROPE_NONE, 0, 0},
    {"llama3.2-1b", "llama", 16, 2048, 32, 8, 64, 8192, 128256, 131072, 500000.0f, 1e-5f, 1, 0, GGML_Q4_0, KV_ROPE_NONE, 0, 0},
    {"llama3-8b", "llama", 32, 4096, 32, 8, 128, 14336, 128256, 131072, 500000.0f, 1e-5f, 0, 0, GGML_Q4_0, KV_ROPE_NONE, 0, 0},
    {"llama3.1-8b", "llama", 32, 4096, 32, 8, 128, 14336, 128256, 131072, 500000.0f, 1e-5f, 0, 0, GGML_Q4_0,
     KV_ROPE_LLAMA3, 8.0f, 8192},
    {"mistral-7b", "llama", 32, 4096, 32, 8, 128, 14336, 32768, 32768, 1000000.0f, 1e-5f, 0, 0, GGML_Q4_0, KV_ROPE_NONE, 0, 0},
    /* Qwen2.5's model card: YaRN factor 4 on its 32K for 128K */
    {"qwen2.5-7b", "qwen2", 28, 3584, 28, 4, 128, 18944, 152064, 131072, 1000000.0f, 1e-6f, 0, 0, GGML_Q4_0,
     KV_ROPE_YARN, 4.0f, 32768},
    {"tiny-llama", "llama", 2, 64, 6, 2, 16, 96, 300, 512, 10000.0f, 1e-5f, 1, 1, GGML_F32, KV_ROPE_NONE, 0, 0},
    {"tiny-qwen2", "qwen2", 3, 64, 4, 1, 32, 128, 320, 512, 1000000.0f, 1e-6f, 0, 1, GGML_F32, KV_ROPE_NONE, 0, 0},
    /* every row a multiple of 256 (K-quant blocks): random:tiny-k:q4_k */
    {"tiny-k", "llama", 2, 256, 4, 2, 64, 512, 300, 4096, 10000.0f, 1e-5f, 1, 1, GGML_F32, KV_ROPE_NONE, 0, 0},
};
enum { N_PRESETS = sizeof presets / sizeof presets[0] };

static void preset_rope(const preset *p, kv_model_config *c) {
    kv_rope_scaling *r = &c->rope;
    memset(r, 0, sizeof *r);
    r->type = p->rope;
    r->factor = p->rope_factor;
    r->orig_ctx = p->rope_orig_ctx;
    if (p->rope == KV_ROPE_LLAMA3) r->low_freq_factor = 1, r->high_freq_factor = 4;
}

const char *const *random_model_presets(void) {
    static const char *names[N_PRESETS + 1];
    int k = 0;
    for (int i = 0; i < N_PRESETS; i++)
        if (!presets[i].hidden) names[k++] = presets[i].name;
    names[k] = NULL;
    return names;
}

/* ---- seeded streams: splitmix64 */

static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* x[i] uniform in [lo, hi), from the stream of (seed, tensor, row). */
static void fill_row(float *x, int n, uint64_t seed, int tensor, int row, float lo, float hi) {
    uint64_t s = mix64(seed ^ mix64(((uint64_t)(uint32_t)tensor << 32) | (uint32_t)row));
    for (int i = 0; i < n; i++) {
        s += 0x9e3779b97f4a7c15ULL;
        float u = (float)(mix64(s) >> 40) * (1.0f / 16777216.0f);
        x[i] = lo + (hi - lo) * u;
    }
}

/* ---- weights */

typedef struct {
    weight *w;
    int id;            /* tensor number: the stream and the gguf_tensor slot */
    const char *name;
} wslot;

typedef struct {
    wslot *slots;
    int n_slots;
    uint64_t seed;
    int rows_per_task;
    int *task_slot, *task_row0;
    int oom;           /* set by a task that found no memory for its f32 row */
} fill_job;

/* Q4_K rows for random models (quantize_row has no K-quant): per block of 256, eight
 * sub-blocks of 32 each get a scale (max - min) / 15 and a min -min(x, 0), stored as 6-bit
 * multiples of the block's f16 d and dmin; the 4-bit values are then rounded against the
 * stored (f16, 6-bit) scale and min, so the row dequantizes to x within one step of its
 * sub-block. Not ggml's search for the best scales: a valid block, close to x. */
static void q4k_pack_scale(uint8_t *sc, int j, int s, int m) {   /* ggml's get_scale_min_k4, inverted */
    if (j < 4) {
        sc[j] = (uint8_t)((sc[j] & 0xC0) | s), sc[j + 4] = (uint8_t)((sc[j + 4] & 0xC0) | m);
    } else {
        sc[j + 4] = (uint8_t)((s & 15) | ((m & 15) << 4));
        sc[j - 4] = (uint8_t)((sc[j - 4] & 63) | ((s >> 4) << 6));
        sc[j] = (uint8_t)((sc[j] & 63) | ((m >> 4) << 6));
    }
}

static void q4k_row(const float *x, uint8_t *dst, int n) {
    for (int b = 0; b < n / 256; b++, x += 256, dst += 144) {
        float scale[8], mn[8], smax = 0, mmax = 0;
        for (int j = 0; j < 8; j++) {
            float lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) lo = fminf(lo, x[32 * j + l]), hi = fmaxf(hi, x[32 * j + l]);
            scale[j] = (hi - lo) / 15, mn[j] = -lo;
            smax = fmaxf(smax, scale[j]), mmax = fmaxf(mmax, mn[j]);
        }
        uint16_t dh = f32_to_f16(smax / 63), mh = f32_to_f16(mmax / 63);
        float d = f16_to_f32(dh), dmin = f16_to_f32(mh);
        memcpy(dst, &dh, 2), memcpy(dst + 2, &mh, 2);
        uint8_t *sc = dst + 4, *qs = dst + 16;
        memset(sc, 0, 12);
        memset(qs, 0, 128);
        for (int j = 0; j < 8; j++) {
            int si = d > 0 ? (int)lrintf(scale[j] / d) : 0, mi = dmin > 0 ? (int)lrintf(mn[j] / dmin) : 0;
            si = si > 63 ? 63 : si, mi = mi > 63 ? 63 : mi;
            q4k_pack_scale(sc, j, si, mi);
            float a = d * (float)si, m = dmin * (float)mi;
            for (int l = 0; l < 32; l++) {
                int q = a > 0 ? (int)lrintf((x[32 * j + l] + m) / a) : 0;
                q = q < 0 ? 0 : q > 15 ? 15 : q;
                /* sub-block 2c in the low nibbles of qs[32c..], 2c + 1 in the high ones */
                qs[32 * (j / 2) + l] |= (uint8_t)(j % 2 ? q << 4 : q);
            }
        }
    }
}

/* A task's rows: drawn in f32 (the same values for every type), then quantized in place. */
static void fill_task(void *ctx, int t) {
    fill_job *j = ctx;
    const wslot *s = &j->slots[j->task_slot[t]];
    weight *w = s->w;
    float a = sqrtf(3.0f / (float)w->cols);   /* uniform(-a, a): standard deviation 1/sqrt(cols) */
    int r1 = j->task_row0[t] + j->rows_per_task < w->rows ? j->task_row0[t] + j->rows_per_task : w->rows;
    uint8_t *data = (uint8_t *)w->t->data;
    float *row = w->t->type == GGML_F32 ? NULL : malloc((size_t)w->cols * sizeof *row);
    if (w->t->type != GGML_F32 && !row) {
        j->oom = 1;
        return;
    }
    for (int r = j->task_row0[t]; r < r1; r++) {
        uint8_t *dst = data + (size_t)r * w->row_bytes;
        if (!row) {   /* F32: drawn in place */
            fill_row((float *)dst, w->cols, j->seed, s->id, r, -a, a);
            continue;
        }
        fill_row(row, w->cols, j->seed, s->id, r, -a, a);
        if (w->t->type == GGML_Q4_K) q4k_row(row, dst, w->cols);
        else quantize_row(w->t->type, row, dst, w->cols);
    }
    free(row);
}

static int fail(char *err, size_t errlen, const char *name, const char *msg) {
    snprintf(err, errlen, "random:%s: %s", name, msg);
    return -1;
}

/* The byte-level tokenizer: ids 0..255 are the bytes, id 256 is U+2581 (SentencePiece's
 * space, which it spells as " ", so text workloads map tokens back to their bytes); the
 * rest print nothing. */
static kv_tokenizer *byte_tokenizer(int n_vocab) {
    kv_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = TOK_SPM;
    t->n_vocab = n_vocab;
    t->bos = t->eos = t->unk = -1;
    t->text = malloc(256 + 3);
    t->piece = malloc(256 + 1);
    t->text_off = malloc(((size_t)n_vocab + 1) * sizeof *t->text_off);
    t->piece_off = malloc(((size_t)n_vocab + 1) * sizeof *t->piece_off);
    t->type = malloc((size_t)n_vocab);
    t->map = malloc(16 * sizeof *t->map);   /* holds only id 256: other text falls back to bytes */
    if (!t->text || !t->piece || !t->text_off || !t->piece_off || !t->type || !t->map) {
        tok_free(t);
        return NULL;
    }
    for (int i = 0; i <= n_vocab; i++) {
        t->text_off[i] = (uint32_t)(i <= 256 ? i : 259);
        t->piece_off[i] = (uint32_t)(i <= 256 ? i : 257);
    }
    for (int i = 0; i < n_vocab; i++) t->type[i] = i < 256 ? TT_BYTE : i == 256 ? TT_NORMAL : TT_UNUSED;
    for (int b = 0; b < 256; b++) {
        t->text[b] = t->piece[b] = (char)b;
        t->byte_tok[b] = b;
    }
    memcpy(t->text + 256, "\xE2\x96\x81", 3);
    t->piece[256] = ' ';
    t->map_mask = 15;
    for (int i = 0; i < 16; i++) t->map[i] = -1;
    uint32_t h = 2166136261u;   /* tok_find's FNV-1a of the U+2581 bytes; the table is otherwise empty */
    for (int i = 0; i < 3; i++) h = (h ^ (uint8_t)t->text[256 + i]) * 16777619u;
    t->map[h & t->map_mask] = 256;
    return t;
}

kv_model *model_load_random(const char *name, uint64_t seed, char *err, size_t errlen) {
    return model_load_random_typed(name, seed, -1, err, errlen);
}

kv_model *model_load_random_typed(const char *name, uint64_t seed, int wtype, char *err, size_t errlen) {
    const preset *p = NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (name && !strcmp(name, presets[i].name)) p = &presets[i];
    if (!p) {
        char list[256] = "";
        for (int i = 0; i < N_PRESETS; i++)
            if (!presets[i].hidden)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", *list ? ", " : "", presets[i].name);
        snprintf(err, errlen, "random:%s: unknown preset (known: %s)", name ? name : "", list);
        return NULL;
    }
    if (wtype < 0) wtype = p->wtype;
    if (!quantize_supported(wtype) && wtype != GGML_Q4_K) {
        fail(err, errlen, p->name, "random weights are generated as f32, q8_0, q4_0 or q4_k only");
        return NULL;
    }
    kv_model *m = calloc(1, sizeof *m);
    if (!m) {
        fail(err, errlen, p->name, "out of memory");
        return NULL;
    }
    kv_model_config *c = &m->cfg;
    snprintf(m->gf.path, sizeof m->gf.path, "random:%s", p->name);
    snprintf(c->arch, sizeof c->arch, "%s", p->arch);
    snprintf(c->name, sizeof c->name, "random %s (seed %" PRIu64 ", %s)", p->name, seed, quant_name(wtype));
    c->n_layer = p->n_layer;
    c->n_embd = p->n_embd;
    c->n_head = p->n_head;
    c->n_head_kv = p->n_head_kv;
    c->head_dim = p->head_dim;
    c->n_ff = p->n_ff;
    c->n_vocab = p->n_vocab;
    c->n_ctx_train = p->n_ctx;
    c->rope_base = p->rope_base;
    c->norm_eps = p->norm_eps;
    c->has_qkv_bias = !strcmp(p->arch, "qwen2");
    m->n_rot = p->head_dim;
    m->rope_neox = c->has_qkv_bias;
    m->tied = p->tied;
    m->prefill_chunk = 512;
    preset_rope(p, c);
    model_cap_sliding_window(c);
    if (rope_setup(m, err, errlen)) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", err);
        fail(err, errlen, p->name, msg);
        free(m);
        return NULL;
    }

    const int L = c->n_layer, E = c->n_embd, F = c->n_ff, V = c->n_vocab;
    const int qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    const int n_slots = 7 * L + 1 + !m->tied;
    size_t per_layer = 2 * (size_t)E + (c->has_qkv_bias ? (size_t)qd + 2 * (size_t)kvd : 0);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    m->small = malloc(((size_t)L * per_layer + E) * sizeof(float));
    m->gf.tensors = calloc((size_t)n_slots, sizeof *m->gf.tensors);
    wslot *slots = calloc((size_t)n_slots, sizeof *slots);
    m->sent_end = calloc((size_t)V, 1);
    m->tok = byte_tokenizer(V);
    if (!m->layers || !m->small || !m->gf.tensors || !slots || !m->sent_end || !m->tok) {
        free(slots);
        model_free(m);
        fail(err, errlen, p->name, "out of memory");
        return NULL;
    }
    m->sent_end['.'] = m->sent_end['!'] = m->sent_end['?'] = 1;

    /* every 2-D weight, in the order of owned_weights */
    static const char *names[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    int ns = 0;
    for (int l = 0; l < L; l++) {
        layer_weights *w = &m->layers[l];
        weight *all[7] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->gate, &w->up, &w->down};
        const int rows[7] = {qd, kvd, kvd, E, F, F, E}, cols[7] = {E, E, E, qd, E, E, F};
        for (int j = 0; j < 7; j++) {
            all[j]->rows = rows[j];
            all[j]->cols = cols[j];
            slots[ns] = (wslot){all[j], ns, names[j]};
            ns++;
        }
    }
    m->output.rows = V;
    m->output.cols = E;
    slots[ns] = (wslot){&m->output, ns, "output"};
    ns++;
    if (!m->tied) {
        m->embd.rows = V;
        m->embd.cols = E;
        slots[ns] = (wslot){&m->embd, ns, "token_embd"};
        ns++;
    }
    size_t total = 0, bytes = 0;
    for (int i = 0; i < ns; i++) {
        total += (size_t)slots[i].w->rows * slots[i].w->cols;
        bytes += (size_t)slots[i].w->rows * quant_row_bytes(wtype, slots[i].w->cols);
    }
    for (int i = 0; i < ns; i++)
        if (!quant_row_bytes(wtype, slots[i].w->cols)) {
            char msg[128];
            snprintf(msg, sizeof msg, "rows of %d are not a whole number of %s blocks", slots[i].w->cols,
                     quant_name(wtype));
            free(slots);
            model_free(m);
            fail(err, errlen, p->name, msg);
            return NULL;
        }
    m->owned_weights = malloc(bytes);
    if (!m->owned_weights) {
        char msg[96];
        snprintf(msg, sizeof msg, "out of memory for %zu MB of %s weights", bytes >> 20, quant_name(wtype));
        free(slots);
        model_free(m);
        fail(err, errlen, p->name, msg);
        return NULL;
    }
    uint8_t *at = m->owned_weights;
    for (int i = 0; i < ns; i++) {
        weight *w = slots[i].w;
        gguf_tensor *t = &m->gf.tensors[i];
        int layer = i < 7 * L ? i / 7 : -1;
        if (layer >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s.weight", layer, slots[i].name);
        else snprintf(t->name, sizeof t->name, "%s.weight", slots[i].name);
        t->n_dims = 2;
        t->ne[0] = w->cols;
        t->ne[1] = w->rows;
        t->ne[2] = t->ne[3] = 1;
        t->type = wtype;
        w->row_bytes = quant_row_bytes(wtype, w->cols);
        t->nbytes = (size_t)w->rows * w->row_bytes;
        t->data = at;
        w->t = t;
        at += t->nbytes;
    }
    m->gf.n_tensors = ns;
    if (m->tied) m->embd = m->output;

    /* fill, in tasks of at most 256 rows */
    fill_job job = {slots, ns, seed, 256, NULL, NULL, 0};
    int ntasks = 0;
    for (int i = 0; i < ns; i++) ntasks += (slots[i].w->rows + 255) / 256;
    job.task_slot = malloc((size_t)ntasks * sizeof(int));
    job.task_row0 = malloc((size_t)ntasks * sizeof(int));
    if (!job.task_slot || !job.task_row0) {
        free(job.task_slot);
        free(job.task_row0);
        free(slots);
        model_free(m);
        fail(err, errlen, p->name, "out of memory");
        return NULL;
    }
    for (int i = 0, t = 0; i < ns; i++)
        for (int r = 0; r < slots[i].w->rows; r += 256, t++) {
            job.task_slot[t] = i;
            job.task_row0[t] = r;
        }
    kb_parallel_for(ntasks, fill_task, &job);
    free(job.task_slot);
    free(job.task_row0);
    free(slots);
    if (job.oom) {
        model_free(m);
        fail(err, errlen, p->name, "out of memory");
        return NULL;
    }

    /* norms near 1, biases small; streams after the 2-D weights' */
    float *s = m->small;
    int id = ns;
    for (int l = 0; l < L; l++) {
        layer_weights *w = &m->layers[l];
        w->attn_norm = s;
        fill_row(s, E, seed, id++, 0, 0.9f, 1.1f);
        s += E;
        w->ffn_norm = s;
        fill_row(s, E, seed, id++, 0, 0.9f, 1.1f);
        s += E;
        if (c->has_qkv_bias) {
            w->bq = s;
            fill_row(s, qd, seed, id++, 0, -0.05f, 0.05f);
            s += qd;
            w->bk = s;
            fill_row(s, kvd, seed, id++, 0, -0.05f, 0.05f);
            s += kvd;
            w->bv = s;
            fill_row(s, kvd, seed, id++, 0, -0.05f, 0.05f);
            s += kvd;
        }
    }
    m->output_norm = s;
    fill_row(s, E, seed, id, 0, 0.9f, 1.1f);

    c->n_params = (int64_t)total + (int64_t)L * (int64_t)per_layer + E;
    m->content_hash = kv_model_hash(m->gf.base, m->gf.size);   /* as model_load's for a file */
    return m;
}

/* The parts after the name: a seed (digits) and a weight type (f32, q8_0, q4_0, q4_k), each at
 * most once, in either order. */
kv_model *model_load_random_spec(const char *spec, char *err, size_t errlen) {
    const char *p = strncmp(spec, "random:", 7) ? spec : spec + 7;
    char name[64];
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len >= sizeof name) {
        snprintf(err, errlen, "%s: preset name too long", spec);
        return NULL;
    }
    memcpy(name, p, len);
    name[len] = 0;
    uint64_t seed = 1;
    int wtype = -1, have_seed = 0;
    static const struct { const char *name; int type; } types[] = {
        {"f32", GGML_F32}, {"q8_0", GGML_Q8_0}, {"q4_0", GGML_Q4_0}, {"q4_k", GGML_Q4_K}};
    while (colon) {
        const char *part = colon + 1;
        colon = strchr(part, ':');
        size_t plen = colon ? (size_t)(colon - part) : strlen(part);
        int t = -1;
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
            if (plen == strlen(types[k].name) && !strncasecmp(part, types[k].name, plen)) t = types[k].type;
        if (t >= 0 && wtype < 0) {
            wtype = t;
            continue;
        }
        char buf[32], *end;
        if (t < 0 && !have_seed && plen > 0 && plen < sizeof buf && part[0] >= '0' && part[0] <= '9') {
            memcpy(buf, part, plen);
            buf[plen] = 0;
            errno = 0;
            unsigned long long v = strtoull(buf, &end, 10);
            if (!errno && !*end) {
                seed = v;
                have_seed = 1;
                continue;
            }
        }
        snprintf(err, errlen, "%s: after the preset name come a seed (a non-negative integer) and a weight type "
                 "(f32, q8_0, q4_0, q4_k), each at most once; '%.*s' is neither", spec, (int)(plen < 40 ? plen : 40), part);
        return NULL;
    }
    return model_load_random_typed(name, seed, wtype, err, errlen);
}

int random_model_shape(const char *name, kv_model_config *out, int *tied) {
    for (int i = 0; i < N_PRESETS; i++) {
        const preset *p = &presets[i];
        if (!name || strcmp(name, p->name)) continue;
        memset(out, 0, sizeof *out);
        snprintf(out->arch, sizeof out->arch, "%s", p->arch);
        snprintf(out->name, sizeof out->name, "random %s", p->name);
        out->n_layer = p->n_layer, out->n_embd = p->n_embd, out->n_head = p->n_head;
        out->n_head_kv = p->n_head_kv, out->head_dim = p->head_dim, out->n_ff = p->n_ff;
        out->n_vocab = p->n_vocab, out->n_ctx_train = p->n_ctx;
        out->rope_base = p->rope_base, out->norm_eps = p->norm_eps;
        out->has_qkv_bias = !strcmp(p->arch, "qwen2");
        preset_rope(p, out);
        model_cap_sliding_window(out);
        if (tied) *tied = p->tied;
        return 0;
    }
    return -1;
}
