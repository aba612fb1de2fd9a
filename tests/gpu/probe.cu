// The GPU check's first look at the device (tests/gpu/check.sh builds it alone with nvcc,
// before anything else, so it needs no other library): the CUDA runtime this toolkit
// links, the CUDA version the driver supports, and each device. Exit status:
//   0  a device is usable        2  no driver, or the driver is older than the toolkit
//   3  no usable device          4  no device of sm_90 or later (the build carries sm_90 only)
// The last line of a failure is one sentence saying why.
#include <cuda_runtime.h>

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
    printf("probe: device 0 usable\n");
    return 0;
}
