/* kvbench report --table NAME: the paper-style tables. report_data.c loads the results
 * of the selected runs into memory and prints grids (Markdown and CSV); report_tables.c
 * builds each table's grids from the loaded records. */
#ifndef KV_REPORT_TABLES_H
#define KV_REPORT_TABLES_H
#include <sqlite3.h>
#include <stdio.h>
#include "runinfo.h"

/* "main, niah, budget, rank, ablation, memory, latency, paper" */
extern const char *const rt_table_names;
int rt_table_known(const char *name);
/* Prints table `name` of the runs ri[0..n_runs) (run_id > 0: that run alone; <= 0: all of
 * them, pooled) as Markdown to md and/or CSV to csv (either may be NULL).
 * 0, or -1 after printing "kvbench report: reason" to stderr. */
int rt_write(sqlite3 *h, const char *name, const kv_runinfo *ri, int n_runs, int64_t run_id, FILE *md, FILE *csv);

/* ------------------------------------------------ shared by report_data.c and report_tables.c */

/* A method with its params ("" when the defaults), on one model. */
typedef struct {
    char *model, *method, *params;   /* params normalised: "k=v,k=v", keys sorted */
} rt_family;

typedef struct {
    int fam;
    double budget;      /* NAN in grids whose rows are families */
} rt_row;

/* One result of the selection. Indices point into rt_data's lists; -1 = none. */
typedef struct {
    int fam, row, wl, ctx, depth, ok;
    double score, fast_peak, slow_peak, fast_tokens, prefill_s, compress_s, ms_tok, tok_s;   /* NAN = none */
    double gpu_peak;    /* measured device peak (CUDA runs; NAN on the CPU and in version-1 files) */
} rt_rec;

typedef struct {
    rt_family *fam;
    int nfam;
    rt_row *row;        /* sorted: model, method (registry order), params, budget */
    int nrow;
    char **wl;          /* workload columns, "workload" or "workload:variant", in case order */
    int nwl;
    int *ctx;           /* ascending */
    int nctx;
    double *depth;      /* ascending; cases without a depth are not needle cases */
    int ndepth;
    rt_rec *rec;
    int nrec;
    int n_models, n_infeasible, n_error;
    int n_gpu;          /* finished results with a measured device peak */
} rt_data;

int rt_load(sqlite3 *h, int64_t run_id, rt_data *d);
void rt_data_free(rt_data *d);

/* How a column's numbers are printed, and which way is better (bold). */
enum { RT_PCT, RT_BYTES, RT_COUNT, RT_RATIO, RT_NUM, RT_BUDGET };
typedef struct {
    char label[64];
    int fmt, better;    /* better: +1 highest bold, -1 lowest bold, 0 no bold */
} rt_col;

typedef struct {
    char label[192];    /* "sekv zoom=0" */
    int fam;
    double budget;      /* NAN: no budget column */
} rt_grow;

/* One Markdown table (a section of a report table). v[i * nc + j], NAN = "-". */
typedef struct {
    char title[256], note[1024];
    int nr, nc, has_budget;
    rt_grow *rows;
    rt_col *cols;
    double *v;
    int *n;             /* cases behind each cell */
} rt_grid;

int rt_grid_init(rt_grid *g, int nr, int nc);
void rt_grid_free(rt_grid *g);
/* "method" or "method k=v k=v" */
void rt_family_label(const rt_family *f, char *buf, size_t n);
void rt_grid_markdown(FILE *f, const rt_data *d, const rt_grid *g);
void rt_grid_csv(FILE *f, const char *run, const char *table, const rt_data *d, const rt_grid *g);
void rt_csv_header(FILE *f);

/* --table paper (report_paper.c): the SeKV paper's claims next to kvbench's NIAH numbers,
 * as Markdown to md and/or CSV rows to csv (run: the CSV's run column). 0, or -1 with why. */
int rt_paper(const rt_data *d, FILE *md, FILE *csv, const char *run, char *why, size_t wn);
#endif
