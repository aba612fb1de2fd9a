// The CPU emulation of the cuBLAS calls in cublas_v2.h (see there for the semantics).
#include "cublas_v2.h"
#include "cuda_bf16.h"

#include <cstdio>

struct kbemu_cublas {
    void *workspace;
    size_t workspace_bytes;
    bool stream_set;   // the backend sets the kernels' stream explicitly; a GEMM before that fails
};

namespace {

// The extent in elements of a column-major matrix of `rows` x `cols` with leading
// dimension ld, as it lies in memory.
size_t extent(int rows, int cols, int ld) { return rows && cols ? (size_t)ld * (cols - 1) + rows : 0; }

bool on_device(const void *p, size_t bytes, const char *what) {
    if (bytes == 0 || kbemu::device_range(p, bytes) == 1) return true;
    fprintf(stderr, "cuBLAS emulation: %s %p (%zu bytes) is not (wholly) device memory\n", what, p, bytes);
    return false;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new kbemu_cublas{nullptr, 0, false};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream_set = true;   // one stream in the emulation: everything runs in call order
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes && (!workspace || !on_device(workspace, bytes, "workspace"))) return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = workspace;
    handle->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unknown cuBLAS status (emulation)";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!handle->stream_set) {
        fprintf(stderr, "cuBLAS emulation: GEMM on a handle whose stream was never set (cublasSetStream)\n");
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T) ||
        m < 0 || n < 0 || k < 0 || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    const int arows = transa == CUBLAS_OP_N ? m : k, acols = transa == CUBLAS_OP_N ? k : m;
    const int brows = transb == CUBLAS_OP_N ? k : n, bcols = transb == CUBLAS_OP_N ? n : k;
    if (lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (Atype != CUDA_R_16BF || Btype != CUDA_R_16BF || Ctype != CUDA_R_32F || computeType != CUBLAS_COMPUTE_32F ||
        algo != CUBLAS_GEMM_DEFAULT)
        return CUBLAS_STATUS_NOT_SUPPORTED;   // the emulation implements what the engine uses
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    const size_t h = sizeof(__nv_bfloat16);
    if (!on_device(A, extent(arows, acols, lda) * h, "A") || !on_device(B, extent(brows, bcols, ldb) * h, "B") ||
        !on_device(C, extent(m, n, ldc) * sizeof(float), "C"))
        return CUBLAS_STATUS_INVALID_VALUE;
    const float al = *static_cast<const float *>(alpha), be = *static_cast<const float *>(beta);
    const __nv_bfloat16 *a = static_cast<const __nv_bfloat16 *>(A), *b = static_cast<const __nv_bfloat16 *>(B);
    float *c = static_cast<float *>(C);
    const size_t as_i = transa == CUBLAS_OP_N ? 1 : (size_t)lda, as_l = transa == CUBLAS_OP_N ? (size_t)lda : 1;
    const size_t bs_l = transb == CUBLAS_OP_N ? 1 : (size_t)ldb, bs_j = transb == CUBLAS_OP_N ? (size_t)ldb : 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int l = 0; l < k; l++)
                acc += __bfloat162float(a[i * as_i + l * as_l]) * __bfloat162float(b[l * bs_l + j * bs_j]);
            float r = al * acc;
            float *ci = c + i + (size_t)j * ldc;
            if (be != 0.0f) r += be * *ci;
            *ci = r;
        }
    return CUBLAS_STATUS_SUCCESS;
}
