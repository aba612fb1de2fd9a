/* A Hugging Face directory as a gguf_file (see hf_load.h). */
#include "hf_load.h"
#include "hf_internal.h"
#include "../kernels/host.h"
#include "quant.h"
#include "safetensors.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    st_file *files;
    int n_files;
    void **owned;        /* permuted Q/K copies, rope_freqs */
    int n_owned;
} hf_aux;

static void aux_free(void *p) {
    hf_aux *a = p;
    if (!a) return;
    for (int i = 0; i < a->n_files; i++) st_close(&a->files[i]);
    for (int i = 0; i < a->n_owned; i++) free(a->owned[i]);
    free(a->files);
    free(a->owned);
    free(a);
}

/* The embedding's rows against config.json's vocab_size (the one check model.c would make
 * later, made before anything is sized by vocab_size). */
static int check_vocab_rows(const char *dir, const hf_config *c, const hf_aux *a, char *err, size_t errlen) {
    for (int i = 0; i < a->n_files; i++) {
        const st_tensor *t = st_find(&a->files[i], "model.embed_tokens.weight");
        if (!t) continue;
        if (t->n_dims == 2 && t->shape[0] != c->n_vocab)
            return hf_fail(err, errlen, dir, "config.json", "field 'vocab_size' is %d but model.embed_tokens.weight has %lld rows",
                           c->n_vocab, (long long)t->shape[0]);
        return 0;
    }
    /* no file holds it: refused now too, before the padding (model.c needs it anyway) */
    return hf_fail(err, errlen, dir, a->n_files > 1 ? "model.safetensors.index.json" : "model.safetensors",
                   "no weight file holds model.embed_tokens.weight");
}

static int open_dir(gguf_file *f, const char *dir_in, int shapes_only, char *err, size_t errlen);

int hf_is_dir(const char *path) {
    struct stat st;
    return !stat(path, &st) && S_ISDIR(st.st_mode);
}

int model_file_open(gguf_file *f, const char *path, char *err, size_t errlen) {
    return hf_is_dir(path) ? hf_open(f, path, err, errlen) : gguf_open(f, path, err, errlen);
}

int model_file_open_shapes(gguf_file *f, const char *path, char *err, size_t errlen) {
    return hf_is_dir(path) ? open_dir(f, path, 1, err, errlen) : gguf_open(f, path, err, errlen);
}

int hf_open_tokenizer(gguf_file *f, const char *dir, char *err, size_t errlen) {
    hf_config c = {.bos = -1, .eos = -1};
    gguf_meta g;
    gm_init(&g);
    if (hf_tok_read(dir, &g, &c, 0, err, errlen)) {
        gm_free(&g);
        return -1;
    }
    size_t size;
    uint8_t *buf = gm_finish(&g, &size);
    if (!buf) return hf_fail(err, errlen, dir, "", "out of memory");
    return gguf_open_mem(f, dir, buf, size, err, errlen);
}

int hf_describe(const gguf_file *f, char *buf, size_t n) {
    if (f->aux_free != aux_free) return 0;
    const hf_aux *a = f->aux;
    double bytes = 0;
    for (int i = 0; i < a->n_files; i++) bytes += (double)a->files[i].size;
    snprintf(buf, n, "%.1f MB in %d safetensors file%s (Hugging Face directory)", bytes / 1048576.0, a->n_files,
             a->n_files == 1 ? "" : "s");
    return 1;
}

/* ---- identity: a 64-bit FNV-style hash over 8-byte words of every file, in order */

static uint64_t hash_bytes(uint64_t h, const uint8_t *p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return (h ^ n) * 0x100000001b3ULL;
}

static int hash_file(uint64_t *h, const char *dir, const char *name, char *err, size_t errlen) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char why[160];
    FILE *f = kb_fopen_regular(path, KB_CAP_JSON, why, sizeof why);
    if (!f) return errno == ENOENT ? 0 : hf_fail(err, errlen, dir, name, "%s", why);
    static uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) *h = hash_bytes(*h, buf, n);
    fclose(f);
    return 0;
}

