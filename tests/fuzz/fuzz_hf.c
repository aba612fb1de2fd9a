/* Fuzz target: a Hugging Face directory whose model.safetensors is the input (config.json
 * and tokenizer.json fixed: a one-layer llama with 4 tokens, corpus/hf holds valid
 * weights for it): the safetensors reader, the tensor mapping and Q/K permutation, and
 * the model load on top, then one decode step when a model comes out. */
#include "fuzz.h"
#include "../../model/hf_load.h"
#include "../../model/model.h"
#include <sys/stat.h>

static char dir[64];

static void put(const char *name, const void *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { perror(path); abort(); }
    fclose(f);
}

static void cleanup(void) {
    static const char *files[] = {"config.json", "tokenizer.json", "model.safetensors"};
    char path[128];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/kvbench-fuzz-hf-XXXXXX");
        if (!mkdtemp(dir)) { perror("mkdtemp"); abort(); }
        atexit(cleanup);
        static const char cfg[] = "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8, "
            "\"intermediate_size\": 8, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"num_hidden_layers\": 1, "
            "\"max_position_embeddings\": 64, \"vocab_size\": 4, \"rms_norm_eps\": 1e-5, \"tie_word_embeddings\": true}";
        static const char tok[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3}, "
            "\"merges\": [[\"a\", \"b\"]]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}}";
        put("config.json", cfg, sizeof cfg - 1);
        put("tokenizer.json", tok, sizeof tok - 1);
    }
    put("model.safetensors", data, n);
    char err[512];
    gguf_file f;
    if (hf_open(&f, dir, err, sizeof err) == 0) {
        for (int64_t i = 0; i < f.n_tensors; i++) (void)gguf_tensor_find(&f, f.tensors[i].name);
        gguf_close(&f);
    }
    kv_model *m = model_load(dir, err, sizeof err);
    if (m) {
        const kv_model_config *c = model_config(m);
        float *logits = malloc((size_t)c->n_vocab * sizeof *logits);
        int32_t ids[2] = {0, 3};
        kv_prefill_out pf;
        if (logits && !model_prefill(m, ids, 2, NULL, &pf, err, sizeof err)) prefill_out_free(&pf);
        free(logits);
        model_free(m);
    }
    return 0;
}
