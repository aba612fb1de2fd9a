/* The same method linked into a program of its own against the installed libkvbench.a:
 * registers it and runs the conformance checks, as `kvbench --plugin randomkeep.so
 * conformance` does through the binary. Exit 0 when every check passes. */
#include <stdio.h>
#include "methods/conformance.h"

const kv_method *const *kvbench_methods(int *n);   /* randomkeep.c */

int main(void) {
    char err[512];
    int n = 0;
    const kv_method *const *tables = kvbench_methods(&n);
    for (int i = 0; i < n; i++)
        if (kv_method_register(tables[i], "randomkeep.c", err, sizeof err)) return fprintf(stderr, "%s\n", err), 2;
    const kv_method *m = kv_method_find("randomkeep");
    long checks = 0, failed = kv_conformance(m, 1, 3, stdout, &checks);
    printf("check_randomkeep: %ld checks, %ld failed\n", checks, failed);
    return failed ? 1 : 0;
}
