// CPU emulation of the cuSOLVER Jacobi SVD calls that kernels/cuda_svd.cu makes, with
// LAPACK's sgesvd and cuSOLVER's documented layout: column-major A (m x n, lda), S sorted
// descending, and U and V (not V^T): economy size (m x k, n x k) for gesvdj with econ = 1,
// full size (m x m, n x n) for gesvdjBatched. See cuda_runtime.h in this directory.
#ifndef KB_CUSOLVER_EMU_H
#define KB_CUSOLVER_EMU_H
#include "cuda_runtime.h"

typedef int cusolverStatus_t;
enum { CUSOLVER_STATUS_SUCCESS = 0, CUSOLVER_STATUS_INVALID_VALUE = 3, CUSOLVER_STATUS_NOT_SUPPORTED = 8 };
typedef enum { CUSOLVER_EIG_MODE_NOVECTOR = 0, CUSOLVER_EIG_MODE_VECTOR = 1 } cusolverEigMode_t;
typedef struct kbemu_solver *cusolverDnHandle_t;
typedef struct kbemu_gesvdj *gesvdjInfo_t;

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *h);
cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t h);
cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t h, cudaStream_t stream);
cusolverStatus_t cusolverDnCreateGesvdjInfo(gesvdjInfo_t *p);
cusolverStatus_t cusolverDnDestroyGesvdjInfo(gesvdjInfo_t p);
cusolverStatus_t cusolverDnXgesvdjSetMaxSweeps(gesvdjInfo_t p, int sweeps);
cusolverStatus_t cusolverDnXgesvdjSetSortEig(gesvdjInfo_t p, int sort);
cusolverStatus_t cusolverDnSgesvdj_bufferSize(cusolverDnHandle_t h, cusolverEigMode_t jobz, int econ, int m, int n,
                                              const float *A, int lda, const float *S, const float *U, int ldu,
                                              const float *V, int ldv, int *lwork, gesvdjInfo_t p);
cusolverStatus_t cusolverDnSgesvdj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int econ, int m, int n, float *A,
                                   int lda, float *S, float *U, int ldu, float *V, int ldv, float *work, int lwork,
                                   int *info, gesvdjInfo_t p);
cusolverStatus_t cusolverDnSgesvdjBatched_bufferSize(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n,
                                                     const float *A, int lda, const float *S, const float *U, int ldu,
                                                     const float *V, int ldv, int *lwork, gesvdjInfo_t p, int batch);
cusolverStatus_t cusolverDnSgesvdjBatched(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, float *A,
                                          int lda, float *S, float *U, int ldu, float *V, int ldv, float *work,
                                          int lwork, int *info, gesvdjInfo_t p, int batch);
#endif
