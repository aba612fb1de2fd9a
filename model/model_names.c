/* Short model names: `--model qwen2.5-coder-0.5b` (anywhere a model path is read) stands for
 * the file its `make` target caches, so a user need not know the file's name or where the
 * cache is. One table, read by model_load and kvbench sim. */
#include "model.h"
#include "../kernels/host.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const struct {
    const char *name, *file, *target;
} names[] = {
    {"smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf", "make model"},
    {"qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct-AWQ.Q4_K_M.gguf", "make model-qwen"},
    {"qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf", "make model-qwen-1.5b"},
};

const char *model_short_names(void) { return "smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"; }

const char *model_resolve_name(const char *name, char *buf, size_t len, char *err, size_t errlen) {
    struct stat st;
    if (err && errlen) err[0] = 0;
    if (!name || stat(name, &st) == 0) return name;   /* a file or folder of that name wins */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i].name)) continue;
        kb_cache_path(names[i].file, buf, len);
        if (stat(buf, &st) == 0) return buf;
        snprintf(err, errlen, "%s: not downloaded (no %s); `%s` fetches it, or pass --model PATH", name, buf,
                 names[i].target);
        return NULL;
    }
    return name;
}
