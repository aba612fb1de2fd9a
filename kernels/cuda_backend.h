/* Entry point of the CUDA backend (kernels/cuda_backend.cu, built with make CUDA=1). */
#ifndef KB_CUDA_BACKEND_H
#define KB_CUDA_BACKEND_H
#include "core.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA table, or NULL with *why set when no device is usable. */
const kb_backend *kb_cuda_backend(const char **why);

#ifdef __cplusplus
}
#endif
#endif
