// CPU emulation of the part of cuda_bf16.h that model/cuda_model*.cu use: the bf16
// storage type and the two conversions, with CUDA's rounding (float -> bf16 rounds to
// nearest, ties to even; NaN becomes the canonical quiet NaN 0x7fff, as
// __float2bfloat16 does). See cuda_runtime.h in this directory.
#ifndef KB_CUDA_BF16_EMU_H
#define KB_CUDA_BF16_EMU_H
#include <cstdint>
#include <cstring>

struct alignas(2) __nv_bfloat16 {
    unsigned short __x;
};

inline __nv_bfloat16 __float2bfloat16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.__x = 0x7fff;
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);   // carries into the exponent (and to inf) as RNE does
    r.__x = (unsigned short)(u >> 16);
    return r;
}

inline float __bfloat162float(__nv_bfloat16 h) {
    uint32_t u = (uint32_t)h.__x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
