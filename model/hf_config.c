/* config.json of a Hugging Face checkpoint as the GGUF metadata llama.cpp's
 * convert_hf_to_gguf.py writes for it (LlamaModel, Qwen2Model): the same keys and
 * values, so model.c reads an HF directory exactly as it reads the converted file. */
#include "hf_internal.h"
#include "engine.h"
#include "model.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char CFG[] = "config.json";

/* An integer member in [lo, hi]; deflt < 0 means required. */
static int int_in(const char *dir, const json_value *o, const char *where, const char *key, long deflt, long lo,
                  long hi, int *out, char *err, size_t errlen) {
    double v;
    int r = hf_num(o, key, &v);
    if (r < 0) return hf_fail(err, errlen, dir, CFG, "field '%s%s' is not a number", where, key);
    if (r == 0) {
        if (deflt < 0) return hf_fail(err, errlen, dir, CFG, "field '%s%s' is missing", where, key);
        v = (double)deflt;
    }
    if (v != floor(v) || v < lo || v > hi)
        return hf_fail(err, errlen, dir, CFG, "field '%s%s' = %g is not an integer in [%ld, %ld]", where, key, v, lo, hi);
    *out = (int)v;
    return 0;
}

static int int_field(const char *dir, const json_value *o, const char *key, long deflt, long lo, long hi,
                     int *out, char *err, size_t errlen) {
    return int_in(dir, o, "", key, deflt, lo, hi, out, err, errlen);
}

/* A positive number no larger than hi, nor below 1e-30 (it goes into the GGUF metadata as
 * a float32: 0 there would be refused under the converted key); errors name the user's
 * key and value. */
static int pos_field(const char *dir, const json_value *o, const char *where, const char *key, double deflt,
                     double hi, double *out, char *err, size_t errlen) {
    int r = hf_num(o, key, out);
    if (r < 0) return hf_fail(err, errlen, dir, CFG, "field '%s%s' is not a number", where, key);
    if (r == 0) {
        if (deflt < 0) return hf_fail(err, errlen, dir, CFG, "field '%s%s' is missing", where, key);
        *out = deflt;
    }
    if (!(*out > 0)) return hf_fail(err, errlen, dir, CFG, "field '%s%s' = %g is not positive", where, key, *out);
    if (*out > hi) return hf_fail(err, errlen, dir, CFG, "field '%s%s' = %g is outside (0, %g]", where, key, *out, hi);
    if (*out < 1e-30) return hf_fail(err, errlen, dir, CFG, "field '%s%s' = %g is below 1e-30", where, key, *out);
    return 0;
}

/* bos_token_id / eos_token_id into *id: an id, a list of ids (the first), or absent or
 * null (-1); anything else is refused by its key (the vocabulary check is hf_tok.c's). */
static int token_id(const char *dir, const json_value *o, const char *key, int *id, char *err, size_t errlen) {
    const json_value *v = json_get(o, key);
    *id = -1;
    if (v && v->type == JSON_ARRAY) {
        if (v->n == 0) return 0;
        v = &v->items[0];
    }
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER) return hf_fail(err, errlen, dir, CFG, "field '%s' is not a token id (a number)", key);
    if (v->num != floor(v->num) || v->num < 0 || v->num >= 1 << 24)
        return hf_fail(err, errlen, dir, CFG, "field '%s' = %g is not a token id (an integer in [0, %d))", key, v->num,
                       1 << 24);
    *id = (int)v->num;
    return 0;
}

static void key(char *buf, size_t n, const hf_config *c, const char *k) { snprintf(buf, n, "%s.%s", c->arch, k); }

/* rope_scaling: linear and yarn become rope.scaling.* keys; llama3 becomes the rope_freqs
 * tensor (hf_load.c), as the converter writes them; anything else is refused by name. */
