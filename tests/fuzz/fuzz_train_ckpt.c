/* Fuzz target: train-sekv's checkpoint reader (methods/sekv/train/train_ckpt.c): header,
 * configuration hash and size, the four arrays, the document order, trailing bytes. The
 * expected hash is taken from the input's own header (bytes 8-15) so that inputs get past
 * that check and reach the arrays; the size is that of a 1-layer, 1-head model, d 4,
 * rank 8 (the committed seed, tests/fuzz/corpus/train_ckpt/, is one such checkpoint). A
 * resumed checkpoint must hand back what train-sekv's resume relies on: a next step in
 * 0..steps (steps taken from the hash, so that both the bound and the values past it are
 * reached), a best step before it whose +1 (printed, written as train_steps) cannot
 * overflow, a finite best loss once there is a best step, an order within its bounds and
 * finite values. train_ckpt_peek (the header alone, checked when train-sekv starts) must
 * never refuse what the full read resumes. */
#include "fuzz.h"
#include "../../methods/sekv/train/train_ckpt.h"

#include <math.h>

enum { CAP = 16 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    static sekv_tparams t[4];
    static int ready;
    if (!ready) {
        for (int i = 0; i < 4; i++)
            if (sekv_tparams_alloc(&t[i], 1, 1, 4, 8)) abort();
        ready = 1;
    }
    uint64_t hash = 0;
    if (n >= 16) memcpy(&hash, data + 8, sizeof hash);
    int next = -1, best_step = -1, n_order = -1, order[CAP];
    uint64_t rng = 0;
    double held = 0;
    char err[512];
    int steps = (int)(hash % 1000) + 1;
    if ((hash >> 10) % 4 == 0) steps = 10000000;   /* train-sekv's --steps limit */
    int rc = train_ckpt_load(fuzz_file(data, n), hash, &next, &rng, &best_step, &held, &t[0], &t[1], &t[2], &t[3], order,
                             CAP, steps, &n_order, err, sizeof err);
    char perr[512];
    int peek = train_ckpt_peek(fuzz_file(data, n), steps, perr, sizeof perr);   /* the check at start */
    if (peek == 0 || (peek < 0 && rc == 1) || (peek < 0 && !perr[0])) abort();
    if (rc == 1) {
        if (next < 0 || next > steps || n_order < 0 || n_order > CAP) abort();
        if (best_step < -1 || best_step >= next || (best_step >= 0 ? !isfinite(held) : held != INFINITY)) abort();
        if (best_step >= 0)
            for (size_t i = 0; i < t[3].n; i++)
                if (!isfinite(t[3].W[i])) abort();
        for (int i = 0; i < n_order; i++)
            if (order[i] < 0 || order[i] >= CAP) abort();
        for (size_t i = 0; i < t[0].n; i++)
            if (!isfinite(t[0].W[i]) || !isfinite(t[1].W[i]) || !isfinite(t[2].W[i])) abort();
    } else if (rc != -1 || !err[0]) {
        abort();   /* the input exists, so "no file" (0) is wrong too; a refusal says why */
    }
    return 0;
}
