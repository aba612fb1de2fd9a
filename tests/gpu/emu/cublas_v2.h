// CPU emulation of the cuBLAS calls that model/cuda_model_ops.cu makes (emu_cublas.cpp):
// a handle, a user workspace, the status string, and cublasGemmEx for bf16 A and B with
// an f32 C and f32 compute, with cuBLAS's column-major semantics:
//   C[i + j*ldc] = alpha * sum_l op(A)[i][l] * op(B)[l][j] + beta * C[i + j*ldc]
//   op(A)[i][l] = A[i + l*lda] (CUBLAS_OP_N) or A[l + i*lda] (CUBLAS_OP_T), likewise B;
// C is not read when beta == 0 (so NaN there does not propagate), products of bf16 are
// exact in f32 and are summed in f32 in index order. Leading dimensions are checked as
// cuBLAS documents (lda >= rows of A as stored, ...), every operand must lie in device
// memory, and any other type combination is CUBLAS_STATUS_NOT_SUPPORTED.
#ifndef KB_CUBLAS_EMU_H
#define KB_CUBLAS_EMU_H
#include "cuda_runtime.h"

typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType_t;
typedef cudaDataType_t cudaDataType;

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef struct kbemu_cublas *cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes);
const char *cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);
#endif