static int rope_scaling(const char *dir, const json_value *root, gguf_meta *g, hf_config *c, char *err,
                        size_t errlen) {
    const json_value *rs = json_get(root, "rope_scaling");
    if (!rs || rs->type == JSON_NULL) return 0;
    if (rs->type != JSON_OBJECT) return hf_fail(err, errlen, dir, CFG, "field 'rope_scaling' is not an object");
    const json_value *rt = json_get(rs, "rope_type");
    const char *field = rt && rt->type != JSON_NULL ? "rope_type" : "type";   /* older configs: "type" */
    const json_value *tv = json_get(rs, field);
    if (!tv || tv->type == JSON_NULL) return hf_fail(err, errlen, dir, CFG, "field 'rope_scaling.rope_type' is missing");
    if (tv->type != JSON_STRING)
        return hf_fail(err, errlen, dir, CFG, "field 'rope_scaling.%s' must be a string (linear, llama3, yarn)", field);
    const char *type = tv->str;
    char k[96];
    double factor;
    if (!strcmp(type, "default")) return 0;
    if (!strcmp(type, "linear")) {
        if (pos_field(dir, rs, "rope_scaling.", "factor", -1, KV_ROPE_FACTOR_MAX, &factor, err, errlen)) return -1;
        key(k, sizeof k, c, "rope.scaling.type");
        gm_str(g, k, "linear", 6);
        key(k, sizeof k, c, "rope.scaling.factor");
        gm_f32(g, k, (float)factor);
        return 0;
    }
    if (!strcmp(type, "yarn")) {
        double v;
        int orig;
        if (pos_field(dir, rs, "rope_scaling.", "factor", -1, KV_ROPE_FACTOR_MAX, &factor, err, errlen) ||
            int_in(dir, rs, "rope_scaling.", "original_max_position_embeddings", c->n_ctx, 1, 1 << 24, &orig, err,
                   errlen))
            return -1;
        key(k, sizeof k, c, "rope.scaling.type");
        gm_str(g, k, "yarn", 4);
        key(k, sizeof k, c, "rope.scaling.factor");
        gm_f32(g, k, (float)factor);
        key(k, sizeof k, c, "rope.scaling.original_context_length");
        gm_u32(g, k, (uint32_t)orig);
        /* the optional ones only where the config sets them, as the converter does */
        static const struct { const char *hf, *gguf; double hi; } opt[] = {
            {"beta_fast", "rope.scaling.yarn_beta_fast", KV_ROPE_BETA_MAX},
            {"beta_slow", "rope.scaling.yarn_beta_slow", KV_ROPE_BETA_MAX},
            {"attention_factor", "rope.scaling.attn_factor", KV_ROPE_ATTN_FACTOR_MAX}};
        for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
            if (!json_get(rs, opt[i].hf) || json_get(rs, opt[i].hf)->type == JSON_NULL) continue;
            /* checked here under the user's key: model.c's check would name the GGUF one */
            if (pos_field(dir, rs, "rope_scaling.", opt[i].hf, -1, opt[i].hi, &v, err, errlen)) return -1;
            /* transformers' attention_factor replaces get_mscale(factor); llama.cpp's
             * attn_factor multiplies it */
            if (i == 2) v /= rope_yarn_mscale(factor);
            key(k, sizeof k, c, opt[i].gguf);
            gm_f32(g, k, (float)v);
        }
        const json_value *tr = json_get(rs, "truncate");
        if (tr && tr->type == JSON_FALSE)   /* unrounded correction range: not in the engine */
            return hf_fail(err, errlen, dir, CFG, "field 'rope_scaling.truncate' = false is not supported");
        if (json_get(rs, "mscale") || json_get(rs, "mscale_all_dim"))
            return hf_fail(err, errlen, dir, CFG, "field 'rope_scaling.mscale' (DeepSeek's yarn) is not supported");
        return 0;
    }
    if (!strcmp(type, "llama3")) {
        c->llama3 = 1;
        int orig;
        if (pos_field(dir, rs, "rope_scaling.", "factor", -1, KV_ROPE_FACTOR_MAX, &c->l3_factor, err, errlen) ||
            pos_field(dir, rs, "rope_scaling.", "low_freq_factor", -1, 1e30, &c->l3_low, err, errlen) ||
            pos_field(dir, rs, "rope_scaling.", "high_freq_factor", -1, 1e30, &c->l3_high, err, errlen) ||
            int_in(dir, rs, "rope_scaling.", "original_max_position_embeddings", -1, 1, 1 << 24, &orig, err, errlen))
            return -1;
        c->l3_orig_ctx = orig;
        if (c->l3_high <= c->l3_low)
            return hf_fail(err, errlen, dir, CFG, "field 'rope_scaling.high_freq_factor' must exceed low_freq_factor");
        return 0;
    }
    return hf_fail(err, errlen, dir, CFG, "field 'rope_scaling.%s' = '%.32s' is not supported (linear, llama3, yarn)",
                   field, type);
}

