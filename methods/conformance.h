/* The conformance checks every method must pass (rows within the decode rule, memory()
 * consistent with rows(), the same rows under every element type, finite outputs,
 * determinism, refusal of bad parameters; the list is in conformance.c), as library code:
 * tests/test_conformance.c runs them on every registered method and `kvbench conformance`
 * on any, a plugin's included. */
#ifndef KV_CONFORMANCE_H
#define KV_CONFORMANCE_H
#include <stdint.h>
#include <stdio.h>
#include "method.h"

/* Runs the checks on m (a registered, resolved method) over `trials` random scenarios per
 * decode rule drawn from seed; writes one line per failure and one summary line per (rule,
 * element type) to out (may be NULL). Returns the failures (0 = conforms); *checks
 * (optional) receives the count of checks made. Not thread safe. */
long kv_conformance(const kv_method *m, uint64_t seed, int trials, FILE *out, long *checks);
/* The same with the method's parameters set to params ("key=value,..."; NULL = the
 * defaults) in every scenario. Each scenario is announced on out (flushed) before it runs,
 * and runs in a child process: a crash is one failure naming the method, the rule, the
 * scenario and the seed, and one that runs past 600 s (KVBENCH_CONFORMANCE_SECONDS) is
 * stopped and reported as hung (KVBENCH_CONFORMANCE_INPROCESS=1 runs them in this process,
 * for a debugger). */
long kv_conformance_params(const kv_method *m, const char *params, uint64_t seed, int trials, FILE *out,
                           long *checks);

#endif
