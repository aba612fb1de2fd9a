/* A run's identity beyond its workload, and the configuration check before its first case.
 *
 * Identity: the run key holds the code (provenance.code: the git commit, the build-time
 * sha256 of every compiled source, tracked or not, and each loaded plugin's sha256),
 * every registered method's parameter defaults as the methods read
 * them (methods=...) and the --params overrides (params=..., values equal to a default
 * dropped), which together are each method's effective parameters. So a changed commit or
 * default starts a new run instead of resuming into results of other code, while an
 * ablation differs from its baseline in params= alone (and reports pool the two, rows by
 * params). Methods are all listed, not only the selected ones, because --methods only
 * selects which results to add.
 *
 * Check: every method that will run, and every method --params names, is initialised
 * once on a small setup of the run's shape with its parameters. A refusal there is a
 * configuration error (bad value, unreadable params file): the run stops before its
 * first case with exit 2, and nothing is stored. This uses each method's own init, so a
 * new method gets the check without any change here. */
#ifndef KV_RUN_IDENT_H
#define KV_RUN_IDENT_H
#include <stddef.h>
#include "../drivers/method_params.h"

/* "fullkv:|h2o:heavy_ratio=0.5,one_shot=0,window=0|..." in registry order, every declared
 * parameter in declaration order, with mp's overrides applied (mp NULL: the defaults).
 * 0, or -1 when buf is too small. */
int run_ident_methods(const method_params *mp, char *buf, size_t n);

/* Initialises methods[0..n) and every method in mp on `shape` (its params replaced by
 * each method's overrides); 0, or -1 with err "--params: <the method's reason>". */
int run_check_methods(const kv_method *const *methods, int n, const method_params *mp, const kv_setup *shape,
                      char *err, size_t errlen);

/* The trained state of every registered method that loads some (kv_method.trained_file),
 * in registry order, on `shape` with mp's overrides: the method's name and "none" (it
 * found no file), "?" (it refused the setup, or the file could not be read) or the
 * file's sha256. The trained weights are part of what such a result means, and a build
 * that finds no file (a sanitizer build, a copied binary) runs untrained, so it must not
 * resume a run of one that found it: the drivers put NAME_params_sha256=HEX into the run
 * key. Returns the count (at most cap). */
typedef struct {
    const char *method;
    char hex[65];
} run_trained;
int run_ident_trained(const method_params *mp, const kv_setup *shape, run_trained *out, int cap);

/* kv_init_refused (method.h) tells a configuration refusal from an infeasible case; such a
 * refusal after run_check_methods passed (a params file changed during the run) stops the
 * run, and nothing is stored. */

#endif
