/* tokenizer.json and tokenizer_config.json as the tokenizer.ggml.* metadata tok_load
 * reads, so the GGUF tokenizer code runs unchanged:
 *  - byte-level BPE (GPT-2 family, SmolLM2, Llama-3, Qwen2): model "gpt2", the
 *    pre-tokenizer named from the pre_tokenizer's split pattern, vocabulary and merges;
 *  - SentencePiece-style BPE (Mistral, Llama-2: byte_fallback, U+2581 for spaces): model
 *    "llama" plus the merges, which tok_spm.c then ranks pairs by, as tokenizers does.
 * Token types follow convert_hf_to_gguf: added special tokens are control, other added
 * tokens user-defined, <0xXX> byte tokens byte, ids without a token "[PADn]" unused. */
#include "hf_internal.h"
#include "../kernels/host.h"
#include "tok_internal.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char TJ[] = "tokenizer.json", TC[] = "tokenizer_config.json";

/* The pre-tokenizer regexes of the families tok_pretok.c implements, as tokenizer.json
 * spells them (after JSON unescaping). */
static const char RE_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The pieces of a Sequence (or the one component itself) of type `type`. */
static int parts(const json_value *v, const json_value **out, int cap) {
    if (!v || v->type != JSON_OBJECT) return 0;
    const char *ty = hf_str(v, "type");
    const json_value *seq = NULL;
    if (ty && !strcmp(ty, "Sequence")) {
        static const char *lists[] = {"pretokenizers", "normalizers", "processors"};
        for (int i = 0; i < 3 && !seq; i++) seq = json_get(v, lists[i]);
    }
    if (!seq || seq->type != JSON_ARRAY) {
        out[0] = v;
        return 1;
    }
    int n = 0;
    for (int i = 0; i < seq->n && n < cap; i++)
        if (seq->items[i].type == JSON_OBJECT) out[n++] = &seq->items[i];
    return n;
}

static int is_type(const json_value *v, const char *type) {
    const char *t = hf_str(v, "type");
    return t && !strcmp(t, type);
}

static int flag(const json_value *v, const char *key, int deflt) {
    const json_value *b = json_get(v, key);
    return b && b->type == JSON_TRUE ? 1 : b && b->type == JSON_FALSE ? 0 : deflt;
}

/* Byte-level BPE: the tokenizer.ggml.pre name of the pre_tokenizer, or NULL. */
static const char *byte_level_pre(const json_value *pre) {
    const json_value *p[8];
    int n = parts(pre, p, 8);
    for (int i = 0; i < n; i++)   /* a space put before the text: not what these families do */
        if (is_type(p[i], "ByteLevel") && flag(p[i], "add_prefix_space", 0)) return NULL;
    if (n == 1 && is_type(p[0], "ByteLevel") && flag(p[0], "use_regex", 1)) return "gpt2";
    if (n == 2 && is_type(p[0], "Digits") && flag(p[0], "individual_digits", 0) && is_type(p[1], "ByteLevel") &&
        flag(p[1], "use_regex", 1))
        return "smollm";
    if (n == 2 && is_type(p[0], "Split") && is_type(p[1], "ByteLevel") && !flag(p[1], "use_regex", 1)) {
        const json_value *pat = json_get(p[0], "pattern");
        const char *re = pat ? hf_str(pat, "Regex") : NULL;
        if (re && !strcmp(re, RE_LLAMA3)) return "llama-bpe";
        if (re && !strcmp(re, RE_QWEN2)) return "qwen2";
    }
    return NULL;
}

static int has_byte_level(const json_value *pre) {
    const json_value *p[8];
    int n = parts(pre, p, 8);
    for (int i = 0; i < n; i++)
        if (is_type(p[i], "ByteLevel")) return 1;
    return 0;
}

static const char SP[] = "\xE2\x96\x81";   /* U+2581, SentencePiece's space */

/* SentencePiece-style: spaces become U+2581 (a Replace normalizer or a Metaspace
 * pre-tokenizer). Returns 1 and whether a U+2581 is put before the text, else 0. */
