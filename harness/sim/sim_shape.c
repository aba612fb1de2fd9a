/* The model's shapes for kvbench sim: a GGUF file's metadata and tensor table (the weights
 * are never read, so an 8B file costs nothing), or a random: preset's published shapes. */
#include "sim.h"
#include "../../model/gguf.h"
#include "../../model/hf_load.h"
#include "../../model/random_model.h"
#include "../../model/model.h"

#include <stdio.h>
#include <string.h>

static int meta(const gguf_file *f, const char *arch, const char *key, int64_t deflt, int64_t *out) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!gguf_find(f, full)) return deflt < 0 ? -1 : (*out = deflt, 0);
    return gguf_get_int(f, full, out);
}

static int from_gguf(const char *path, sim_shape *s, char *err, size_t errlen) {
    gguf_file f;
    memset(&f, 0, sizeof f);
    if (model_file_open_shapes(&f, path, err, errlen)) return -1;
    kv_model_config *c = &s->cfg;
    gguf_str a;
    int rc = -1;
    const char *bad = NULL;
    if (gguf_get_str(&f, "general.architecture", &a)) {
        bad = "general.architecture";
        goto done;
    }
    snprintf(c->arch, sizeof c->arch, "%.*s", (int)(a.len < 31 ? a.len : 31), a.ptr);
    if (!gguf_get_str(&f, "general.name", &a)) snprintf(c->name, sizeof c->name, "%.*s", (int)(a.len < 127 ? a.len : 127), a.ptr);
    int64_t L, E, F, H, Hkv, ctx, hd;
    if (meta(&f, c->arch, "block_count", -1, &L)) bad = "block_count";
    else if (meta(&f, c->arch, "embedding_length", -1, &E)) bad = "embedding_length";
    else if (meta(&f, c->arch, "feed_forward_length", -1, &F)) bad = "feed_forward_length";
    else if (meta(&f, c->arch, "attention.head_count", -1, &H)) bad = "attention.head_count";
    else if (meta(&f, c->arch, "attention.head_count_kv", H, &Hkv)) bad = "attention.head_count_kv";
    else if (meta(&f, c->arch, "context_length", -1, &ctx)) bad = "context_length";
    else if (meta(&f, c->arch, "attention.key_length", H > 0 ? E / H : -1, &hd)) bad = "attention.key_length";
    if (bad) goto done;
    if (L < 1 || L > 1024 || E < 1 || H < 1 || Hkv < 1 || H % Hkv || hd < 2 || hd > 1024 || F < 1) {
        bad = "shapes (block_count, heads, key_length)";
        goto done;
    }
    c->n_layer = (int)L, c->n_embd = (int)E, c->n_ff = (int)F, c->n_head = (int)H, c->n_head_kv = (int)Hkv;
    c->n_ctx_train = (int)(ctx > 1 << 30 ? 1 << 30 : ctx), c->head_dim = (int)hd;
    c->has_qkv_bias = !strcmp(c->arch, "qwen2");
    const gguf_tensor *emb = gguf_tensor_find(&f, "token_embd.weight");
    c->n_vocab = emb ? (int)emb->ne[1] : 0;
    s->tied = !gguf_tensor_find(&f, "output.weight");
    for (int64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        double n = 1;
        for (int k = 0; k < t->n_dims; k++) n *= (double)t->ne[k];
        s->n_params += n;
        s->file_weight_bytes += (double)t->nbytes;
    }
    c->n_params = (int64_t)s->n_params;
    s->model_hash = kv_model_hash(f.base, f.size);
    rc = 0;
done:
    if (bad) snprintf(err, errlen, "%s: metadata %s is missing or invalid", path, bad);
    gguf_close(&f);
    return rc;
}

int sim_shape_open(const char *spec, sim_shape *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    snprintf(s->spec, sizeof s->spec, "%s", spec);
    char named[1024];   /* a short model name (model_resolve_name) */
    if (strncmp(spec, "random:", 7)) return (spec = model_resolve_name(spec, named, sizeof named, err, errlen)) ? from_gguf(spec, s, err, errlen) : -1;
    char name[64];
    snprintf(name, sizeof name, "%s", spec + 7);
    char *colon = strchr(name, ':');   /* random:NAME:SEED: the seed does not change shapes */
    if (colon) *colon = 0;
    if (random_model_shape(name, &s->cfg, &s->tied)) {
        char list[256] = "";
        for (const char *const *p = random_model_presets(); *p; p++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", *list ? ", " : "", *p);
        snprintf(err, errlen, "%s: unknown preset (known: %s)", spec, list);
        return -1;
    }
    const kv_model_config *c = &s->cfg;
    double E = c->n_embd, qd = (double)c->n_head * c->head_dim, kvd = (double)c->n_head_kv * c->head_dim;
    double per_layer = E * qd * 2 + E * kvd * 2 + 3 * E * c->n_ff + 2 * E + (c->has_qkv_bias ? qd + 2 * kvd : 0);
    s->n_params = (double)c->n_vocab * E * (s->tied ? 1 : 2) + c->n_layer * per_layer + E;
    s->is_random = 1;
    /* what model_load_random holds: matrices in the spec's type ("random:NAME[:SEED][:TYPE]",
     * default Q4_0 above 1e9 parameters, else F32), norms and biases in f32 */
    const char *t = strrchr(spec + 7, ':');
    double per = s->n_params > 1e9 ? 18.0 / 32 : 4;
    if (t && !strcmp(t, ":f32")) per = 4;
    else if (t && !strcmp(t, ":q8_0")) per = 34.0 / 32;
    else if (t && !strcmp(t, ":q4_0")) per = 18.0 / 32;
    double vec = c->n_layer * (2 * E + (c->has_qkv_bias ? qd + 2 * kvd : 0)) + E;
    s->random_weight_bytes = per * (s->n_params - vec) + 4 * vec;
    return 0;
}
