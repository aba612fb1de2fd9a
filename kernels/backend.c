/* Backend tables and the process-wide choice between them. */
#include "cpu.h"
#include "cuda_backend.h"

#include <stddef.h>
#include <string.h>

static const kb_backend cpu_backend = {
    .name = "cpu",
    .prefill = kb_cpu_prefill,
    .decode = kb_cpu_decode,
    .gather = kb_cpu_gather,
    .svd = kb_cpu_svd,
};

static const kb_backend *current = &cpu_backend;

const kb_backend *kb_cpu(void) { return &cpu_backend; }

const kb_backend *kb_cuda(const char **why) {
#ifdef KB_CUDA
    return kb_cuda_backend(why);
#else
    if (why) *why = "built without CUDA (make CUDA=1)";
    return NULL;
#endif
}

const kb_backend *kb_get(void) { return current; }

int kb_select(const char *name, const char **why) {
    const kb_backend *b = NULL;
    if (name && strcmp(name, "cpu") == 0) {
        b = kb_cpu();
    } else if (name && strcmp(name, "cuda") == 0) {
        b = kb_cuda(why);
    } else if (why) {
        *why = "unknown backend (expected cpu or cuda)";
    }
    if (!b) return -1;
    current = b;
    return 0;
}