static int spm_style(const json_value *root, int *space_prefix, int *first_only) {
    const json_value *p[8];
    int n = parts(json_get(root, "normalizer"), p, 8), repl = 0, prefix = 0;
    *first_only = 0;
    for (int i = 0; i < n; i++) {
        const json_value *pat = json_get(p[i], "pattern");
        const char *from = pat ? hf_str(pat, "String") : NULL, *to = hf_str(p[i], "content");
        if (is_type(p[i], "Replace") && from && to && !strcmp(from, " ") && !strcmp(to, SP)) repl = 1;
        const char *pp = hf_str(p[i], "prepend");
        if (is_type(p[i], "Prepend") && pp && !strcmp(pp, SP)) prefix = 1;
    }
    n = parts(json_get(root, "pre_tokenizer"), p, 8);
    for (int i = 0; i < n; i++)
        if (is_type(p[i], "Metaspace")) {
            const char *scheme = hf_str(p[i], "prepend_scheme");
            repl = 1;
            prefix = scheme ? strcmp(scheme, "never") != 0 : flag(p[i], "add_prefix_space", 1);
            /* "first" (and the older add_prefix_space): the text's start only, not when
             * it starts with a space; "always" prefixes every section */
            *first_only = !scheme || !strcmp(scheme, "first");
        }
    *space_prefix = prefix;
    return repl;
}

/* tokenizer_config's bos_token/eos_token/unk_token: a string or {"content": ...}. */
static const char *special_text(const json_value *cfg, const char *key) {
    const json_value *v = json_get(cfg, key);
    if (v && v->type == JSON_OBJECT) v = json_get(v, "content");
    return v && v->type == JSON_STRING ? v->str : NULL;
}

typedef struct {
    char **text;       /* [n]: borrowed from the JSON, NULL for an unused id */
    size_t *len;
    int32_t *type;
    int n;
} vocab;

static int find_id(const vocab *v, const char *s) {
    if (!s) return -1;
    size_t n = strlen(s);
    for (int i = 0; i < v->n; i++)
        if (v->text[i] && v->len[i] == n && !memcmp(v->text[i], s, n)) return i;
    return -1;
}

/* add_bos when tokenizer_config does not say: the post-processor's template for one
 * sequence starts with the bos token (Llama-3). */
static int post_adds_bos(const json_value *root, const char *bos) {
    const json_value *p[8];
    int n = parts(json_get(root, "post_processor"), p, 8);
    for (int i = 0; i < n; i++) {
        const json_value *single = json_get(p[i], "single");
        if (!is_type(p[i], "TemplateProcessing") || !single || single->type != JSON_ARRAY || !single->n) continue;
        const json_value *st = json_get(&single->items[0], "SpecialToken");
        const char *id = st ? hf_str(st, "id") : NULL;
        return id && bos && !strcmp(id, bos);
    }
    return 0;
}

static int put_merges(const char *dir, gguf_meta *g, const json_value *merges, char *err, size_t errlen) {
    gm_arr_begin(g, "tokenizer.ggml.merges");
    char buf[1024];
    for (int i = 0; i < merges->n; i++) {
        const json_value *m = &merges->items[i];
        if (m->type == JSON_STRING) gm_arr_str(g, m->str, m->len);
        else if (m->type == JSON_ARRAY && m->n == 2 && m->items[0].type == JSON_STRING &&
                 m->items[1].type == JSON_STRING && m->items[0].len + m->items[1].len + 1 < sizeof buf) {
            /* newer files: ["left", "right"] */
            int k = snprintf(buf, sizeof buf, "%s %s", m->items[0].str, m->items[1].str);
            gm_arr_str(g, buf, (size_t)k);
        } else
            return hf_fail(err, errlen, dir, TJ, "field 'model.merges[%d]' is neither \"a b\" nor [\"a\", \"b\"]", i);
    }
    gm_arr_end(g, (uint64_t)merges->n);
    return 0;
}

/* DIR/chat_template.jinja, if there, as the chat template. */
static int read_jinja(const char *dir, gguf_meta *g, char *err, size_t errlen) {
    char path[1024], why[160];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    size_t n;
    char *buf = kb_read_file_capped(path, (size_t)1 << 20, &n, why, sizeof why);
    if (!buf) return errno == ENOENT ? 0 : hf_fail(err, errlen, dir, "chat_template.jinja", "%s", why);
    gm_str(g, "tokenizer.chat_template", buf, n);
    free(buf);
    return 0;
}

