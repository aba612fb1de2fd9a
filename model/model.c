/* Loading a model: configuration from GGUF metadata, every tensor found and its shape
 * checked against the hyperparameters, norms copied to f32, the tokenizer. */
#include "engine.h"
#include "hf_load.h"
#include "quant.h"
#include "random_model.h"
#include "../kernels/host.h"
#include "../kernels/model_hash.h"
#ifdef KB_CUDA
#include "cuda_model.h"
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MODEL "SmolLM2-135M-Instruct.Q4_1.gguf"

const char *model_default_path(void) {
    static char path[1024];
    const char *env = getenv("KVBENCH_MODEL");
    if (env && *env) return env;
    return kb_cache_path(DEFAULT_MODEL, path, sizeof path);
}

/* "PATH: message" into err. */
static int fail(const kv_model *m, char *err, size_t errlen, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", m->gf.path, msg);
    return -1;
}

static int meta_int(kv_model *m, const char *key, int64_t deflt, int64_t lo, int64_t hi,
                    int64_t *out, char *err, size_t errlen) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->cfg.arch, key);
    if (!gguf_find(&m->gf, full)) {
        if (deflt < 0) return fail(m, err, errlen, "metadata key %s is missing", full);
        *out = deflt;
        return 0;
    }
    if (gguf_get_int(&m->gf, full, out))
        return fail(m, err, errlen, "metadata key %s is not an integer", full);
    if (*out < lo || *out > hi)
        return fail(m, err, errlen, "metadata key %s = %lld is outside [%lld, %lld]", full,
                    (long long)*out, (long long)lo, (long long)hi);
    return 0;
}

/* A positive float key no larger than hi. */
static int meta_f32(kv_model *m, const char *key, float deflt, int required, double hi, float *out,
                    char *err, size_t errlen) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->cfg.arch, key);
    if (!gguf_find(&m->gf, full)) {
        if (required) return fail(m, err, errlen, "metadata key %s is missing", full);
        *out = deflt;
        return 0;
    }
    if (gguf_get_f32(&m->gf, full, out))
        return fail(m, err, errlen, "metadata key %s is not a float", full);
    if (!(*out > 0)) return fail(m, err, errlen, "metadata key %s = %g is not positive", full, *out);
    if (*out > hi) return fail(m, err, errlen, "metadata key %s = %g is outside (0, %g]", full, *out, hi);
    return 0;
}

