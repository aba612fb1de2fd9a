/* Host plumbing every layer uses, kept once (see host.h). */
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double kb_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *kb_cache_path(const char *leaf, char *buf, size_t len) {
    const char *cache = getenv("KVBENCH_CACHE"), *home = getenv("HOME");
    const char *sep = leaf && *leaf ? "/" : "";
    if (!leaf) leaf = "";
    if (cache && *cache) snprintf(buf, len, "%s%s%s", cache, sep, leaf);
    else snprintf(buf, len, "%s/.cache/kvbench%s%s", home && *home ? home : ".", sep, leaf);
    return buf;
}

static const char *kind_of(mode_t m) {
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISDIR(m) ? "a directory" : S_ISSOCK(m) ? "a socket" : "not a plain file";
}

/* "300 MiB" or "4096 bytes" */
static void size_words(char *buf, size_t n, double bytes) {
    if (bytes >= 1 << 20) snprintf(buf, n, "%.0f MiB", bytes / 1048576.0);
    else snprintf(buf, n, "%.0f bytes", bytes);
}

int kb_open_regular(const char *path, size_t cap, size_t *size, char *why, size_t whylen) {
    struct stat st;
    /* stat first: nothing that is not a regular file is opened at all (a FIFO's writer
     * would wake, a tape rewind); then open without blocking and fstat again, in case the
     * file was swapped in between */
    int fd = stat(path, &st) ? -1 : !S_ISREG(st.st_mode) ? -2 : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd == -2) goto not_regular;
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "cannot open: %s", strerror(e));
        errno = e;
        return -1;
    }
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        snprintf(why, whylen, "cannot open: %s", strerror(e));
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        goto not_regular;
    }
    if ((uint64_t)st.st_size > (uint64_t)cap) {
        close(fd);
        char have[32], lim[32];
        size_words(have, sizeof have, (double)st.st_size);
        size_words(lim, sizeof lim, (double)cap);
        snprintf(why, whylen, "is %s, larger than the %s kvbench reads", have, lim);
        errno = EFBIG;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *size = (size_t)st.st_size;
    return fd;
not_regular:
    snprintf(why, whylen, "not a regular file (%s)", kind_of(st.st_mode));
    errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    return -1;
}

FILE *kb_fopen_regular(const char *path, size_t cap, char *why, size_t whylen) {
    size_t size;
    int fd = kb_open_regular(path, cap, &size, why, whylen);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        snprintf(why, whylen, "cannot open: %s", strerror(e));
        errno = e;
    }
    return f;
}

char *kb_read_file_capped(const char *path, size_t cap, size_t *len, char *why, size_t whylen) {
    size_t size;
    int fd = kb_open_regular(path, cap, &size, why, whylen);
    if (fd < 0) return NULL;
    /* read to the end, not to st_size: a file that grows meanwhile still stops at cap */
    size_t n = 0, room = size + 1;
    char *b = malloc(room + 1);
    int e = 0;
    while (b) {
        if (n == room) {
            if (room > cap) break;
            size_t more = room > cap - room ? cap + 1 : 2 * room;
            char *nb = realloc(b, more + 1);
            if (!nb) { free(b); b = NULL; break; }
            b = nb, room = more;
        }
        ssize_t r = read(fd, b + n, room - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { e = errno; break; }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (!b) {
        snprintf(why, whylen, "out of memory");
        errno = ENOMEM;
        return NULL;
    }
    if (e || n > cap) {
        free(b);
        char lim[32];
        size_words(lim, sizeof lim, (double)cap);
        if (e) snprintf(why, whylen, "read error: %s", strerror(e));
        else snprintf(why, whylen, "grew past the %s kvbench reads", lim);
        errno = e ? e : EFBIG;
        return NULL;
    }
    b[n] = 0;
    *len = n;
    return b;
}

char *kb_read_file(const char *path, size_t *len) {
    char why[160];
    return kb_read_file_capped(path, KB_CAP_DEFAULT, len, why, sizeof why);
}

void kb_vcomplain(const char *cmd, const char *fmt, va_list ap) {
    fprintf(stderr, "kvbench %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int kb_parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}
