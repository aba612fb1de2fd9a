/* Shared plumbing of the fuzz targets (tests/fuzz/fuzz_*.c). Each target defines
 * LLVMFuzzerTestOneInput (and optionally LLVMFuzzerInitialize); built with clang's
 * libFuzzer by `make fuzz`, or with standalone.c (any compiler) to replay the committed
 * corpora and regression inputs in `make check`. */
#ifndef KV_FUZZ_H
#define KV_FUZZ_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The input as a file the code under test can open by name: an in-memory file
 * (memfd) reached through /proc/self/fd, rewritten on each call. Returns its path. */
static inline const char *fuzz_file(const uint8_t *data, size_t n) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("kvbench-fuzz", 0);
        if (fd < 0) { perror("fuzz: memfd_create"); abort(); }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || (n && pwrite(fd, data, n, 0) != (ssize_t)n)) { perror("fuzz: write"); abort(); }
    return path;
}

/* The input as a NUL-terminated string (caller frees). */
static inline char *fuzz_str(const uint8_t *data, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, data, n);
    s[n] = 0;
    return s;
}

/* A sink for messages the code under test prints about bad input. */
static inline FILE *fuzz_null(void) {
    static FILE *f;
    if (!f && !(f = fopen("/dev/null", "w"))) abort();
    return f;
}
#endif
