/* Provenance of a run, gathered without a shell: git runs through fork/exec with an
 * argument vector, in the directory of the running binary (the source tree it was
 * built in), so the working directory of the user does not matter. */
#include "provenance.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Starts argv with its stdout on a pipe (stderr to /dev/null); the read end, or -1. */
static int spawn_stdout(char *const argv[], pid_t *pid) {
    int fd[2];
    if (pipe(fd)) return -1;
    *pid = fork();
    if (*pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (*pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2);
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    return fd[0];
}

/* Closes the pipe and waits: the child's exit status, or -1. */
static int finish(int rd, pid_t pid) {
    close(rd);
    int status;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs argv, capturing the first line of stdout into out; returns the exit status or -1. */
static int run_capture(char *const argv[], char *out, size_t len) {
    pid_t pid;
    int rd = spawn_stdout(argv, &pid);
    if (rd < 0) return -1;
    size_t n = 0;
    ssize_t got;
    char buf[256];
    while ((got = read(rd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < got; i++)
            if (n + 1 < len) out[n++] = buf[i];
    if (len) out[n] = 0;
    char *nl = strchr(out, '\n');
    if (nl) *nl = 0;
    return finish(rd, pid);
}

/* Runs argv and hashes all of its stdout (FNV-1a 64); the exit status or -1. */
static int run_hash(char *const argv[], unsigned long long *hash) {
    pid_t pid;
    int rd = spawn_stdout(argv, &pid);
    if (rd < 0) return -1;
    unsigned long long h = 1469598103934665603ULL;
    ssize_t got;
    unsigned char buf[4096];
    while ((got = read(rd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < got; i++) h = (h ^ buf[i]) * 1099511628211ULL;
    *hash = h;
    return finish(rd, pid);
}

static void git_commit(char *out, size_t len) {
    char exe[PATH_MAX];
    const char *fake = getenv("KVBENCH_GIT_COMMIT");   /* test hook: stands for another commit */
    if (fake && *fake) {
        snprintf(out, len, "%s", fake);
        return;
    }
    snprintf(out, len, "unknown");
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = 0;
    char *dir = dirname(exe);
    char head[64];
    char *rev[] = {"git", "-C", dir, "rev-parse", "HEAD", NULL};
    if (run_capture(rev, head, sizeof head) != 0 || strlen(head) < 7) return;
    /* dirty: the tracked files differ from HEAD; the hash of that diff tells two
     * different sets of uncommitted edits apart (they are different code) */
    unsigned long long h = 0;
    char *diff[] = {"git", "-C", dir, "diff", "--no-ext-diff", "--binary", "HEAD", "--", NULL};
    int st = run_hash(diff, &h);
    char *quiet[] = {"git", "-C", dir, "diff", "--quiet", "HEAD", "--", NULL};
    char ignore[8];
    int dirty = st == 0 && run_capture(quiet, ignore, sizeof ignore) == 1;
    if (dirty) snprintf(out, len, "%s+dirty.%012llx", head, h & 0xffffffffffffULL);
    else snprintf(out, len, "%s", head);
}

static void cpu_model(char *out, size_t len) {
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        colon[strcspn(colon, "\n")] = 0;
        snprintf(out, len, "%s", colon);
        break;
    }
    fclose(f);
}

void provenance_get(provenance *p) {
    git_commit(p->git_commit, sizeof p->git_commit);
    if (gethostname(p->host, sizeof p->host)) snprintf(p->host, sizeof p->host, "unknown");
    p->host[sizeof p->host - 1] = 0;
    cpu_model(p->cpu, sizeof p->cpu);
}
