/* train-sekv's checkpoint file (train_ckpt.h): magic, the configuration hash, the next
 * step, the shuffle state, the best held-out state, the four parameter-shaped arrays
 * (parameters, Adam moments, best parameters) and the current stage epoch's document
 * order. Written to FILE.tmp and renamed, so an interrupted write leaves the previous one;
 * read back only whole, finite and for the same configuration. */
#include "train_ckpt.h"
#include "../../../kernels/host.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char CKPT_MAGIC[8] = {'K', 'V', 'S', 'E', 'K', 'V', 'C', '1'};

int train_ckpt_save(const char *path, uint64_t hash, int next, uint64_t rng, int best_step, double best_held,
                    const sekv_tparams *th, const sekv_tparams *mo, const sekv_tparams *vo, const sekv_tparams *best,
                    const int *order, int n_order, char *err, size_t errlen) {
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return snprintf(err, errlen, "--checkpoint %.900s.tmp: cannot write (%s)", path, strerror(errno)), -1;
    int64_t hdr[6] = {(int64_t)hash, next, (int64_t)rng, best_step, (int64_t)th->n, n_order};
    int ok = fwrite(CKPT_MAGIC, 1, 8, f) == 8 && fwrite(hdr, sizeof hdr, 1, f) == 1 &&
             fwrite(&best_held, sizeof best_held, 1, f) == 1;
    const sekv_tparams *arr[4] = {th, mo, vo, best};
    for (int i = 0; i < 4 && ok; i++) ok = fwrite(arr[i]->W, sizeof *arr[i]->W, th->n, f) == th->n;
    ok = ok && (n_order == 0 || fwrite(order, sizeof *order, (size_t)n_order, f) == (size_t)n_order);
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        remove(tmp);
        return snprintf(err, errlen, "--checkpoint %s: write failed (%s)", path, strerror(errno)), -1;
    }
    return 0;
}

/* The header's steps and best state for a run of `steps` steps and an order of at most
 * cap documents: 0, or -1 with err. */
static int check_header(const char *path, const int64_t hdr[6], double bh, int steps, int cap, char *err,
                        size_t errlen) {
    if (hdr[1] < 0 || hdr[1] > steps)   /* the hash covers --steps: a step past it is corrupt */
        snprintf(err, errlen, "--checkpoint %s: corrupt header: next step %lld is outside 0..%d", path,
                 (long long)hdr[1], steps);
    else if (hdr[3] < -1 || hdr[3] >= hdr[1])
        snprintf(err, errlen, "--checkpoint %s: corrupt header: best step %lld is outside -1..%lld", path,
                 (long long)hdr[3], (long long)hdr[1] - 1);
    else if (hdr[3] < 0 ? bh != INFINITY : !isfinite(bh))   /* no held-out check yet: +inf */
        snprintf(err, errlen, "--checkpoint %s: corrupt header: best held-out loss %g after step %lld", path, bh,
                 (long long)hdr[3] + 1);
    else if (hdr[5] < 0 || hdr[5] > cap)
        snprintf(err, errlen, "--checkpoint %s: corrupt header: %lld documents in the order, at most %d", path,
                 (long long)hdr[5], cap);
    else
        return 0;
    return -1;
}

/* magic, header and best loss: 1, or -1 when they are not those of a checkpoint (err) */
static int read_header(FILE *f, const char *path, int64_t hdr[6], double *bh, char *err, size_t errlen) {
    char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, CKPT_MAGIC, 8) || fread(hdr, sizeof *hdr, 6, f) != 6 ||
        fread(bh, sizeof *bh, 1, f) != 1)
        return snprintf(err, errlen, "--checkpoint %s: not a train-sekv checkpoint (bad header)", path), -1;
    return 1;
}

/* The checkpoint opened for reading, refused without blocking if it is not a regular file
 * (a FIFO, a device); NULL with *missing = 1 when there is none yet, else with err. */
static FILE *open_ckpt(const char *path, int *missing, char *err, size_t errlen) {
    char why[160];
    FILE *f = kb_fopen_regular(path, KB_CAP_DEFAULT, why, sizeof why);
    *missing = !f && errno == ENOENT;
    if (!f && !*missing) snprintf(err, errlen, "--checkpoint %s: %s", path, why);
    return f;
}

int train_ckpt_peek(const char *path, int steps, char *err, size_t errlen) {
    int missing;
    FILE *f = open_ckpt(path, &missing, err, errlen);
    if (!f) return missing ? 0 : -1;
    int64_t hdr[6];
    double bh;
    int rc = read_header(f, path, hdr, &bh, err, errlen);
    fclose(f);
    if (rc > 0 && check_header(path, hdr, bh, steps, INT_MAX, err, errlen)) rc = -1;
    return rc;
}

int train_ckpt_load(const char *path, uint64_t hash, int *next, uint64_t *rng, int *best_step, double *best_held,
                    sekv_tparams *th, sekv_tparams *mo, sekv_tparams *vo, sekv_tparams *best, int *order, int cap,
                    int steps, int *n_order, char *err, size_t errlen) {
    int missing;
    FILE *f = open_ckpt(path, &missing, err, errlen);
    if (!f) return missing ? 0 : -1;
    int64_t hdr[6];
    double bh;
    int rc = -1, usable = read_header(f, path, hdr, &bh, err, errlen) > 0;
    if (usable && ((uint64_t)hdr[0] != hash || hdr[4] != (int64_t)th->n)) {
        snprintf(err, errlen,
                 "--checkpoint %s: written by a different configuration (options, documents or teacher data); "
                 "remove it or pass another file",
                 path);
        usable = 0;
    }
    if (usable && check_header(path, hdr, bh, steps, cap, err, errlen)) usable = 0;
    if (usable) {
        sekv_tparams *arr[4] = {th, mo, vo, best};
        int ok = 1;
        for (int i = 0; i < 4 && ok; i++) ok = fread(arr[i]->W, sizeof *arr[i]->W, th->n, f) == th->n;
        ok = ok && (hdr[5] == 0 || fread(order, sizeof *order, (size_t)hdr[5], f) == (size_t)hdr[5]);
        ok = ok && fgetc(f) == EOF;
        for (size_t i = 0; ok && i < th->n; i++)
            ok = isfinite(th->W[i]) && isfinite(mo->W[i]) && isfinite(vo->W[i]) && (hdr[3] < 0 || isfinite(best->W[i]));
        for (int i = 0; ok && i < hdr[5]; i++) ok = order[i] >= 0 && order[i] < cap;
        if (!ok) snprintf(err, errlen, "--checkpoint %s: truncated or corrupt", path);
        else {
            *next = (int)hdr[1], *rng = (uint64_t)hdr[2], *best_step = (int)hdr[3], *n_order = (int)hdr[5];
            *best_held = bh;
            rc = 1;
        }
    }
    fclose(f);
    return rc;
}
