/* Fuzz target: the RULER qa data reader (workloads/ruler_qa.c) on the input as its file.
 * The first byte picks SQuAD (even) or HotpotQA (odd); the rest is the JSON file, reached
 * through a folder holding squad.json and hotpotqa.json links to it. */
#include "fuzz.h"
#include "../../workloads/ruler_qa.h"

static char dir[64];

static void remove_dir(void) { rmdir(dir); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    snprintf(dir, sizeof dir, "/tmp/kvbench-fuzz-qa-XXXXXX");
    if (!mkdtemp(dir)) { perror("fuzz_ruler_qa: mkdtemp"); exit(1); }
    atexit(remove_dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 1) return 0;
    const char *path = fuzz_file(data + 1, n - 1);
    int squad = !(data[0] & 1);
    char link[128], err[512];
    snprintf(link, sizeof link, "%s/%s", dir, ruler_qa_file(squad));
    unlink(link);
    if (symlink(path, link)) { perror("fuzz_ruler_qa: symlink"); abort(); }
    ruler_qa_data *d = ruler_qa_load(dir, squad, err, sizeof err);
    ruler_qa_free(d);
    unlink(link);
    return 0;
}