/* ---- weight files */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The shard names: model.safetensors.index.json's weight_map values, or model.safetensors. */
static int list_shards(const char *dir, char ***names, int *n, char *err, size_t errlen) {
    json_value idx;
    static const char IDX[] = "model.safetensors.index.json";
    int r = hf_read_json(dir, IDX, 1, &idx, NULL, NULL, err, errlen);
    if (r < 0) return -1;
    *n = 0;
    if (r == 1) {
        *names = malloc(sizeof **names);
        if (!*names || !((*names)[0] = strdup("model.safetensors"))) return hf_fail(err, errlen, dir, IDX, "out of memory");
        *n = 1;
        return 0;
    }
    const json_value *wm = json_get(&idx, "weight_map");
    if (!wm || wm->type != JSON_OBJECT || wm->n == 0) {
        json_free(&idx);
        return hf_fail(err, errlen, dir, IDX, "field 'weight_map' is missing or empty");
    }
    *names = calloc((size_t)wm->n, sizeof **names);
    if (!*names) { json_free(&idx); return hf_fail(err, errlen, dir, IDX, "out of memory"); }
    for (int i = 0; i < wm->n; i++) {
        const json_value *v = &wm->items[i];
        /* a shard is a file of this directory: no path that leaves it (nor an absolute one) */
        if (v->type != JSON_STRING || !v->len || strchr(v->str, '/') || !strcmp(v->str, ".") || !strcmp(v->str, "..")) {
            /* the message before json_free: it quotes the index's own key and value */
            if (v->type != JSON_STRING)
                hf_fail(err, errlen, dir, IDX, "field 'weight_map.%.64s' is not a string (a shard's file name)", wm->keys[i]);
            else
                hf_fail(err, errlen, dir, IDX, "field 'weight_map.%.64s' = '%.64s' is not a file name in the directory "
                        "(no '/', '.' or '..')", wm->keys[i], v->str);
            json_free(&idx);
            return -1;
        }
        int seen = 0;
        for (int k = 0; k < *n && !seen; k++) seen = !strcmp((*names)[k], v->str);
        if (!seen && !((*names)[(*n)++] = strdup(v->str))) { json_free(&idx); return hf_fail(err, errlen, dir, IDX, "out of memory"); }
    }
    json_free(&idx);
    qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return 0;
}

/* The GGUF name of an HF tensor into out (0), 1 to skip it, -1 if unknown. */
static int gguf_name(const char *hf, const hf_config *c, char *out, size_t cap, int *layer) {
    static const struct { const char *hf, *gguf; } top[] = {
        {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"}};
    static const struct { const char *hf, *gguf; } blk[] = {
        {"input_layernorm.weight", "attn_norm.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},   {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},   {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},       {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.bias", "attn_v.bias"},       {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},        {"mlp.down_proj.weight", "ffn_down.weight"}};
    *layer = -1;
    size_t n = strlen(hf);
    if (n > 22 && !strcmp(hf + n - 22, ".rotary_emb.inv_freq")) return 1;   /* recomputed, as the converter does */
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(hf, top[i].hf)) {
            if (c->tied && !strcmp(hf, "lm_head.weight")) return 1;   /* transformers ties it to the embedding */
            snprintf(out, cap, "%s", top[i].gguf);
            return 0;
        }
    int l, used = 0;
    if (sscanf(hf, "model.layers.%d.%n", &l, &used) != 1 || !used || l < 0 || l >= c->n_layer) return -1;
    for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++)
        if (!strcmp(hf + used, blk[i].hf)) {
            snprintf(out, cap, "blk.%d.%s", l, blk[i].gguf);
            *layer = l;
            return 0;
        }
    return -1;
}

/* llama's Q/K rows as convert_hf_to_gguf's LlamaModel.permute leaves them: per head,
 * row i*2 + j takes row j*hd/2 + i (transformers rotates halves, llama.cpp pairs). */
static void *permute_rows(const uint8_t *src, int heads, int hd, size_t row_bytes) {
    uint8_t *dst = malloc((size_t)heads * hd * row_bytes);
    if (!dst) return NULL;
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < hd / 2; i++)
            for (int j = 0; j < 2; j++)
                memcpy(dst + ((size_t)h * hd + i * 2 + j) * row_bytes, src + ((size_t)h * hd + j * hd / 2 + i) * row_bytes,
                       row_bytes);
    return dst;
}

/* llama3 rope scaling as the converter's rope_freqs tensor (LlamaModel.generate_extra_tensors):
 * float32 frequencies, the wavelength bands in double, each factor rounded to float32. */
