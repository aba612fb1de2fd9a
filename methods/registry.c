/* The table of methods, in the order reports list them. */
#include "method.h"
#include <strings.h>

extern const kv_method kv_fullkv, kv_streamingllm, kv_h2o, kv_snapkv, kv_pyramidkv, kv_chunkkv,
    kv_sentencekv, kv_sekv, kv_sekv_ref, kv_sekv_spread;

static const kv_method *const all[] = {
    &kv_fullkv, &kv_streamingllm, &kv_h2o, &kv_snapkv, &kv_pyramidkv, &kv_chunkkv, &kv_sentencekv, &kv_sekv,
    &kv_sekv_ref, &kv_sekv_spread,
};
static const kv_method *table[sizeof all / sizeof all[0]];
static int n_table = -1;

static void build(void) {
    if (n_table >= 0) return;
    n_table = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) table[n_table++] = all[i];
}

int kv_method_count(void) { build(); return n_table; }

const kv_method *kv_method_at(int i) {
    return i >= 0 && i < kv_method_count() ? table[i] : NULL;
}

const kv_method *kv_method_find(const char *name) {
    for (int i = 0; i < kv_method_count(); i++)
        if (strcasecmp(table[i]->name, name) == 0) return table[i];
    return NULL;
}