static void shape_str(char *buf, size_t len, const int64_t *ne, int nd) {
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < nd && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)ne[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

/* The tensor called name with shape [ne0] (ne1 == 0) or [ne0, ne1]; NULL with err if
 * missing (unless optional, then NULL with err empty), misshapen or of an unsupported type. */
static const gguf_tensor *find_tensor(kv_model *m, const char *name, int64_t ne0, int64_t ne1,
                                      int optional, char *err, size_t errlen) {
    err[0] = 0;
    const gguf_tensor *t = gguf_tensor_find(&m->gf, name);
    if (!t) {
        if (!optional) fail(m, err, errlen, "tensor %s is missing", name);
        return NULL;
    }
    int64_t want[2] = {ne0, ne1 ? ne1 : 1};
    int nd_want = ne1 ? 2 : 1, ok = 1;
    for (int i = 0; i < 4; i++) {
        int64_t w = i < 2 ? want[i] : 1;
        if ((i < t->n_dims ? t->ne[i] : 1) != w) ok = 0;
    }
    if (!ok) {
        char have[96], exp[96];
        shape_str(have, sizeof have, t->ne, t->n_dims);
        shape_str(exp, sizeof exp, want, nd_want);
        fail(m, err, errlen, "tensor %s has shape %s but expected %s", name, have, exp);
        return NULL;
    }
    int block, bytes;
    if (quant_info(t->type, &block, &bytes)) {
        fail(m, err, errlen, "tensor %s has type %s, which is not supported", name, quant_name(t->type));
        return NULL;
    }
    if (ne0 % block) {
        fail(m, err, errlen, "tensor %s: row of %lld is not a multiple of the %s block (%d)", name,
             (long long)ne0, quant_name(t->type), block);
        return NULL;
    }
    if (t->nbytes < quant_row_bytes(t->type, ne0) * (size_t)want[1]) {
        fail(m, err, errlen, "tensor %s holds %zu bytes, too few for its shape", name, t->nbytes);
        return NULL;
    }
    return t;
}

static int find_weight(kv_model *m, weight *w, const char *name, int64_t cols, int64_t rows,
                       char *err, size_t errlen) {
    const gguf_tensor *t = find_tensor(m, name, cols, rows, 0, err, errlen);
    if (!t) return -1;
    w->t = t;
    w->cols = (int)cols;
    w->rows = (int)rows;
    w->row_bytes = quant_row_bytes(t->type, cols);
    return 0;
}

/* A 1-D tensor [n] copied to f32 at dst; optional tensors that are absent leave *dst NULL. */
static int find_vector(kv_model *m, float **dst, float *store, const char *name, int64_t n,
                       int optional, char *err, size_t errlen) {
    const gguf_tensor *t = find_tensor(m, name, n, 0, optional, err, errlen);
    if (!t) {
        *dst = NULL;
        return err[0] ? -1 : 0;
    }
    dequant_row(t->type, t->data, store, n);
    *dst = store;
    return 0;
}

static int read_config(kv_model *m, char *err, size_t errlen) {
    kv_model_config *c = &m->cfg;
    gguf_str s;
    if (gguf_get_str(&m->gf, "general.architecture", &s))
        return fail(m, err, errlen, "metadata key general.architecture is missing");
    snprintf(c->arch, sizeof c->arch, "%.*s", (int)(s.len < 31 ? s.len : 31), s.ptr);
    if (strcmp(c->arch, "llama") && strcmp(c->arch, "qwen2"))
        return fail(m, err, errlen, "architecture '%.*s' is not supported (llama, qwen2)",
                    (int)(s.len < 64 ? s.len : 64), s.ptr);
    if (!gguf_get_str(&m->gf, "general.name", &s))
        snprintf(c->name, sizeof c->name, "%.*s", (int)(s.len < 127 ? s.len : 127), s.ptr);
    int64_t v;
    if (meta_int(m, "block_count", -1, 1, 1024, &v, err, errlen)) return -1;
    c->n_layer = (int)v;
    if (meta_int(m, "embedding_length", -1, 1, 1 << 16, &v, err, errlen)) return -1;
    c->n_embd = (int)v;
    if (meta_int(m, "feed_forward_length", -1, 1, 1 << 18, &v, err, errlen)) return -1;
    c->n_ff = (int)v;
    if (meta_int(m, "attention.head_count", -1, 1, 1024, &v, err, errlen)) return -1;
    c->n_head = (int)v;
    if (meta_int(m, "attention.head_count_kv", c->n_head, 1, c->n_head, &v, err, errlen)) return -1;
    c->n_head_kv = (int)v;
    if (c->n_head % c->n_head_kv)
        return fail(m, err, errlen, "%d heads are not a multiple of %d kv heads", c->n_head, c->n_head_kv);
    if (meta_int(m, "context_length", -1, 1, 1 << 24, &v, err, errlen)) return -1;
    c->n_ctx_train = (int)v;
    int64_t hd_default = c->n_embd % c->n_head ? -1 : c->n_embd / c->n_head, kl, vl;
    if (meta_int(m, "attention.key_length", hd_default, 2, 1024, &kl, err, errlen)) return -1;
    if (meta_int(m, "attention.value_length", kl, 2, 1024, &vl, err, errlen)) return -1;
    if (kl != vl || kl % 2)
        return fail(m, err, errlen, "key length %lld and value length %lld must be equal and even",
                    (long long)kl, (long long)vl);
    c->head_dim = (int)kl;
    if (meta_int(m, "rope.dimension_count", c->head_dim, 2, c->head_dim, &v, err, errlen)) return -1;
    if (v % 2) return fail(m, err, errlen, "rope dimension count %lld is odd", (long long)v);
    m->n_rot = (int)v;
    if (meta_f32(m, "rope.freq_base", 10000.0f, 0, 1e30, &c->rope_base, err, errlen)) return -1;
    if (meta_f32(m, "attention.layer_norm_rms_epsilon", 0, 1, 1e30, &c->norm_eps, err, errlen)) return -1;
    c->has_qkv_bias = !strcmp(c->arch, "qwen2");
    m->rope_neox = !strcmp(c->arch, "qwen2");
    if (meta_int(m, "attention.sliding_window", 0, 0, 1 << 24, &v, err, errlen)) return -1;
    c->sliding_window = (int)v;
    model_cap_sliding_window(c);
    return 0;
}

/* RoPE scaling into cfg.rope, from the <arch>.rope.scaling.* keys and the rope_freqs
 * tensor as llama.cpp reads them (convert_hf_to_gguf.py writes llama3 as rope_freqs,
 * yarn as type, factor and original_context_length). What the engine does not implement
 * is refused by the key's name, never ignored. */
static int read_rope_scaling(kv_model *m, char *err, size_t errlen) {
    kv_rope_scaling *r = &m->cfg.rope;
    char prefix[64], key[128];
    snprintf(prefix, sizeof prefix, "%s.rope.scaling.", m->cfg.arch);
    memset(r, 0, sizeof *r);
    int half = m->n_rot / 2, any = 0;
    const gguf_tensor *t = find_tensor(m, "rope_freqs.weight", half, 0, 1, err, errlen);
    if (!t && err[0]) return -1;
    if (t) {
        r->freq_factors = malloc((size_t)half * sizeof(float));
        if (!r->freq_factors) return fail(m, err, errlen, "out of memory");
        dequant_row(t->type, t->data, r->freq_factors, half);
        r->n_freq_factors = half;
    }
    static const char *const refused[] = {"alpha", "yarn_log_multiplier", "yarn_ext_factor", "yarn_attn_factor"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, refused[i]);
        if (gguf_find(&m->gf, key)) return fail(m, err, errlen, "metadata key %s is not supported", key);
    }
    for (int64_t i = 0; i < m->gf.n_kv; i++) {
        const gguf_str *k = &m->gf.kv[i].key;
        if (k->len >= strlen(prefix) && !memcmp(k->ptr, prefix, strlen(prefix))) any = 1;
    }
    if (!any) return 0;
    snprintf(key, sizeof key, "%stype", prefix);
    gguf_str s;
    if (gguf_get_str(&m->gf, key, &s))
        return fail(m, err, errlen, "rope scaling keys present but %s is missing", key);
#define IS(lit) (s.len == sizeof lit - 1 && !memcmp(s.ptr, lit, sizeof lit - 1))
    if (IS("none")) r->type = KV_ROPE_NONE;
    else if (IS("linear")) r->type = KV_ROPE_LINEAR;
    else if (IS("yarn")) r->type = KV_ROPE_YARN;
    else if (IS("dynamic"))
        return fail(m, err, errlen, "%s 'dynamic' (dynamic NTK, frequencies that change with the sequence "
                    "length) is not supported (none, linear, yarn; llama3 as the rope_freqs tensor)", key);
    else
        return fail(m, err, errlen, "%s '%.*s' is not supported (none, linear, yarn; llama3 as the rope_freqs tensor)",
                    key, (int)(s.len < 64 ? s.len : 64), s.ptr);
#undef IS
    float f = 1;
    if (r->type != KV_ROPE_NONE) {
        if (meta_f32(m, "rope.scaling.factor", 0, 1, KV_ROPE_FACTOR_MAX, &f, err, errlen)) return -1;
        r->factor = f;
    }
    if (meta_f32(m, "rope.scaling.attn_factor", 1, 0, KV_ROPE_ATTN_FACTOR_MAX, &f, err, errlen)) return -1;
    if (r->type != KV_ROPE_YARN && f != 1)
        return fail(m, err, errlen, "metadata key %sattn_factor = %g is only supported with yarn", prefix, f);
    if (r->type == KV_ROPE_YARN) {
        /* llama.cpp: cos and sin times attn_factor * (1 + 0.1 ln factor), the original
         * context defaulting to the file's context length; transformers' beta defaults 32 and 1 */
        r->attn_factor = f * rope_yarn_mscale(r->factor);
        int64_t v;
        if (meta_int(m, "rope.scaling.original_context_length", m->cfg.n_ctx_file, 1, 1 << 24, &v, err, errlen))
            return -1;
        r->orig_ctx = (int)v;
        float b;
        if (meta_f32(m, "rope.scaling.yarn_beta_fast", 32, 0, KV_ROPE_BETA_MAX, &b, err, errlen)) return -1;
        r->beta_fast = b;
        if (meta_f32(m, "rope.scaling.yarn_beta_slow", 1, 0, KV_ROPE_BETA_MAX, &b, err, errlen)) return -1;
        r->beta_slow = b;
    }
    return 0;
}

