/* --params for the run drivers: per-method parameter overrides,
 *   "METHOD:key=value,key=value;METHOD2:key=value"
 * validated against each method's declared parameters (their values are checked by the
 * methods themselves before the first case: run_ident.h). A value equal to the default
 * is dropped, so it records and identifies as the default. The rest are recorded with
 * every result and are part of the run's identity, so an ablation is its own run in the
 * same file (kvbench report --run all --table ablation pools them). */
#ifndef KV_METHOD_PARAMS_H
#define KV_METHOD_PARAMS_H
#include <stddef.h>
#include "../../methods/method.h"

enum { MPARAMS_MAX = 16 };

typedef struct {
    int n;
    const kv_method *m[MPARAMS_MAX];
    char p[MPARAMS_MAX][256];
} method_params;

/* 0, or -1 with a one-line reason (unknown method, unknown key, bad syntax). */
int mparams_parse(method_params *mp, const char *spec, char *err, size_t errlen);
/* The override string for m, or NULL (the method's defaults). */
const char *mparams_get(const method_params *mp, const kv_method *m);
/* A canonical form for run keys: "m1:p1;m2:p2" in the given order ("" when none). */
void mparams_canon(const method_params *mp, char *buf, size_t n);

#endif