int hf_tok_read(const char *dir, gguf_meta *g, const hf_config *c, int check_only, char *err, size_t errlen) {
    json_value root, cfg;
    int have_cfg = 0, rc = -1;
    vocab v = {0};
    if (hf_read_json(dir, TJ, 0, &root, NULL, NULL, err, errlen)) return -1;
    int r = hf_read_json(dir, TC, 1, &cfg, NULL, NULL, err, errlen);
    if (r < 0) goto done;
    have_cfg = r == 0;
    const json_value *model = json_get(&root, "model");
    if (!model || model->type != JSON_OBJECT) {
        hf_fail(err, errlen, dir, TJ, "field 'model' is missing");
        goto done;
    }
    const char *mtype = hf_str(model, "type");
    if (mtype && strcmp(mtype, "BPE")) {
        hf_fail(err, errlen, dir, TJ, "field 'model.type' = '%.32s' is not supported (BPE)", mtype);
        goto done;
    }
    const json_value *vj = json_get(model, "vocab"), *merges = json_get(model, "merges");
    if (!vj || vj->type != JSON_OBJECT || !merges || merges->type != JSON_ARRAY) {
        hf_fail(err, errlen, dir, TJ, "field 'model.vocab' or 'model.merges' is missing");
        goto done;
    }
    /* which BPE */
    const json_value *pre = json_get(&root, "pre_tokenizer");
    const char *pre_name = NULL;
    int spm = 0, space_prefix = 0, first_only = 0;
    if (has_byte_level(pre)) {
        if (!(pre_name = byte_level_pre(pre))) {
            hf_fail(err, errlen, dir, TJ, "field 'pre_tokenizer' is a byte-level split kvbench does not know "
                    "(known: GPT-2, SmolLM2 digits, the Llama-3 and Qwen2 Split patterns)");
            goto done;
        }
    } else if (flag(model, "byte_fallback", 0) && spm_style(&root, &space_prefix, &first_only)) {
        spm = 1;
    } else {
        hf_fail(err, errlen, dir, TJ, "field 'pre_tokenizer' is neither byte-level (ByteLevel) nor "
                "SentencePiece-style (byte_fallback with U+2581 spaces)");
        goto done;
    }
    /* ids: the vocabulary, the added tokens, padded to the model's vocab_size */
    const json_value *added = json_get(&root, "added_tokens");
    int n = c->n_vocab;
    for (int i = 0; i < vj->n; i++) {
        double id = vj->items[i].num;
        if (vj->items[i].type != JSON_NUMBER || id < 0 || id >= 1 << 24 || id != (int)id) {
            hf_fail(err, errlen, dir, TJ, "field 'model.vocab' has a bad id for token %d", i);
            goto done;
        }
        if ((int)id >= n) n = (int)id + 1;
    }
    for (int i = 0; added && added->type == JSON_ARRAY && i < added->n; i++) {
        double id;
        if (hf_num(&added->items[i], "id", &id) <= 0 || id < 0 || id >= 1 << 24 || !hf_str(&added->items[i], "content")) {
            hf_fail(err, errlen, dir, TJ, "field 'added_tokens[%d]' needs an id and a content", i);
            goto done;
        }
        if ((int)id >= n) n = (int)id + 1;
    }
    if (n == 0) {
        hf_fail(err, errlen, dir, TJ, "field 'model.vocab' is empty");
        goto done;
    }
    v.n = n;
    v.text = calloc((size_t)n, sizeof *v.text);
    v.len = calloc((size_t)n, sizeof *v.len);
    v.type = calloc((size_t)n, sizeof *v.type);
    if (!v.text || !v.len || !v.type) {
        hf_fail(err, errlen, dir, TJ, "out of memory");
        goto done;
    }
    for (int i = 0; i < vj->n; i++) {
        int id = (int)vj->items[i].num;
        v.text[id] = vj->keys[i];
        v.len[id] = strlen(vj->keys[i]);
        v.type[id] = TT_NORMAL;
        const char *s = vj->keys[i];
        if (spm && v.len[id] == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') v.type[id] = TT_BYTE;
    }
    for (int i = 0; added && added->type == JSON_ARRAY && i < added->n; i++) {
        double id;
        hf_num(&added->items[i], "id", &id);
        const json_value *ct = json_get(&added->items[i], "content");
        v.text[(int)id] = ct->str;
        v.len[(int)id] = ct->len;
        v.type[(int)id] = flag(&added->items[i], "special", 0) ? TT_CONTROL : TT_USER;
    }
    const char *unk_text = hf_str(model, "unk_token");
    int unk = find_id(&v, unk_text);
    if (unk >= 0) v.type[unk] = TT_UNKNOWN;

    gm_str(g, "tokenizer.ggml.model", spm ? "llama" : "gpt2", spm ? 5 : 4);
    if (!spm) gm_str(g, "tokenizer.ggml.pre", pre_name, strlen(pre_name));
    if (!check_only) {
        gm_arr_begin(g, "tokenizer.ggml.tokens");
        char pad[32];
        for (int i = 0; i < n; i++) {
            if (v.text[i]) gm_arr_str(g, v.text[i], v.len[i]);
            else {
                gm_arr_str(g, pad, (size_t)snprintf(pad, sizeof pad, "[PAD%d]", i));
                v.type[i] = TT_UNUSED;
            }
        }
        gm_arr_end(g, (uint64_t)n);
        gm_arr_i32(g, "tokenizer.ggml.token_type", v.type, (uint64_t)n);
    }
    if (put_merges(dir, g, merges, err, errlen)) goto done;
    if (spm) gm_bool(g, "tokenizer.ggml.add_space_prefix", space_prefix);
    if (spm && first_only) gm_bool(g, "kvbench.tokenizer.prefix_first_only", 1);

    /* special ids: tokenizer_config.json first, then config.json (as SpecialVocab) */
    const json_value *tc = have_cfg ? &cfg : NULL;
    const char *bos_text = tc ? special_text(tc, "bos_token") : NULL;
    int bos = find_id(&v, bos_text), eos = find_id(&v, tc ? special_text(tc, "eos_token") : NULL);
    /* config.json's ids name tokens of this vocabulary, or the file is wrong: said, not dropped */
    static const char *const id_key[2] = {"bos_token_id", "eos_token_id"};
    for (int k = 0; k < 2; k++) {
        int id = k ? c->eos : c->bos;
        if (id >= n) {
            hf_fail(err, errlen, dir, "config.json", "field '%s' = %d is not a token of the vocabulary (%d tokens)",
                    id_key[k], id, n);
            goto done;
        }
    }
    if (bos < 0) bos = c->bos;
    if (eos < 0) eos = c->eos;
    if (bos >= 0) gm_u32(g, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0) gm_u32(g, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (unk >= 0) gm_u32(g, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    const json_value *ab = tc ? json_get(tc, "add_bos_token") : NULL;
    if (ab && (ab->type == JSON_TRUE || ab->type == JSON_FALSE)) gm_bool(g, "tokenizer.ggml.add_bos_token", ab->type == JSON_TRUE);
    else if (!spm) gm_bool(g, "tokenizer.ggml.add_bos_token", post_adds_bos(&root, bos >= 0 ? v.text[bos] : NULL));
    /* the chat template: a string, or a list of named ones ("default") */
    const json_value *ct = tc ? json_get(tc, "chat_template") : NULL;
    if (ct && ct->type == JSON_ARRAY)
        for (int i = 0; i < ct->n; i++) {
            const char *name = hf_str(&ct->items[i], "name");
            if (name && !strcmp(name, "default")) { ct = json_get(&ct->items[i], "template"); break; }
        }
    if (ct && ct->type == JSON_STRING) gm_str(g, "tokenizer.chat_template", ct->str, ct->len);
    else if (read_jinja(dir, g, err, errlen)) goto done;   /* newer checkpoints: chat_template.jinja */
    rc = 0;
done:
    free(v.text);
    free(v.len);
    free(v.type);
    json_free(&root);
    if (have_cfg) json_free(&cfg);
    return rc;
}