void model_cap_sliding_window(kv_model_config *c) {
    c->n_ctx_file = c->n_ctx_train;
    if (c->sliding_window > 0 && c->sliding_window < c->n_ctx_train) c->n_ctx_train = c->sliding_window;
}

const char *model_ctx_note(const kv_model_config *c) {
    return c->n_ctx_train < c->n_ctx_file
               ? " (capped at the sliding window the file declares, GGUF attention.sliding_window or config.json "
                 "sliding_window: the engine has no window mask)"
               : "";
}

static int load_weights(kv_model *m, char *err, size_t errlen) {
    const kv_model_config *c = &m->cfg;
    int64_t E = c->n_embd, qd = (int64_t)c->n_head * c->head_dim, kvd = (int64_t)c->n_head_kv * c->head_dim;
    size_t per_layer = 2 * E + (c->has_qkv_bias ? qd + 2 * kvd : 0);
    m->small = malloc(((size_t)c->n_layer * per_layer + E) * sizeof(float));
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->small || !m->layers) return fail(m, err, errlen, "out of memory");
    float *p = m->small;
    char name[64];
    for (int l = 0; l < c->n_layer; l++) {
        layer_weights *w = &m->layers[l];
#define NAME(s) (snprintf(name, sizeof name, "blk.%d.%s", l, s), name)
        if (find_vector(m, &w->attn_norm, p, NAME("attn_norm.weight"), E, 0, err, errlen)) return -1;
        p += E;
        if (find_vector(m, &w->ffn_norm, p, NAME("ffn_norm.weight"), E, 0, err, errlen)) return -1;
        p += E;
        if (c->has_qkv_bias) {
            if (find_vector(m, &w->bq, p, NAME("attn_q.bias"), qd, 0, err, errlen)) return -1;
            p += qd;
            if (find_vector(m, &w->bk, p, NAME("attn_k.bias"), kvd, 0, err, errlen)) return -1;
            p += kvd;
            if (find_vector(m, &w->bv, p, NAME("attn_v.bias"), kvd, 0, err, errlen)) return -1;
            p += kvd;
        }
        if (find_weight(m, &w->wq, NAME("attn_q.weight"), E, qd, err, errlen) ||
            find_weight(m, &w->wk, NAME("attn_k.weight"), E, kvd, err, errlen) ||
            find_weight(m, &w->wv, NAME("attn_v.weight"), E, kvd, err, errlen) ||
            find_weight(m, &w->wo, NAME("attn_output.weight"), qd, E, err, errlen) ||
            find_weight(m, &w->gate, NAME("ffn_gate.weight"), E, c->n_ff, err, errlen) ||
            find_weight(m, &w->up, NAME("ffn_up.weight"), E, c->n_ff, err, errlen) ||
            find_weight(m, &w->down, NAME("ffn_down.weight"), c->n_ff, E, err, errlen))
            return -1;
#undef NAME
    }
    if (find_vector(m, &m->output_norm, p, "output_norm.weight", E, 0, err, errlen)) return -1;
    if (find_weight(m, &m->embd, "token_embd.weight", E, c->n_vocab, err, errlen)) return -1;
    m->tied = !gguf_tensor_find(&m->gf, "output.weight");
    if (m->tied) m->output = m->embd;
    else if (find_weight(m, &m->output, "output.weight", E, c->n_vocab, err, errlen)) return -1;
    return 0;
}

