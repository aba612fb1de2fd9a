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
/* What the score-type cells average (report --metric). score and top1 count an infeasible
 * or failed result as 0; nll and kl have no such value and leave it out (counted). */
enum { RT_M_SCORE, RT_M_NLL, RT_M_KL, RT_M_TOP1 };
int rt_metric_known(const char *name);   /* the enum value, or -1 */
extern const char *const rt_metric_names[];   /* "score", "nll", "kl", "top1" */
/* Prints table `name` of the runs ri[0..n_runs) (run_id > 0: that run alone; <= 0: all of
 * them, pooled) as Markdown to md and/or CSV to csv (either may be NULL), the score-type
 * cells in `metric`; base (compare table): the method the others are compared with.
 * 0, or -1 after printing "kvbench report: reason" to stderr. */
int rt_write(sqlite3 *h, const char *name, const kv_runinfo *ri, int n_runs, int64_t run_id, int metric,
             const char *base, FILE *md, FILE *csv);

/* ------------------------------------------------ shared by report_data.c and report_tables.c */

/* A method with its params ("" when the defaults), on one model. */
typedef struct {
    char *model, *method, *params;   /* params normalised: "k=v,k=v", keys sorted */
} rt_family;

typedef struct {
    int fam;
    double budget;      /* NAN in grids whose rows are families */
} rt_row;

/* One result of the selection. Indices point into rt_data's lists; -1 = none.
 * cas: the case (workload column + case key), the same for every method that saw it. */
typedef struct {
    int fam, row, wl, ctx, depth, ok, cas;
    int infeasible;         /* status infeasible (not ok and not an error) */
    double nll, kl, top1;   /* fidelity against FullKV (schema v3; NAN = not measured) */
    int noisy;              /* the load average moved during the case (latency is noisy) */
    double score, fast_peak, slow_peak, fast_tokens, prefill_s, compress_s, ms_tok, tok_s;   /* NAN = none */
    double gpu_peak;    /* measured device peak (CUDA runs; NAN on the CPU and in version-1 files) */
    double fast_decode; /* steady fast-tier bytes: compression through decode (NAN before schema 3) */
    double rss_peak;    /* measured process peak RSS over the method's run (NAN: not measured) */
    double gpu_driver;  /* the driver's view of the device peak over the method's run
                           (cudaMemGetInfo sampled; CUDA runs from schema 4 on, else NAN) */
    /* the case's shared prefill on the device (CUDA runs, else NAN): the allocator's peak,
     * the driver's sampled peak (schema 4 on), its time by CUDA events (ms) */
    double pf_gpu_peak, pf_gpu_driver, pf_gpu_ms;
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
    int n_decode, n_rss; /* finished results with a steady fast-tier figure, a measured RSS */
    int n_gpu_driver;   /* finished results with the driver's view of the device peak */
    int n_pf_gpu;       /* finished results whose case has a device prefill measurement */
    int ncase;          /* distinct cases (rt_rec.cas) */
    int n_noisy;        /* finished results of cases whose load average moved */
} rt_data;

int rt_load(sqlite3 *h, int64_t run_id, rt_data *d);
/* A record's value under metric (NAN: left out of the mean); a failure is 0 for score and
 * top1, left out for nll and kl. */
double rt_rec_value(const rt_rec *r, int metric);
/* report --table compare: each row against the base method's row of its model at the
 * row's budget (base "M") or at budget B (base "M@B"), of the family whose params hold the
 * settings given as "M:K=V" (or "M@B:K=V"), paired over the cases both saw. 0,
 * or -1 after printing why. */
int rt_compare(const rt_data *d, int metric, const char *base, FILE *md, FILE *csv, const char *run);
/* --base METHOD[@BUDGET][:K=V,...]: the method, the budget (NAN when not given) and the
 * settings its params must hold ("" when none: default params if run). */
typedef struct {
    char method[64];
    double budget;
    char settings[512];
} rt_base;
/* 0, or -1 after printing why. */
int rt_base_parse(const char *arg, rt_base *b);
void rt_data_free(rt_data *d);

/* How a column's numbers are printed, and which way is better (bold). */
enum { RT_PCT, RT_BYTES, RT_COUNT, RT_RATIO, RT_NUM, RT_BUDGET };
typedef struct {
    char label[64];
    int fmt, better;    /* better: +1 highest bold, -1 lowest bold, 0 no bold */
    int low_ceiling;    /* the reference (FullKV) scores below RT_CEILING here: "(low ceiling)" in Markdown */
} rt_col;

/* A column (workload, context) whose reference method (FullKV) scores below this mean
 * score is beyond the model: every table marks it RT_LOW_CEILING, and the claims table
 * calls a claim that fails there "undecidable: ceiling", not "no" (issue 32). */
#define RT_CEILING 0.8
/* mean < RT_CEILING beyond rounding: a mean of case scores at exactly 80% (12 of 15) can
 * come out as 0.7999999999999998, and 80% is not below 80%. */
