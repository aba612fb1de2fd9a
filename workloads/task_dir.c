#include "task_dir.h"
#include "strbuf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int unsupported_index(const task_dir *td, const char *name) {
    for (int i = 0; td->unsupported && td->unsupported[i]; i++)
        if (!strcmp(td->unsupported[i], name)) return i;
    return -1;
}

int task_dir_load(const task_dir *td, const char *dir, const char *tasks, void *ctx, FILE *log, char *err,
                  size_t errlen) {
    char *want = calloc((size_t)td->n_tasks, 1);   /* 0 skip, 1 if present, 2 named: must exist */
    if (!want) { snprintf(err, errlen, "out of memory"); return -1; }
    int any = 0, rc = 0;
    if (tasks && *tasks) {
        char *list = strdup(tasks), *save = NULL;
        if (!list) { free(want); snprintf(err, errlen, "out of memory"); return -1; }
        for (char *t = strtok_r(list, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
            int k = td->index_of(t);
            if (k < 0 && unsupported_index(td, t) >= 0)
                rc = -1, snprintf(err, errlen, "%s/%s.jsonl: %s task '%s' is not supported by kvbench (%s; supported: %s)",
                                  dir, t, td->title, t, td->why_unsupported, td->known);
            else if (k < 0) rc = -1, snprintf(err, errlen, "%s: unknown task '%s' (tasks: %s)", td->bench, t, td->known);
            else want[k] = 2;
        }
        free(list);
    } else {
        memset(want, 1, (size_t)td->n_tasks);
        for (int i = 0; td->unsupported && td->unsupported[i]; i++) {   /* said on every run that meets one */
            strbuf p = {0};
            sb_printf(&p, "%s/%s.jsonl", dir, td->unsupported[i]);
            char *path = sb_take(&p);
            if (path && !access(path, F_OK) && log)
                fprintf(log, "%s: %s task '%s' is not supported by kvbench (%s): skipped\n", path, td->title,
                        td->unsupported[i], td->why_unsupported);
            free(path);
        }
    }
    for (int k = 0; k < td->n_tasks && !rc; k++) {
        if (!want[k]) continue;
        strbuf p = {0};
        sb_printf(&p, "%s/%s.jsonl", dir, td->file_of(k));
        char *path = sb_take(&p);
        if (!path) { rc = -1, snprintf(err, errlen, "out of memory"); break; }
        if (access(path, R_OK)) {
            if (want[k] == 2) rc = -1, snprintf(err, errlen, "%s: not found", path);
        } else {
            rc = td->load(ctx, k, path, err, errlen);
            any = 1;
        }
        free(path);
    }
    free(want);
    if (!rc && !any) rc = -1, snprintf(err, errlen, "%s: no %s task files (<task>.jsonl) found", dir, td->title);
    return rc;
}
