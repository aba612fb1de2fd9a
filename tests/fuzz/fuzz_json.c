/* Fuzz target: the strict JSON parser on one value, the loaders' field accessors on
 * every member, and the JSONL reader over the input as a file. */
#include "fuzz.h"
#include "../../kernels/jsonl.h"

static void fields(const json_value *v) {
    if (v->type != JSON_OBJECT) return;
    char err[256];
    for (int i = 0; i < v->n; i++) {
        const char *s;
        char **arr;
        int k;
        if (json_field_string(v, v->keys[i], &s, err, sizeof err) == 0 && strlen(s) != json_get(v, v->keys[i])->len) abort();
        for (int mode = 0; mode < 4; mode++)
            if (json_field_strings(v, v->keys[i], mode & 1, mode >> 1, &arr, &k, err, sizeof err) == 0)
                json_strings_free(arr, k);
    }
}

static int on_line(void *ctx, const json_value *v, int line, char *err, size_t errlen) {
    (void)ctx; (void)line; (void)err; (void)errlen;
    fields(v);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char err[512];
    json_value v;
    if (json_parse((const char *)data, n, &v, err, sizeof err) == 0) {
        if (v.type == JSON_STRING && v.str[v.len] != 0) abort();   /* strings are terminated */
        fields(&v);
        json_free(&v);
    }
    jsonl_stats st;
    (void)jsonl_read(fuzz_file(data, n), on_line, NULL, &st, fuzz_null(), err, sizeof err);
    return 0;
}
