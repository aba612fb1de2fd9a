/* A benchmark directory of DIR/<task>.jsonl files (LongBench, InfiniteBench): loads the
 * tasks named in a comma list (each file must exist), or every task whose file is there. */
#ifndef KV_TASK_DIR_H
#define KV_TASK_DIR_H
#include <stddef.h>
#include <stdio.h>

typedef struct {
    const char *bench, *title;               /* "longbench", "LongBench": used in messages */
    const char *known;                       /* the task names, for the unknown-task message */
    int n_tasks;
    const char *(*file_of)(int task);        /* the file stem of task k */
    int (*index_of)(const char *name);       /* -1 if unknown */
    int (*load)(void *ctx, int task, const char *path, char *err, size_t errlen);   /* 0 or -1 */
    const char *const *unsupported;          /* the benchmark's other tasks (NULL-terminated) */
    const char *why_unsupported;             /* e.g. "its metrics need jieba" */
} task_dir;

/* 0, or -1 with err (unknown task, named file missing, no task file at all, a load error).
 * A named task the benchmark has but kvbench does not support is refused with its file;
 * in a scan of the folder, each such file present gets a line on log saying it is
 * skipped (never silently). */
int task_dir_load(const task_dir *td, const char *dir, const char *tasks, void *ctx, FILE *log, char *err,
                  size_t errlen);

#endif
