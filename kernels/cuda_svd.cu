// Truncated SVD on the device with cuSOLVER's Jacobi SVD (f32).
//
// cuSOLVER is column-major: the row-major A [rows][cols] is, as it lies in memory, the
// column-major M = A^T (cols x rows). Its SVD M = U_M S V_M^T gives A = V_M S U_M^T, so
//   Vt [r][c] = U_M[c][r]: the first rank columns of U_M, which lie in memory exactly as
//               the row-major Vt [rank][cols];
//   U  [i][r] = V_M[i][r]: column r of V_M, transposed into U on the host.
// One block: cusolverDnSgesvdj (economy size). Several blocks of at most 32 x 32:
// cusolverDnSgesvdjBatched (full U_M, V_M); larger blocks: gesvdj one after another.
// Singular values come sorted in descending order; the signs are then fixed with the
// CPU's rule (kb_svd_fix_signs: each Vt row's largest-magnitude entry positive). A block
// that does not converge, or any failing call, is computed on the CPU instead.
extern "C" {
#include "core.h"
#include "cpu.h"
}
#include "cuda_backend.h"
#include "cuda_util.h"

#include <cusolverDn.h>

#include <vector>

#define CS(call)                                                                                  \
    do {                                                                                          \
        cusolverStatus_t st_ = (call);                                                            \
        if (st_ != CUSOLVER_STATUS_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d: %s: cuSOLVER status %d\n", __FILE__, __LINE__, #call, (int)st_); \
            return -1;                                                                            \
        }                                                                                         \
    } while (0)

namespace {

using kbcuda::DevBuf;

constexpr int kBatchedMax = 32;   // gesvdjBatched's limit on rows and columns

cusolverDnHandle_t g_solver = nullptr;
gesvdjInfo_t g_params = nullptr;
DevBuf d_a, d_s, d_u, d_v, d_work, d_info;

int ensure_solver() {
    if (g_solver) return 0;
    cusolverDnHandle_t h = nullptr;
    CS(cusolverDnCreate(&h));
    if (cusolverDnSetStream(h, kbcuda::kStream) != CUSOLVER_STATUS_SUCCESS) {
        cusolverDnDestroy(h);
        fprintf(stderr, "kb cuda svd: cusolverDnSetStream failed\n");
        return -1;
    }
    gesvdjInfo_t p = nullptr;
    if (cusolverDnCreateGesvdjInfo(&p) != CUSOLVER_STATUS_SUCCESS) {
        cusolverDnDestroy(h);
        fprintf(stderr, "kb cuda svd: cusolverDnCreateGesvdjInfo failed\n");
        return -1;
    }
    // defaults made explicit: tolerance = f32 machine accuracy, 100 sweeps, sorted
    if (cusolverDnXgesvdjSetMaxSweeps(p, 100) != CUSOLVER_STATUS_SUCCESS ||
        cusolverDnXgesvdjSetSortEig(p, 1) != CUSOLVER_STATUS_SUCCESS) {
        cusolverDnDestroyGesvdjInfo(p);
        cusolverDnDestroy(h);
        fprintf(stderr, "kb cuda svd: setting the gesvdj parameters failed\n");
        return -1;
    }
    g_solver = h;
    g_params = p;
    return 0;
}

bool bad_shape(int rows, int cols, int rank) {
    int k = rows < cols ? rows : cols;
    if (rows <= 0 || cols <= 0 || rank <= 0 || rank > k) {
        fprintf(stderr, "kb svd: bad shape rows=%d cols=%d rank=%d\n", rows, cols, rank);
        return true;
    }
    return false;
}

// Output of block b from the device factors: U_M holds Vt's rows (column stride ldu),
// V_M holds U's columns (column stride ldv).
void unpack(int rows, int cols, int rank, const float *um, int ldu, const float *vm, int ldv, const float *s,
            float *U, float *S, float *Vt) {
    for (int r = 0; r < rank; r++) {
        S[r] = s[r];
        for (int c = 0; c < cols; c++) Vt[(size_t)r * cols + c] = um[(size_t)r * ldu + c];
        for (int i = 0; i < rows; i++) U[(size_t)i * rank + r] = vm[(size_t)r * ldv + i];
    }
    kb_svd_fix_signs(rows, cols, rank, U, Vt);
}

// One block by gesvdj. 0; 1 when it did not converge (info > 0); -1 on a failing call.
int svd_one(const float *A, int rows, int cols, int rank, float *U, float *S, float *Vt) {
    const int m = cols, n = rows, k = m < n ? m : n;
    const size_t f = sizeof(float);
    if (kbcuda::reserve(d_a, (size_t)m * n * f, "svd input") || kbcuda::reserve(d_s, (size_t)k * f, "svd values") ||
        kbcuda::reserve(d_u, (size_t)m * k * f, "svd U") || kbcuda::reserve(d_v, (size_t)n * k * f, "svd V") ||
        kbcuda::reserve(d_info, sizeof(int), "svd info"))
        return -1;
    float *da = (float *)d_a.p, *ds = (float *)d_s.p, *du = (float *)d_u.p, *dv = (float *)d_v.p;
    CK(cudaMemcpy(da, A, (size_t)m * n * f, cudaMemcpyHostToDevice));
    int lwork = 0;
    CS(cusolverDnSgesvdj_bufferSize(g_solver, CUSOLVER_EIG_MODE_VECTOR, 1, m, n, da, m, ds, du, m, dv, n, &lwork,
                                    g_params));
    if (kbcuda::reserve(d_work, (size_t)(lwork > 0 ? lwork : 1) * f, "svd workspace")) return -1;
    CS(cusolverDnSgesvdj(g_solver, CUSOLVER_EIG_MODE_VECTOR, 1, m, n, da, m, ds, du, m, dv, n, (float *)d_work.p,
                         lwork, (int *)d_info.p, g_params));
    int info = 0;
    CK(cudaMemcpy(&info, d_info.p, sizeof info, cudaMemcpyDeviceToHost));
    if (info < 0) {
        fprintf(stderr, "kb cuda svd: gesvdj rejected parameter %d (%dx%d)\n", -info, rows, cols);
        return -1;
    }
    if (info > 0) return 1;
    std::vector<float> um((size_t)m * rank), vm((size_t)n * rank), s(rank);
    CK(cudaMemcpy(um.data(), du, um.size() * f, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(vm.data(), dv, vm.size() * f, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(s.data(), ds, s.size() * f, cudaMemcpyDeviceToHost));
    unpack(rows, cols, rank, um.data(), m, vm.data(), n, s.data(), U, S, Vt);
    return 0;
}

// Blocks up to 32 x 32 by gesvdjBatched. Blocks that did not converge get done[b] = 0.
int svd_small_batch(const float *A, int batch, int rows, int cols, int rank, float *U, float *S, float *Vt,
                    std::vector<char> &done) {
    const int m = cols, n = rows, k = m < n ? m : n;
    const size_t f = sizeof(float), mn = (size_t)m * n, mm = (size_t)m * m, nn = (size_t)n * n;
    if (kbcuda::reserve(d_a, batch * mn * f, "svd input") || kbcuda::reserve(d_s, (size_t)batch * k * f, "svd values") ||
        kbcuda::reserve(d_u, batch * mm * f, "svd U") || kbcuda::reserve(d_v, batch * nn * f, "svd V") ||
        kbcuda::reserve(d_info, (size_t)batch * sizeof(int), "svd info"))
        return -1;
    float *da = (float *)d_a.p, *ds = (float *)d_s.p, *du = (float *)d_u.p, *dv = (float *)d_v.p;
    CK(cudaMemcpy(da, A, batch * mn * f, cudaMemcpyHostToDevice));
    int lwork = 0;
    CS(cusolverDnSgesvdjBatched_bufferSize(g_solver, CUSOLVER_EIG_MODE_VECTOR, m, n, da, m, ds, du, m, dv, n, &lwork,
                                           g_params, batch));
    if (kbcuda::reserve(d_work, (size_t)(lwork > 0 ? lwork : 1) * f, "svd workspace")) return -1;
    CS(cusolverDnSgesvdjBatched(g_solver, CUSOLVER_EIG_MODE_VECTOR, m, n, da, m, ds, du, m, dv, n,
                                (float *)d_work.p, lwork, (int *)d_info.p, g_params, batch));
    std::vector<int> info(batch);
    std::vector<float> um(batch * mm), vm(batch * nn), s((size_t)batch * k);
    CK(cudaMemcpy(info.data(), d_info.p, info.size() * sizeof(int), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(um.data(), du, um.size() * f, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(vm.data(), dv, vm.size() * f, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(s.data(), ds, s.size() * f, cudaMemcpyDeviceToHost));
    for (int b = 0; b < batch; b++) {
        if (info[b] < 0) {
            fprintf(stderr, "kb cuda svd: gesvdjBatched rejected parameter %d (%dx%d)\n", -info[b], rows, cols);
            return -1;
        }
        if (info[b] > 0) continue;   // not converged: left to the CPU
        unpack(rows, cols, rank, um.data() + b * mm, m, vm.data() + b * nn, n, s.data() + (size_t)b * k,
               U + (size_t)b * rows * rank, S + (size_t)b * rank, Vt + (size_t)b * rank * cols);
        done[b] = 1;
    }
    return 0;
}

// Lock held. Blocks left with done[b] = 0 go to the CPU afterwards.
int svd_device(const float *A, int batch, int rows, int cols, int rank, float *U, float *S, float *Vt,
               std::vector<char> &done) {
    if (ensure_solver()) return -1;
    if (batch > 1 && rows <= kBatchedMax && cols <= kBatchedMax)
        return svd_small_batch(A, batch, rows, cols, rank, U, S, Vt, done);
    for (int b = 0; b < batch; b++) {
        int rc = svd_one(A + (size_t)b * rows * cols, rows, cols, rank, U + (size_t)b * rows * rank,
                         S + (size_t)b * rank, Vt + (size_t)b * rank * cols);
        if (rc < 0) return -1;
        done[b] = rc == 0;
    }
    return 0;
}

}  // namespace

extern "C" int kb_cuda_svd_batched(const float *A, int batch, int rows, int cols, int rank, float *U, float *S,
                                   float *Vt) {
    if (batch < 0 || bad_shape(rows, cols, rank)) return -1;
    if (batch == 0) return 0;
    std::vector<char> done(batch, 0);
    kbcuda::lock();
    int rc = svd_device(A, batch, rows, cols, rank, U, S, Vt, done);
    kbcuda::unlock();
    if (rc) fprintf(stderr, "kb cuda: svd failed on the device; computing it on the CPU\n");
    for (int b = 0; b < batch; b++) {
        if (done[b] && rc == 0) continue;
        if (rc == 0) fprintf(stderr, "kb cuda svd: gesvdj did not converge on a %dx%d block; using the CPU\n", rows, cols);
        if (kb_cpu_svd(A + (size_t)b * rows * cols, rows, cols, rank, U + (size_t)b * rows * rank,
                       S + (size_t)b * rank, Vt + (size_t)b * rank * cols))
            return -1;
    }
    return 0;
}

extern "C" int kb_cuda_svd(const float *A, int rows, int cols, int rank, float *U, float *S, float *Vt) {
    return kb_cuda_svd_batched(A, 1, rows, cols, rank, U, S, Vt);
}
