#include "plugin.h"
#include "../../methods/method.h"
#include "../../workloads/sha256.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PLUGINS 32

static struct {
    char *path;
    char sha[65];
} loaded[MAX_PLUGINS];
static int n_loaded;

int kv_plugin_count(void) { return n_loaded; }
const char *kv_plugin_path(int i) { return i >= 0 && i < n_loaded ? loaded[i].path : NULL; }
const char *kv_plugin_sha256(int i) { return i >= 0 && i < n_loaded ? loaded[i].sha : NULL; }

/* The most a plugin file may hold: a shared object of a method is far below it. */
#define MAX_PLUGIN_BYTES ((size_t)1 << 30)

/* 0 when path is a regular file of at most MAX_PLUGIN_BYTES, else -1 with why (a
 * directory, a device such as /dev/zero, a FIFO: none is read). */
static int plugin_file_ok(const char *path, char *err, size_t errlen) {
    struct stat sb;
    if (stat(path, &sb)) return snprintf(err, errlen, "%s: cannot read the plugin: %s", path, strerror(errno)), -1;
    if (S_ISDIR(sb.st_mode))
        return snprintf(err, errlen, "%s: is a directory; --plugin takes a shared object (FILE.so)", path), -1;
    if (!S_ISREG(sb.st_mode))
        return snprintf(err, errlen, "%s: not a regular file (a device, FIFO or socket); --plugin takes a shared object",
                        path),
               -1;
    if ((unsigned long long)sb.st_size > MAX_PLUGIN_BYTES)
        return snprintf(err, errlen, "%s: %lld bytes, more than a plugin may hold (%zu)", path, (long long)sb.st_size,
                        MAX_PLUGIN_BYTES),
               -1;
    return 0;
}

/* sha256 of the file's bytes (at most MAX_PLUGIN_BYTES); 0 or -1 (errno set). */
static int file_sha256(const char *path, char hex[65]) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 1 << 20, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) {
            if (cap > MAX_PLUGIN_BYTES) {   /* grew since it was checked */
                free(buf), buf = NULL;
                break;
            }
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) return free(buf), errno = bad && !buf ? ENOMEM : EIO, -1;
    sha256_hex(buf, n, hex);
    free(buf);
    return 0;
}

static int load_one(const char *path, char *err, size_t errlen) {
    for (int i = 0; i < n_loaded; i++)
        if (!strcmp(loaded[i].path, path)) return 0;   /* named twice: once is enough */
    if (n_loaded >= MAX_PLUGINS) return snprintf(err, errlen, "%s: more than %d plugins", path, MAX_PLUGINS), -1;
    char sha[65];
    if (plugin_file_ok(path, err, errlen)) return -1;
    if (file_sha256(path, sha)) return snprintf(err, errlen, "%s: cannot read the plugin: %s", path, strerror(errno)), -1;
    /* a path without '/' would make dlopen search the library path, not this file */
    char rel[4096];
    snprintf(rel, sizeof rel, "%s%s", strchr(path, '/') ? "" : "./", path);
    void *h = dlopen(rel, RTLD_NOW | RTLD_LOCAL);
    if (!h) return snprintf(err, errlen, "%s: not a loadable plugin: %s", path, dlerror()), -1;
    kv_plugin_fn fn;
    *(void **)&fn = dlsym(h, KV_PLUGIN_SYMBOL);   /* POSIX's way to read a function pointer */
    if (!fn) {
        dlclose(h);
        return snprintf(err, errlen, "%s: exports no %s() (see docs/write-a-method.md)", path, KV_PLUGIN_SYMBOL), -1;
    }
    int n = 0;
    const kv_method *const *tables = fn(&n);
    if (!tables || n < 1) {
        dlclose(h);
        return snprintf(err, errlen, "%s: %s() returned no methods", path, KV_PLUGIN_SYMBOL), -1;
    }
    char *keep = strdup(path);
    if (!keep) return snprintf(err, errlen, "%s: out of memory", path), -1;
    for (int i = 0; i < n; i++)
        if (kv_method_register(tables[i], path, err, errlen)) return free(keep), -1;   /* h stays: tables live there */
    loaded[n_loaded].path = keep;
    memcpy(loaded[n_loaded++].sha, sha, sizeof sha);
    return 0;
}

int kv_plugins_load(int *argc, char **argv, char *err, size_t errlen) {
    const char *env = getenv("KVBENCH_PLUGINS");
    if (env && *env) {
        char *list = strdup(env), *save = NULL;
        if (!list) return snprintf(err, errlen, "KVBENCH_PLUGINS: out of memory"), -1;
        for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save))
            if (load_one(p, err, errlen)) return free(list), -1;
        free(list);
    }
    int out = 0;
    for (int i = 0; i < *argc; i++) {
        const char *file = NULL;
        if (!strcmp(argv[i], "--plugin")) {
            if (i + 1 >= *argc) return snprintf(err, errlen, "--plugin needs a file (a shared object)"), -1;
            file = argv[++i];
        } else if (!strncmp(argv[i], "--plugin=", 9)) {
            file = argv[i] + 9;
        }
        if (!file) {
            argv[out++] = argv[i];
            continue;
        }
        if (!*file) return snprintf(err, errlen, "--plugin: empty file name"), -1;
        if (load_one(file, err, errlen)) return -1;
    }
    argv[out] = NULL;
    *argc = out;
    return 0;
}