static float *llama3_rope_freqs(const hf_config *c) {
    int dim = c->head_dim, n = dim / 2;
    float *f = malloc((size_t)n * sizeof *f);
    if (!f) return NULL;
    double lo_wl = c->l3_orig_ctx / c->l3_low, hi_wl = c->l3_orig_ctx / c->l3_high;
    for (int i = 0; i < n; i++) {
        float freq = 1.0f / powf((float)c->rope_theta, (float)(2 * i) / (float)dim);
        double wl = 2 * M_PI / (double)freq;
        if (wl < hi_wl) f[i] = 1.0f;
        else if (wl > lo_wl) f[i] = (float)c->l3_factor;
        else {
            double smooth = (c->l3_orig_ctx / wl - c->l3_low) / (c->l3_high - c->l3_low);
            f[i] = (float)(1.0 / ((1 - smooth) / c->l3_factor + smooth));
        }
    }
    return f;
}

static int keep(hf_aux *a, void *p) {
    void **o = realloc(a->owned, (size_t)(a->n_owned + 1) * sizeof *o);
    if (!o) return -1;
    a->owned = o;
    a->owned[a->n_owned++] = p;
    return 0;
}

static int build_tensors(const char *dir, const hf_config *c, hf_aux *a, int shapes_only, gguf_tensor **out,
                         int64_t *n_out, char *err, size_t errlen) {
    int total = 1;   /* room for rope_freqs */
    for (int i = 0; i < a->n_files; i++) total += a->files[i].n;
    gguf_tensor *ts = calloc((size_t)total, sizeof *ts);
    if (!ts) return hf_fail(err, errlen, dir, "", "out of memory");
    int64_t n = 0;
    int have_output = 0;
    for (int fi = 0; fi < a->n_files; fi++) {
        const st_file *sf = &a->files[fi];
        const char *fname = strrchr(sf->path, '/') + 1;
        for (int i = 0; i < sf->n; i++) {
            const st_tensor *s = &sf->t[i];
            gguf_tensor *t = &ts[n];
            int layer, r = gguf_name(s->name, c, t->name, sizeof t->name, &layer);
            if (r == 1) continue;
            if (r < 0) {
                free(ts);
                return hf_fail(err, errlen, dir, fname, "tensor %s is not one of the %s tensors kvbench knows", s->name, c->arch);
            }
            if (s->type < 0) {
                free(ts);
                return hf_fail(err, errlen, dir, fname, "tensor %s has dtype %s, not supported (F32, F16, BF16)", s->name, s->dtype);
            }
            if (s->n_dims < 1 || s->n_dims > 2) {
                free(ts);
                return hf_fail(err, errlen, dir, fname, "tensor %s has %d dimensions (1 or 2)", s->name, s->n_dims);
            }
            t->n_dims = s->n_dims;
            for (int d = 0; d < 4; d++) t->ne[d] = 1;
            for (int d = 0; d < s->n_dims; d++) t->ne[d] = s->shape[s->n_dims - 1 - d];   /* row-major -> ne */
            t->type = s->type;
            t->nbytes = s->nbytes;
            t->data = s->data;
            have_output |= !strcmp(t->name, "output.weight");
            int is_q = strstr(t->name, ".attn_q.") != NULL, is_k = strstr(t->name, ".attn_k.") != NULL;
            if (!strcmp(c->arch, "llama") && (is_q || is_k) && !shapes_only) {
                int heads = is_q ? c->n_head : c->n_head_kv;
                long long rows = (long long)t->ne[1];
                if (rows != (long long)heads * c->head_dim || s->n_dims != 2) {
                    free(ts);
                    return hf_fail(err, errlen, dir, fname, "tensor %s has %lld rows, expected %d heads x %d", s->name,
                                   rows, heads, c->head_dim);
                }
                void *p = permute_rows(s->data, heads, c->head_dim, s->nbytes / (size_t)t->ne[1]);
                if (!p || keep(a, p)) {
                    free(p);
                    free(ts);
                    return hf_fail(err, errlen, dir, fname, "out of memory");
                }
                t->data = p;
            }
            n++;
        }
    }
    if (!c->tied && !have_output) {
        free(ts);
        return hf_fail(err, errlen, dir, "config.json", "field 'tie_word_embeddings' is false but no weight file holds lm_head.weight");
    }
    if (c->llama3) {
        float *f = llama3_rope_freqs(c);
        if (!f || keep(a, f)) {
            free(f);
            free(ts);
            return hf_fail(err, errlen, dir, "config.json", "out of memory");
        }
        gguf_tensor *t = &ts[n++];
        snprintf(t->name, sizeof t->name, "rope_freqs.weight");
        t->n_dims = 1;
        t->ne[0] = c->head_dim / 2;
        t->ne[1] = t->ne[2] = t->ne[3] = 1;
        t->type = GGML_F32;
        t->nbytes = (size_t)t->ne[0] * 4;
        t->data = f;
    }
    *out = ts;
    *n_out = n;
    return 0;
}