static inline int rt_below_ceiling(double mean) { return mean < RT_CEILING - 1e-9; }
#define RT_LOW_CEILING " (low ceiling)"
#define RT_CEILING_NOTE                                                                                            \
    "(low ceiling): FullKV scores below 80% in that column, so the model cannot do the task there and the"       \
    " methods' scores say little about what compression keeps."

typedef struct {
    char label[192];    /* "sekv zoom=0" */
    int fam;
    double budget;      /* NAN: no budget column */
} rt_grow;

/* The values behind one cell: x[i] of case cas[i] in group g[i] (a workload, a depth).
 * The cell's value is the mean of its group means; nfail results left out of it. */
typedef struct {
    double *x;
    int *g, *cas;
    int n, cap, nfail, ninf;   /* nfail: not ok, ninf of them infeasible */
    int nnoisy;                /* values from cases whose load average moved (latency) */
} rt_samples;
/* " (k infeasible)", " (k failed)" or " (i infeasible, e failed)"; "" when none. */
void rt_fail_note(char *buf, size_t n, int nfail, int ninf);
int rt_samples_add(rt_samples *s, double x, int g, int cas);
void rt_samples_free(rt_samples *s);
double rt_samples_mean(const rt_samples *s);   /* mean of the group means; NAN when empty */

/* One Markdown table (a section of a report table). v[i * nc + j], NAN = "-". */
typedef struct {
    char title[256], note[1024];
    int nr, nc, has_budget;
    rt_grow *rows;
    rt_col *cols;
    double *v;
    int *n;             /* cases behind each cell */
    double *lo, *hi;    /* its 95% interval (Wilson on binary values, else bootstrap), NAN = none */
    int *nfail;         /* infeasible or failed results in the cell (counted as 0, or left out) */
    int *ninf;          /* of them infeasible */
    int *nnoisy;        /* values measured while the load average moved */
    rt_samples *cell;   /* the values, for the paired tests behind a bold (NULL: no bold) */
    int graded;         /* 1: % cells hold graded values (top-1), never Wilson */
} rt_grid;
/* The values of a and b on the cases both hold (a case's values in several groups
 * averaged), into new arrays *xa, *xb (free both); the count, or -1 (out of memory). */
int rt_paired(const rt_samples *a, const rt_samples *b, double **xa, double **xb);
/* 1 when cells[b] is better (direction better: +1 higher, -1 lower) than every other
 * non-NULL cell by the exact paired sign test over the cases both saw (McNemar's exact
 * test on binary values), Holm-adjusted over those comparisons, p < 0.05. */
int rt_significantly_best(const rt_samples *const *cells, int nr, int b, int better);
/* Sets cell (i, j) from s: value, interval, n, failures; keeps s (the grid owns it). */
void rt_grid_set(rt_grid *g, int i, int j, rt_samples *s);

int rt_grid_init(rt_grid *g, int nr, int nc);
void rt_grid_free(rt_grid *g);
/* "method" or "method k=v k=v"; the params_file setting becomes the suffix of
 * rt_params_suffix: "method (untrained) k=v" for params_file=none (SeKV's untrained router
 * asked for), "method (params FILE) k=v" for a parameter file named explicitly. */
#define RT_UNTRAINED " (untrained)"
void rt_family_label(const rt_family *f, char *buf, size_t n);
/* The row-name suffix of params (normalised "k=v,k=v"): " (untrained)" for params_file=none,
 * " (params BASENAME)" for params_file=PATH other than default, "" otherwise. */
void rt_params_suffix(const char *params, char *buf, size_t n);
/* The params_file item of params ("params_file=VALUE") into buf and its length, or 0 (buf
 * "") when params has none: the one parser of that setting. */
int rt_params_file_item(const char *params, char *buf, size_t n);
/* 1 when params is empty or holds only a params_file setting: a row's own settings, no
 * ablation. */
int rt_params_file_only(const char *params);
void rt_grid_markdown(FILE *f, const rt_data *d, const rt_grid *g);
void rt_grid_csv(FILE *f, const char *run, const char *table, const rt_data *d, const rt_grid *g);
void rt_csv_header(FILE *f);

/* --table paper (report_paper.c): the SeKV paper's claims next to kvbench's NIAH numbers,
 * as Markdown to md and/or CSV rows to csv (run: the CSV's run column). 0, or -1 with why. */
int rt_paper(const rt_data *d, sqlite3 *h, int64_t run_id, FILE *md, FILE *csv, const char *run, char *why,
             size_t wn);
/* --table zoom (report_zoom.c): SeKV's zoom rates per (method, budget), figure 6's terms. */
int rt_zoom(sqlite3 *h, int64_t run_id, FILE *md, FILE *csv, const char *run, char *why, size_t wn);
#endif
