#include "task_dir.h"
#include "../kernels/strbuf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const task_unsupported *unsupported_of(const task_dir *td, const char *name) {
    for (int i = 0; i < td->n_unsupported; i++) {
        const task_unsupported *u = &td->unsupported[i];
        if (!strcasecmp(name, u->file) || (u->alias && !strcasecmp(name, u->alias))) return u;
    }
    return NULL;
}

/* One name: its index, or -1 with err. */
static int task_of(const task_dir *td, const char *t, char *err, size_t errlen) {
    int k = td->index_of(t);
    if (k >= 0) return k;
    const task_unsupported *u = unsupported_of(td, t);
    if (u) snprintf(err, errlen, "%s: task '%s' is not supported: %s (supported: %s)", td->bench, t, u->why, td->known);
    else snprintf(err, errlen, "%s: unknown task '%s' (tasks: %s)", td->bench, t, td->known);
    return -1;
}

int task_dir_check(const task_dir *td, const char *tasks, char *err, size_t errlen) {
    if (!tasks || !*tasks) return 0;
    char *list = strdup(tasks), *save = NULL;
    if (!list) { snprintf(err, errlen, "out of memory"); return -1; }
    int rc = 0;
    for (char *t = strtok_r(list, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save))
        if (task_of(td, t, err, errlen) < 0) rc = -1;
    free(list);
    return rc;
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
            int k = task_of(td, t, err, errlen);
            if (k < 0) rc = -1;
            else want[k] = 2;
        }
        free(list);
    } else {
        memset(want, 1, (size_t)td->n_tasks);
        for (int i = 0; i < td->n_unsupported; i++) {   /* say which files of the directory stay unread */
            strbuf p = {0};
            sb_printf(&p, "%s/%s.jsonl", dir, td->unsupported[i].file);
            char *path = sb_take(&p);
            if (path && !access(path, F_OK))
                fprintf(log ? log : stderr, "%s: %s: skipped: %s is not supported: %s\n", td->bench, path,
                        td->unsupported[i].file, td->unsupported[i].why);
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
