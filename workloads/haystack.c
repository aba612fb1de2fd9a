/* Loading the haystack text (see haystack.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "haystack.h"
#include "../kernels/strbuf.h"
#include "../kernels/utf8.h"
#include "../kernels/host.h"

char *haystack_default_dir(void) {
    char path[1024];
    strbuf b = {0};
    sb_puts(&b, kb_cache_path("haystack/PaulGrahamEssays", path, sizeof path));
    return sb_take(&b);
}

static int append_file(strbuf *b, const char *path, char *err, size_t errlen) {
    char why[160];
    size_t k, start = b->n;
    char *buf = kb_read_file_capped(path, KB_CAP_DEFAULT, &k, why, sizeof why);   /* no FIFO, no /dev/zero */
    if (!buf) { snprintf(err, errlen, "%s: %s", path, why); return -1; }
    sb_putn(b, buf, k);
    free(buf);
    if (b->oom) { snprintf(err, errlen, "%s: out of memory", path); return -1; }
    /* The prompts are cut and spliced at token boundaries, which needs text the
     * tokenizer maps back byte for byte: valid UTF-8. */
    size_t at = start + utf8_invalid_at(b->p + start, b->n - start);
    if (at < b->n) {
        snprintf(err, errlen, "%s: not UTF-8 text (byte 0x%02x at offset %zu); convert it, e.g. iconv -f latin1 -t utf-8",
                 path, (unsigned char)b->p[at], at - start);
        return -1;
    }
    return 0;
}

/* The text, refusing an empty one and NUL bytes (prompts are C strings). */
static char *take_text(strbuf *b, const char *path, size_t *len, char *err, size_t errlen) {
    if (b->n == 0) { snprintf(err, errlen, "%s: empty", path); return NULL; }
    if (memchr(b->p, 0, b->n)) { snprintf(err, errlen, "%s: contains a NUL byte", path); return NULL; }
    *len = b->n;
    return sb_take(b);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char *haystack_load(const char *path, size_t *len, char *err, size_t errlen) {
    char *def = NULL;
    if (!path) path = def = haystack_default_dir();
    if (!path) { snprintf(err, errlen, "haystack: out of memory"); return NULL; }
    strbuf b = {0};
    struct stat st;
    char *text = NULL;
    if (stat(path, &st)) {
        snprintf(err, errlen, "%s: %s; run `make haystack` (tools/fetch_haystack.sh) or pass --haystack FILE",
                 path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        char **names = NULL;
        int n = 0, cap = 0, bad = !d;
        if (!d) snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        for (struct dirent *e; !bad && (e = readdir(d));) {
            size_t L = strlen(e->d_name);
            if (L < 5 || strcmp(e->d_name + L - 4, ".txt")) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                char **nn = realloc(names, (size_t)cap * sizeof *nn);
                if (!nn) { bad = 1; snprintf(err, errlen, "%s: out of memory", path); break; }
                names = nn;
            }
            if (!(names[n++] = strdup(e->d_name))) { bad = 1; snprintf(err, errlen, "%s: out of memory", path); }
        }
        if (d) closedir(d);
        if (!bad && !n) { bad = 1; snprintf(err, errlen, "%s: no .txt files; run `make haystack` or pass --haystack FILE", path); }
        if (!bad) qsort(names, (size_t)n, sizeof *names, cmp_name);
        for (int i = 0; i < n && !bad; i++) {
            strbuf p = {0};
            sb_printf(&p, "%s/%s", path, names[i]);
            char *fp = sb_take(&p);
            bad = !fp || append_file(&b, fp, err, errlen);
            free(fp);
        }
        for (int i = 0; i < n; i++) free(names[i]);
        free(names);
        if (!bad) text = take_text(&b, path, len, err, errlen);
    } else if (!append_file(&b, path, err, errlen)) {
        text = take_text(&b, path, len, err, errlen);
    }
    sb_free(&b);
    free(def);
    return text;
}