/* 1 where the piece ends with . ! ? before any closing quotes, brackets and spaces,
 * or holds a blank line. */
static int piece_ends_sentence(const char *s, int n) {
    if (n <= 0) return 0;
    for (int i = 0; i + 1 < n; i++)
        if (s[i] == '\n' && s[i + 1] == '\n') return 1;
    int i = n - 1;
    for (;;) {
        while (i >= 0 && s[i] && strchr(" \t\r\n\"')]}", s[i])) i--;
        /* the UTF-8 closing quotes ’ ” (E2 80 99, E2 80 9D) */
        if (i >= 2 && (uint8_t)s[i - 2] == 0xE2 && (uint8_t)s[i - 1] == 0x80 &&
            ((uint8_t)s[i] == 0x99 || (uint8_t)s[i] == 0x9D)) {
            i -= 3;
            continue;
        }
        break;
    }
    return i >= 0 && (s[i] == '.' || s[i] == '!' || s[i] == '?');
}

static int build_sent_end(kv_model *m, char *err, size_t errlen) {
    int nv = m->cfg.n_vocab, nt = tok_vocab(m->tok);
    m->sent_end = calloc((size_t)nv, 1);
    if (!m->sent_end) return fail(m, err, errlen, "out of memory");
    char buf[256];
    for (int id = 0; id < nt && id < nv; id++) {
        int len = tok_piece(m->tok, id, 0, buf, sizeof buf);
        if (len > (int)sizeof buf - 1) len = (int)sizeof buf - 1;
        m->sent_end[id] = (uint8_t)piece_ends_sentence(buf, len);
    }
    return 0;
}