/* The weight files (model.safetensors, or the shards its index names) opened into a. */
static int open_shards(const char *dir, hf_aux *a, char ***shards, int *n_shards, char *err, size_t errlen) {
    if (list_shards(dir, shards, n_shards, err, errlen)) return -1;
    a->files = calloc((size_t)*n_shards, sizeof *a->files);
    if (!a->files) return hf_fail(err, errlen, dir, "", "out of memory");
    for (int i = 0; i < *n_shards; i++) {
        char path[1024], serr[400];
        const char *name = (*shards)[i];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (st_open(&a->files[i], path, serr, sizeof serr)) {
            snprintf(err, errlen, "%s%s", serr, *n_shards > 1 || strcmp(name, "model.safetensors")
                                                     ? " (a shard named in model.safetensors.index.json)" : "");
            return -1;
        }
        a->n_files++;
    }
    return 0;
}

static int open_dir(gguf_file *f, const char *dir_in, int shapes_only, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", dir_in);
    for (size_t l = strlen(dir); l > 1 && dir[l - 1] == '/'; l--) dir[l - 1] = 0;
    gguf_meta g;
    hf_config c;
    hf_aux *a = calloc(1, sizeof *a);
    char **shards = NULL;
    int n_shards = 0;
    gguf_tensor *ts = NULL;
    int64_t nt = 0;
    if (!a) return hf_fail(err, errlen, dir, "", "out of memory");
    gm_init(&g);
    if (hf_config_read(dir, &g, &c, err, errlen)) goto bad;
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    gm_str(&g, "general.architecture", c.arch, strlen(c.arch));
    gm_str(&g, "general.name", base, strlen(base));
    /* The weights are opened before the tokenizer, which pads its ids out to vocab_size:
     * a vocab_size the embedding does not have is refused here, before it builds millions
     * of placeholder tokens. A weight file's own error still comes after the tokenizer's. */
    char werr[512] = "";
    if (!open_shards(dir, a, &shards, &n_shards, werr, sizeof werr) && check_vocab_rows(dir, &c, a, err, errlen)) goto bad;
    if (hf_tok_read(dir, &g, &c, werr[0] != 0, err, errlen)) goto bad;
    if (werr[0]) { snprintf(err, errlen, "%s", werr); goto bad; }
    uint64_t h = 0xcbf29ce484222325ULL;
    static const char *json_files[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                       "model.safetensors.index.json", "chat_template.jinja"};
    for (size_t i = 0; i < sizeof json_files / sizeof json_files[0]; i++)
        if (hash_file(&h, dir, json_files[i], err, errlen)) goto bad;
    for (int i = 0; i < a->n_files; i++) h = hash_bytes(h, a->files[i].base, a->files[i].size);
    gm_u64(&g, "kvbench.hf.content_hash", h);
    if (build_tensors(dir, &c, a, shapes_only, &ts, &nt, err, errlen)) goto bad;
    size_t size;
    uint8_t *buf = gm_finish(&g, &size);
    if (!buf) { hf_fail(err, errlen, dir, "", "out of memory"); goto bad; }
    if (gguf_open_mem(f, dir, buf, size, err, errlen)) goto bad;   /* frees buf on failure */
    f->aux = a;
    f->aux_free = aux_free;
    a = NULL;
    if (gguf_set_tensors(f, ts, nt, err, errlen)) {
        ts = NULL;
        gguf_close(f);
        goto bad;
    }
    ts = NULL;
    for (int i = 0; i < n_shards; i++) free(shards[i]);
    free(shards);
    return 0;
bad:
    gm_free(&g);
    aux_free(a);
    free(ts);
    for (int i = 0; i < n_shards; i++) free(shards[i]);
    free(shards);
    return -1;
}

int hf_open(gguf_file *f, const char *dir, char *err, size_t errlen) { return open_dir(f, dir, 0, err, errlen); }
