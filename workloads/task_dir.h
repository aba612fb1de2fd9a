/* A benchmark directory of DIR/<task>.jsonl files (LongBench, InfiniteBench): loads the
 * tasks named in a comma list (each file must exist), or every task whose file is there.
 * The benchmark's tasks kvbench does not run are listed with the reason: naming one is
 * refused with it, and a file of one found while loading every task is named on the log. */
#ifndef KV_TASK_DIR_H
#define KV_TASK_DIR_H
#include <stddef.h>
#include <stdio.h>

typedef struct {
    const char *file, *alias;                /* file stem; the paper's name (or NULL) */
    const char *why;                         /* what kvbench lacks for it */
} task_unsupported;

typedef struct {
    const char *bench, *title;               /* "longbench", "LongBench": used in messages */
    const char *known;                       /* the task names, for the unknown-task message */
    int n_tasks;
    const char *(*file_of)(int task);        /* the file stem of task k */
    int (*index_of)(const char *name);       /* -1 if unknown */
    int (*load)(void *ctx, int task, const char *path, char *err, size_t errlen);   /* 0 or -1 */
    const task_unsupported *unsupported;     /* the benchmark's other tasks */
    int n_unsupported;
} task_dir;

/* The comma list of task names checked: 0, or -1 with err naming an unknown task or an
 * unsupported one and why. */
int task_dir_check(const task_dir *td, const char *tasks, char *err, size_t errlen);
/* 0, or -1 with err (unknown or unsupported task, named file missing, no task file at all,
 * a load error). Loading every task, each unsupported task's file present in dir gets one
 * line on log (NULL: stderr) naming it and why it is skipped. */
int task_dir_load(const task_dir *td, const char *dir, const char *tasks, void *ctx, FILE *log, char *err,
                  size_t errlen);

#endif
