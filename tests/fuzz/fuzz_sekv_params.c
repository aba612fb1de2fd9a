/* Fuzz target: SeKV's parameter file reader (header, sizes, checksum, shapes). */
#include "fuzz.h"
#include "../../methods/sekv/sekv_params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char err[512];
    sekv_params p;
    memset(&p, 0, sizeof p);
    if (sekv_params_load(&p, fuzz_file(data, n), 0, err, sizeof err) == 0) {
        (void)sekv_params_check_shape(&p, "fuzz", 30, 9, 64, err, sizeof err);
        size_t k = sekv_params_count(&p);
        float sum = 0;
        for (size_t i = 0; i < k; i++) sum += p.W[i];      /* every value readable */
        if (sum != sum && k == 0) abort();
        sekv_params_free(&p);
    }
    return 0;
}
