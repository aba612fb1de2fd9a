/* Fuzz target: a Hugging Face directory whose config.json and model.safetensors.index.json
 * come from the input (split at the first NUL byte: config.json before it, the index after
 * it; no NUL, no index). tokenizer.json and the weights are fixed: a one-layer llama
 * (hidden 8, 2 heads, 1 kv head, 4 tokens) as model.safetensors and as two shards
 * (model-00001-of-00002.safetensors: embeddings and norms; -00002-: the rest), so an index
 * that maps the tensors to the shards loads. Reaches hf_config.c (every config.json key,
 * rope scaling, token ids, sliding window), hf_load.c's shard list, the tokenizer's
 * special ids, all through model_load (fuzz_hf.c calls hf_open itself), and a two-token
 * prefill when a model comes out. */
#include "fuzz.h"
#include "../../model/model.h"
#include <sys/stat.h>

static char dir[64];
static const char *const FILES[] = {"config.json", "tokenizer.json", "model.safetensors.index.json", "model.safetensors",
                                    "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};

static void put(const char *name, const void *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { perror(path); abort(); }
    fclose(f);
}

static void cleanup(void) {
    char path[128];
    for (size_t i = 0; i < sizeof FILES / sizeof *FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, FILES[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* One safetensors file of F32 tensors (names[i] with rows[i] x cols[i], cols 0: 1-D),
 * filled with small values that are not zero. */
static void put_safetensors(const char *file, const char *const *names, const int *rows, const int *cols, int n) {
    char hdr[4096];
    size_t h = 0, off = 0;
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)rows[i] * (size_t)(cols[i] ? cols[i] : 1) * 4;
        if (cols[i])
            h += (size_t)snprintf(hdr + h, sizeof hdr - h, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
                                  "\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i], rows[i], cols[i], off, off + bytes);
        else
            h += (size_t)snprintf(hdr + h, sizeof hdr - h, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
                                  "\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i], rows[i], off, off + bytes);
        off += bytes;
    }
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "}");
    while (h % 8) hdr[h++] = ' ';
    size_t total = 8 + h + off;
    uint8_t *buf = malloc(total);
    if (!buf) abort();
    uint64_t hl = h;
    memcpy(buf, &hl, 8);
    memcpy(buf + 8, hdr, h);
    for (size_t i = 0; i < off / 4; i++) {
        float v = 0.05f * (float)((int)(i * 2654435761u % 41) - 20) + 0.01f;
        memcpy(buf + 8 + h + 4 * i, &v, 4);
    }
    put(file, buf, total);
    free(buf);
}

static void setup(void) {
    const char *base = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";   /* a write per input */
    snprintf(dir, sizeof dir, "%s/kvbench-fuzz-hfconfig-XXXXXX", base);
    if (!mkdtemp(dir)) { perror("mkdtemp"); abort(); }
    atexit(cleanup);
    static const char tok[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3}, "
        "\"merges\": [[\"a\", \"b\"]]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}}";
    put("tokenizer.json", tok, sizeof tok - 1);
    static const char *const names[] = {
        "model.embed_tokens.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight",
        "model.layers.0.post_attention_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
        "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_proj.weight",
        "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight"};
    static const int rows[] = {4, 8, 8, 8, 8, 4, 4, 8, 8, 8, 8}, cols[] = {8, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8};
    put_safetensors("model.safetensors", names, rows, cols, 11);
    put_safetensors("model-00001-of-00002.safetensors", names, rows, cols, 4);
    put_safetensors("model-00002-of-00002.safetensors", names + 4, rows + 4, cols + 4, 7);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!dir[0]) setup();
    const uint8_t *nul = memchr(data, 0, n);
    size_t cfg_len = nul ? (size_t)(nul - data) : n;
    put("config.json", data, cfg_len);
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (nul) put("model.safetensors.index.json", nul + 1, n - cfg_len - 1);
    else unlink(path);
    char err[512];
    kv_model *m = model_load(dir, err, sizeof err);
    if (m) {
        int32_t ids[2] = {0, 3};
        kv_prefill_out pf;
        if (!model_prefill(m, ids, 2, NULL, &pf, err, sizeof err)) prefill_out_free(&pf);
        model_free(m);
    }
    return 0;
}
