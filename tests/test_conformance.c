/* Conformance of every registered method (kv_method_count / kv_method_at: a new method is
 * covered with no edit here): the checks of methods/conformance.c (the same code `kvbench
 * conformance` runs), 5 random scenarios per decode rule and method, from a fresh seed
 * each run (KVBENCH_TEST_SEED replays one). */
#include "../methods/conformance.h"
#include "check.h"

int main(void) {
    uint64_t seed = test_seed();
    CHECK(kv_method_count() > 0, "no methods registered");
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_method *m = kv_method_at(i);
        long checks = 0, failed = kv_conformance(m, seed + (uint64_t)i, 5, stdout, &checks);
        check_count += (int)checks - 1;   /* the CHECK below counts one more */
        CHECK(failed == 0, "%s: %ld of %ld conformance checks failed (lines above)", m->name, failed, checks);
    }
    return check_done("test_conformance");
}
