// The GPU check's first look at the device (tests/gpu/check.sh builds it alone with nvcc,
// before anything else, linking only the toolkit's cuBLAS and cuSOLVER, so a missing one
// shows here and not at the end of the build): the CUDA runtime this toolkit links, the
// CUDA version the driver supports, each device, and the device memory the CUDA context
// and the two libraries' handles take (reported once; the runs' peaks exclude it). Exit status:
//   0  a device is usable        2  no driver, or the driver is older than the toolkit
//   3  no usable device          4  no device of sm_90 or later (the build carries sm_90 only)
//   5  cuBLAS or cuSOLVER cannot start on it
// The last line of a failure is one sentence saying why.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <cstdio>

static void ver(char *buf, size_t n, int v) { snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10); }

int main() {
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    char r[16], d[16];
    ver(r, sizeof r, rt);
    ver(d, sizeof d, drv);
    printf("probe: CUDA runtime %s (the toolkit's), driver supports CUDA %s\n", r, drv ? d : "- (no driver)");
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (drv == 0) {
        printf("probe: no CUDA driver on this machine (cudaGetDeviceCount: %s)\n", cudaGetErrorString(e));
        return 2;
    }
    // Within one major version a newer runtime still runs sm_90 code on an older driver
    // (minor version compatibility); across majors, or when the runtime says so, it does not.
    if (e == cudaErrorInsufficientDriver || drv / 1000 < rt / 1000) {
        printf("probe: the toolkit (CUDA %s) is newer than the driver (CUDA %s): use an older toolkit\n", r, d);
        return 2;
    }
    if (drv < rt) printf("probe: note: driver CUDA %s is older than the toolkit's %s (minor version compatibility)\n", d, r);
    if (e != cudaSuccess || count == 0) {
        printf("probe: no usable CUDA device (cudaGetDeviceCount: %s, %d devices)\n", cudaGetErrorString(e), count);
        return 3;
    }
    int best = -1;
    for (int i = 0; i < count; i++) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        printf("probe: device %d: %s, sm_%d%d, %.1f GiB, %d SMs\n", i, p.name, p.major, p.minor,
               p.totalGlobalMem / 1073741824.0, p.multiProcessorCount);
        if (best < 0 && p.major >= 9) best = i;
    }
    if (best != 0) {
        printf("probe: device 0 is not sm_90 or later; this build carries sm_90 code only\n");
        return 4;
    }
    e = cudaSetDevice(0);
    if (e == cudaSuccess) e = cudaFree(nullptr);   // creates the context
    if (e != cudaSuccess) {
        printf("probe: creating a context on device 0 failed: %s\n", cudaGetErrorString(e));
        return 3;
    }
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess)
        printf("probe: cuda context: %.1f MiB of device memory in use after creating it (context, other processes)\n",
               (tot - fr) / 1048576.0);
    cublasHandle_t bl = nullptr;
    cusolverDnHandle_t so = nullptr;
    cublasStatus_t bs = cublasCreate(&bl);
    cusolverStatus_t ss = cusolverDnCreate(&so);
    if (bs != CUBLAS_STATUS_SUCCESS || ss != CUSOLVER_STATUS_SUCCESS) {
        printf("probe: %s cannot start on device 0 (status %d)\n", bs != CUBLAS_STATUS_SUCCESS ? "cuBLAS" : "cuSOLVER",
               bs != CUBLAS_STATUS_SUCCESS ? (int)bs : (int)ss);
        return 5;
    }
    size_t fr2 = 0;
    if (cudaMemGetInfo(&fr2, &tot) == cudaSuccess)
        printf("probe: cuda context with cuBLAS and cuSOLVER handles: %.1f MiB in use\n", (tot - fr2) / 1048576.0);
    cusolverDnDestroy(so);
    cublasDestroy(bl);
    printf("probe: device 0 usable\n");
    return 0;
}
