#include "task_dir.h"
#include "strbuf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int task_dir_load(const task_dir *td, const char *dir, const char *tasks, void *ctx, char *err, size_t errlen) {
    char *want = calloc((size_t)td->n_tasks, 1);   /* 0 skip, 1 if present, 2 named: must exist */
    if (!want) { snprintf(err, errlen, "out of memory"); return -1; }
    int any = 0, rc = 0;
    if (tasks && *tasks) {
        char *list = strdup(tasks), *save = NULL;
        if (!list) { free(want); snprintf(err, errlen, "out of memory"); return -1; }
        for (char *t = strtok_r(list, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
            int k = td->index_of(t);
            if (k < 0) rc = -1, snprintf(err, errlen, "%s: unknown task '%s' (tasks: %s)", td->bench, t, td->known);
            else want[k] = 2;
        }
        free(list);
    } else {
        memset(want, 1, (size_t)td->n_tasks);
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
