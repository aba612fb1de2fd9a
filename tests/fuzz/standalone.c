/* A main() for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once on
 * each file named (directories: every file inside), so the committed corpora and the
 * inputs of fixed crashes replay in `make check`, under ASan/UBSan with `make SAN=1`. */
#include <dirent.h>
#include <sys/stat.h>
#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "fuzz replay: cannot open %s\n", path); return -1; }
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap && !(buf = realloc(buf, cap *= 2))) break;
    }
    fclose(f);
    if (!buf) { fprintf(stderr, "fuzz replay: out of memory\n"); return -1; }
    uint8_t *copy = malloc(n ? n : 1);      /* exactly n bytes, so ASan sees over-reads */
    memcpy(copy, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(copy, n);
    free(copy);
    return 0;
}

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) { fprintf(stderr, "fuzz replay: no such file %s\n", argv[i]); bad++; continue; }
        if (!S_ISDIR(st.st_mode)) { bad += run_file(argv[i]) != 0; files++; continue; }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
            bad += run_file(p) != 0;
            files++;
        }
        if (d) closedir(d);
    }
    printf("%s: %d inputs replayed\n", argv[0], files);
    return bad ? 1 : 0;
}
