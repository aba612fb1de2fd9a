/* kernels/host.c's bounded reads (issue 36): kb_read_file_capped returns a regular file's
 * bytes exactly (random contents and sizes, NUL-terminated), refuses one over its cap (at
 * the byte), and refuses without blocking or reading a FIFO (no writer: the open would
 * block forever), /dev/zero, a directory, with errno and a message; kb_read_file keeps its
 * old contract; kb_fopen_regular and kb_open_regular refuse the same. An alarm turns any
 * block into a failure. */
#include "check.h"
#include "../kernels/host.h"
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_read_file: blocked (a read that should have been refused)\n";
    if (write(2, msg, sizeof msg - 1)) {}
    _exit(1);
}

int main(void) {
    test_seed();
    signal(SIGALRM, on_alarm);
    alarm(30);
    char dir[] = "/tmp/kvbench-read-file-XXXXXX", path[128], why[160];
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(path, sizeof path, "%s/data", dir);

    for (int trial = 0; trial < 20; trial++) {
        size_t n = trial == 0 ? 0 : (size_t)test_int(1, trial < 10 ? 300 : 200000);
        unsigned char *want = malloc(n + 1);
        for (size_t i = 0; i < n; i++) want[i] = (unsigned char)test_next();
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(want, 1, n, f) == n, "write %zu bytes", n);
        fclose(f);
        size_t len = (size_t)-1;
        char *got = kb_read_file_capped(path, n, &len, why, sizeof why);   /* exactly at the cap */
        CHECK(got && len == n && !memcmp(got, want, n) && got[n] == 0, "%zu bytes read back at cap %zu: %s", n, n,
              got ? "differ" : why);
        free(got);
        got = kb_read_file(path, &len);
        CHECK(got && len == n && !memcmp(got, want, n), "kb_read_file of %zu bytes", n);
        free(got);
        if (n > 0) {
            errno = 0;
            got = kb_read_file_capped(path, n - 1, &len, why, sizeof why);
            CHECK(!got && errno == EFBIG && strstr(why, "larger than the"), "%zu bytes at cap %zu: errno %d, '%s'", n,
                  n - 1, errno, why);
            free(got);
        }
        free(want);
    }
    size_t size, len;
    CHECK(kb_open_regular(path, 1 << 20, &size, why, sizeof why) >= 0, "a regular file opens: %s", why);

    /* a FIFO with no writer: never opened for reading, so nothing blocks */
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    CHECK(!mkfifo(fifo, 0600), "mkfifo");
    errno = 0;
    CHECK(!kb_read_file_capped(fifo, 1 << 20, &len, why, sizeof why) && errno == EINVAL &&
              !strcmp(why, "not a regular file (a FIFO)"), "FIFO: errno %d, '%s'", errno, why);
    CHECK(!kb_fopen_regular(fifo, 1 << 20, why, sizeof why) && !strcmp(why, "not a regular file (a FIFO)"),
          "FIFO as a stream: '%s'", why);
    CHECK(!kb_read_file(fifo, &len) && errno == EINVAL, "kb_read_file of a FIFO: errno %d", errno);
    /* /dev/zero: endless, refused before a byte is read */
    CHECK(!kb_read_file_capped("/dev/zero", (size_t)1 << 30, &len, why, sizeof why) &&
              !strcmp(why, "not a regular file (a character device)"), "/dev/zero: '%s'", why);
    CHECK(!kb_read_file_capped(dir, 1 << 20, &len, why, sizeof why) && errno == EISDIR &&
              !strcmp(why, "not a regular file (a directory)"), "a directory: errno %d, '%s'", errno, why);
    snprintf(path, sizeof path, "%s/none", dir);
    CHECK(!kb_read_file_capped(path, 1 << 20, &len, why, sizeof why) && errno == ENOENT &&
              !strcmp(why, "cannot open: No such file or directory"), "missing: errno %d, '%s'", errno, why);

    snprintf(path, sizeof path, "%s/data", dir);
    unlink(path);
    unlink(fifo);
    rmdir(dir);
    return check_done("test_read_file");
}
