/* Fuzz target: the GGUF reader (every key, array element and tensor through the typed
 * getters) and the model load on top of it (config, tokenizer, weights), then a short
 * tokenisation when a model comes out. */
#include "fuzz.h"
#include "../../model/gguf.h"
#include "../../model/model.h"
#include "../../model/tokenizer.h"

static void walk(const gguf_file *f) {
    for (int64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 255 ? kv->key.len : 255), kv->key.ptr);
        int64_t iv;
        float fv;
        gguf_str s;
        int b;
        (void)gguf_get_int(f, key, &iv);
        (void)gguf_get_f32(f, key, &fv);
        (void)gguf_get_str(f, key, &s);
        (void)gguf_get_bool(f, key, &b);
        uint64_t n = kv->arr_n < 64 ? kv->arr_n : 64;
        for (uint64_t j = 0; j <= n; j++) {      /* one past the end: must be refused */
            (void)gguf_arr_str(f, kv, j, &s);
            (void)gguf_arr_int(f, kv, j, &iv);
            (void)gguf_arr_f32(f, kv, j, &fv);
        }
    }
    for (int64_t i = 0; i < f->n_tensors; i++) (void)gguf_tensor_find(f, f->tensors[i].name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_file(data, n);
    char err[512];
    gguf_file f;
    if (gguf_open(&f, path, err, sizeof err) == 0) {
        walk(&f);
        gguf_close(&f);
    }
    kv_model *m = model_load(path, err, sizeof err);
    if (m) {
        int32_t ids[64];
        const char *text = "Hello, world! 12345 \xc3\xa9t\xc3\xa9";
        (void)tok_encode(model_tokenizer(m), text, strlen(text), 1, ids, 64);
        model_free(m);
    }
    return 0;
}
