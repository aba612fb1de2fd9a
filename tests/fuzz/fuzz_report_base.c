/* Fuzz target: `kvbench report --base METHOD[@BUDGET][:K=V,..]` (rt_base_parse). A 0 must
 * hand back a registered method, a budget that is NAN (none given) or positive, and
 * settings that are "" or KEY=VALUE items with a key each, comma-separated; else -1 with
 * its one line on stderr. */
#include <math.h>
#include "fuzz.h"
#include "../../methods/method.h"
#include "../../plots/report_tables.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n > 4096) return 0;
    char *arg = fuzz_str(data, n);
    FILE *saved = stderr;
    stderr = fuzz_null();
    rt_base b;
    int rc = rt_base_parse(arg, &b);
    stderr = saved;
    if (rc == 0) {
        if (!kv_method_find(b.method) || !(isnan(b.budget) || b.budget > 0)) abort();
        for (const char *q = b.settings; *q;) {
            size_t len = strcspn(q, ","), key = strcspn(q, "=");
            if (!len || !key || key >= len) abort();
            q += len + (q[len] == ',');
        }
    } else if (rc != -1) {
        abort();
    }
    free(arg);
    return 0;
}