int hf_config_read(const char *dir, gguf_meta *g, hf_config *c, char *err, size_t errlen) {
    json_value root;
    memset(c, 0, sizeof *c);
    if (hf_read_json(dir, CFG, 0, &root, NULL, NULL, err, errlen)) return -1;
    int rc = -1;
    const json_value *archs = json_get(&root, "architectures");
    const char *a = archs && archs->type == JSON_ARRAY && archs->n > 0 && archs->items[0].type == JSON_STRING
                        ? archs->items[0].str : NULL;
    if (!a) {
        hf_fail(err, errlen, dir, CFG, "field 'architectures' is missing");
        goto done;
    }
    if (!strcmp(a, "LlamaForCausalLM") || !strcmp(a, "MistralForCausalLM")) snprintf(c->arch, sizeof c->arch, "llama");
    else if (!strcmp(a, "Qwen2ForCausalLM")) snprintf(c->arch, sizeof c->arch, "qwen2");
    else {
        hf_fail(err, errlen, dir, CFG, "field 'architectures' = '%.64s' is not supported "
                "(LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)", a);
        goto done;
    }
    if (int_field(dir, &root, "num_hidden_layers", -1, 1, 1024, &c->n_layer, err, errlen) ||
        int_field(dir, &root, "hidden_size", -1, 1, 1 << 16, &c->n_embd, err, errlen) ||
        int_field(dir, &root, "intermediate_size", -1, 1, 1 << 18, &c->n_ff, err, errlen) ||
        int_field(dir, &root, "num_attention_heads", -1, 1, 1024, &c->n_head, err, errlen) ||
        int_field(dir, &root, "num_key_value_heads", c->n_head, 1, c->n_head, &c->n_head_kv, err, errlen) ||
        int_field(dir, &root, "max_position_embeddings", -1, 1, 1 << 24, &c->n_ctx, err, errlen) ||
        int_field(dir, &root, "vocab_size", -1, 1, 1 << 24, &c->n_vocab, err, errlen))
        goto done;
    int hd_default = c->n_embd % c->n_head ? -1 : c->n_embd / c->n_head;
    if (int_field(dir, &root, "head_dim", hd_default, 2, 1024, &c->head_dim, err, errlen)) goto done;
    /* what model.c would refuse under the converted keys, refused here under the user's */
    if (c->n_head % c->n_head_kv) {
        hf_fail(err, errlen, dir, CFG, "field 'num_attention_heads' = %d is not a multiple of 'num_key_value_heads' = %d",
                c->n_head, c->n_head_kv);
        goto done;
    }
    if (c->head_dim % 2) {
        hf_fail(err, errlen, dir, CFG, "field 'head_dim' = %d is odd (rope rotates pairs)", c->head_dim);
        goto done;
    }
    double theta, eps;
    if (pos_field(dir, &root, "", "rope_theta", 10000.0, 1e30, &theta, err, errlen) ||
        pos_field(dir, &root, "", "rms_norm_eps", -1, 1e30, &eps, err, errlen))
        goto done;
    c->rope_theta = theta;
    const json_value *tie = json_get(&root, "tie_word_embeddings");
    /* transformers' default: tied unless the config says otherwise */
    c->tied = !tie || tie->type != JSON_FALSE;
    const json_value *ab = json_get(&root, "attention_bias"), *mb = json_get(&root, "mlp_bias");
    if (!strcmp(c->arch, "llama") && ab && ab->type == JSON_TRUE) {
        hf_fail(err, errlen, dir, CFG, "field 'attention_bias' = true is not supported for llama");
        goto done;
    }
    if (mb && mb->type == JSON_TRUE) {
        hf_fail(err, errlen, dir, CFG, "field 'mlp_bias' = true is not supported");
        goto done;
    }
    const json_value *hact = json_get(&root, "hidden_act");
    if (hact && hact->type == JSON_STRING && strcmp(hact->str, "silu")) {
        hf_fail(err, errlen, dir, CFG, "field 'hidden_act' = '%.32s' is not supported (silu)", hact->str);
        goto done;
    }
    if (token_id(dir, &root, "bos_token_id", &c->bos, err, errlen) ||
        token_id(dir, &root, "eos_token_id", &c->eos, err, errlen))
        goto done;

    char k[96];
    key(k, sizeof k, c, "context_length");                 gm_u32(g, k, (uint32_t)c->n_ctx);
    key(k, sizeof k, c, "embedding_length");               gm_u32(g, k, (uint32_t)c->n_embd);
    key(k, sizeof k, c, "block_count");                    gm_u32(g, k, (uint32_t)c->n_layer);
    key(k, sizeof k, c, "feed_forward_length");            gm_u32(g, k, (uint32_t)c->n_ff);
    key(k, sizeof k, c, "rope.freq_base");                 gm_f32(g, k, (float)theta);
    key(k, sizeof k, c, "attention.head_count");           gm_u32(g, k, (uint32_t)c->n_head);
    key(k, sizeof k, c, "attention.head_count_kv");        gm_u32(g, k, (uint32_t)c->n_head_kv);
    key(k, sizeof k, c, "attention.layer_norm_rms_epsilon"); gm_f32(g, k, (float)eps);
    key(k, sizeof k, c, "attention.key_length");           gm_u32(g, k, (uint32_t)c->head_dim);
    key(k, sizeof k, c, "attention.value_length");         gm_u32(g, k, (uint32_t)c->head_dim);
    key(k, sizeof k, c, "rope.dimension_count");           gm_u32(g, k, (uint32_t)c->head_dim);
    key(k, sizeof k, c, "vocab_size");                     gm_u32(g, k, (uint32_t)c->n_vocab);
    /* Sliding-window attention (Mistral-7B-v0.1; Qwen2 with use_sliding_window): stated in
     * the key llama.cpp uses, for model.c to honour or refuse, never dropped here. */
    int win = 0;
    const json_value *use = json_get(&root, "use_sliding_window");
    if (!strcmp(c->arch, "qwen2") && use && use->type == JSON_TRUE) {
        /* Qwen2 windows only the layers from max_window_layers on: not one window for all */
        hf_fail(err, errlen, dir, CFG, "field 'use_sliding_window' = true is not supported for qwen2");
        goto done;
    }
    const json_value *sw = json_get(&root, "sliding_window");
    if (sw && sw->type != JSON_NULL && int_field(dir, &root, "sliding_window", -1, 1, 1 << 24, &win, err, errlen))
        goto done;
    if (!strcmp(c->arch, "llama") && win > 0 && win < c->n_ctx) {
        key(k, sizeof k, c, "attention.sliding_window");
        gm_u32(g, k, (uint32_t)win);
    }
    if (rope_scaling(dir, &root, g, c, err, errlen)) goto done;
    rc = 0;
done:
    json_free(&root);
    return rc;
}
