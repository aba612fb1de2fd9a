/* Fuzz target: every text metric on arbitrary bytes (invalid UTF-8 included), input
 * "PRED\tREF"; and py_lower's output bound (at most twice the input's bytes), which its
 * buffer relies on. */
#include "fuzz.h"
#include "../../workloads/metrics.h"
#include "../../workloads/pystr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n > 4096) return 0;
    char *s = fuzz_str(data, n), *tab = strchr(s, '\t');
    const char *pred = s, *ref = tab ? tab + 1 : "x";
    if (tab) *tab = 0;
    const char *refs[2] = {ref, pred};
    const char *cls[3] = {ref, "Human", "Location"};
    metric_qa_f1(pred, ref);
    metric_rouge_l(pred, ref);
    metric_rouge_lsum(pred, ref);
    metric_classification(pred, ref, cls, 3);
    metric_retrieval(pred, ref);
    metric_count(pred, ref);
    metric_code_sim(pred, ref);
    metric_match_all(pred, refs, 2);
    metric_match_part(pred, refs, 2);
    metric_first_int(pred, ref);
    metric_kv_word(pred, ref);
    metric_choice(pred, ref, "B");
    metric_code_debug(pred, ref, "B");
    char *low = py_lower(pred), *st = py_strip(pred);
    if (!low || !st || strlen(low) > 2 * strlen(pred)) abort();
    free(low); free(st);
    free(s);
    return 0;
}