kv_model *model_load(const char *path, char *err, size_t errlen) {
    /* random:NAME[:SEED]: a named architecture with seeded random weights (latency and
     * memory runs; meaningless for accuracy) */
    if (!strncmp(path, "random:", 7)) return model_load_random_spec(path, err, errlen);
    char named[1024];
    if (!(path = model_resolve_name(path, named, sizeof named, err, errlen))) return NULL;
    kv_model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    if (model_file_open(&m->gf, path, err, errlen)) {   /* a GGUF, or a Hugging Face directory */
        free(m);
        return NULL;
    }
    if (read_config(m, err, errlen) || read_rope_scaling(m, err, errlen)) goto bad;
    char rerr[256];
    if (rope_setup(m, rerr, sizeof rerr)) {
        fail(m, err, errlen, "%s", rerr);
        goto bad;
    }
    char terr[384];
    m->tok = tok_load(&m->gf, terr, sizeof terr);
    if (!m->tok) {
        if (!strncmp(terr, path, strlen(path))) snprintf(err, errlen, "%s", terr);
        else fail(m, err, errlen, "tokenizer: %s", terr);
        goto bad;
    }
    int64_t nv;
    if (meta_int(m, "vocab_size", tok_vocab(m->tok), 1, 1 << 24, &nv, err, errlen)) goto bad;
    m->cfg.n_vocab = (int)nv;
    if (tok_vocab(m->tok) > m->cfg.n_vocab) {
        fail(m, err, errlen, "the tokenizer has %d tokens but the model's vocabulary is %d",
             tok_vocab(m->tok), m->cfg.n_vocab);
        goto bad;
    }
    if (load_weights(m, err, errlen) || build_sent_end(m, err, errlen)) goto bad;
    for (int64_t i = 0; i < m->gf.n_tensors; i++) {
        int64_t n = 1;
        for (int d = 0; d < 4; d++) n *= m->gf.tensors[i].ne[d];
        m->cfg.n_params += n;
    }
    m->content_hash = kv_model_hash(m->gf.base, m->gf.size);   /* the file's identity, once: ~0.2 s for SmolLM2 */
    m->prefill_chunk = 512;
    return m;
bad:
    model_free(m);
    return NULL;
}

void model_free(kv_model *m) {
    if (!m) return;
#ifdef KB_CUDA
    cuda_model_release(m);   /* its device copy, if one was uploaded */
#endif
    engine_scratch_free(m);
    tok_free(m->tok);
    free(m->layers);
    free(m->small);
    free(m->cfg.rope.freq_factors);
    free(m->owned_weights);
    free(m->sent_end);
    gguf_close(&m->gf);
    free(m);
}

const kv_model_config *model_config(const kv_model *m) { return &m->cfg; }
const kv_tokenizer *model_tokenizer(const kv_model *m) { return m->tok; }
const gguf_file *model_gguf(const kv_model *m) { return &m->gf; }
uint64_t model_content_hash(const kv_model *m) { return m->content_hash; }
int model_sent_end(const kv_model *m, int id) {
    return id >= 0 && id < m->cfg.n_vocab ? m->sent_end[id] : 0;
}
void model_set_prefill_chunk(kv_model *m, int chunk) { m->prefill_chunk = chunk > 0 ? chunk : 512; }
void model_set_prefill_surprisal(kv_model *m, int on) { m->prefill_no_surprisal = !on; }
void model_set_f32_activations(kv_model *m, int on) { m->q8_activations = !on; }

int model_activations_parse(const char *s, int *q8) {
    if (strcmp(s, "f32") && strcmp(s, "q8")) return -1;
    *q8 = s[0] == 'q';
    return 0;
}
