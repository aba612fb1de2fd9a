/* train-sekv's checkpoint (train_ckpt.c): everything a run needs to go on from a step
 * after --time-limit stopped it (exit 3), tied to its configuration by a hash. */
#ifndef KB_TRAIN_CKPT_H
#define KB_TRAIN_CKPT_H
#include "sekv_train.h"
#include <stddef.h>
#include <stdint.h>

/* Writes path (through path.tmp and a rename). 0, or -1 with err. */
int train_ckpt_save(const char *path, uint64_t hash, int next, uint64_t rng, int best_step, double best_held,
                    const sekv_tparams *th, const sekv_tparams *mo, const sekv_tparams *vo, const sekv_tparams *best,
                    const int *order, int n_order, char *err, size_t errlen);

/* Reads path into the arrays (allocated by the caller, th->n scalars each) and order (cap
 * entries) for a run of steps steps. 1 = resumed, with 0 <= *next <= steps and
 * -1 <= *best_step < *next (a finite *best_held when >= 0, else +inf); 0 = no file (a
 * fresh start); -1 = unusable: another configuration (hash or size), a bad or out-of-range
 * header, truncated, trailing bytes, a non-finite value or an order entry outside
 * 0..cap-1 (err names why; the outputs may be partly written). */
int train_ckpt_load(const char *path, uint64_t hash, int *next, uint64_t *rng, int *best_step, double *best_held,
                    sekv_tparams *th, sekv_tparams *mo, sekv_tparams *vo, sekv_tparams *best, int *order, int cap,
                    int steps, int *n_order, char *err, size_t errlen);

/* The header of path alone (no hash: that needs the documents) checked against a run of
 * steps steps, before any work: 1 plausible, 0 no file, -1 refused (err, as load says). */
int train_ckpt_peek(const char *path, int steps, char *err, size_t errlen);

#endif
