/* A method's zoom-in as a rate (SeKV's: comparable with its paper's figure 6), for the
 * methods whose paper holds a zoom claim (paper_rows.h): per (layer, query
 * head), the spans it expanded divided by the compressed spans it could expand, averaged
 * over decode steps (a step without expansions counts 0) and then over cases. Read from
 * a results file's head_stats and zoom_events (zoom_events.spans); results recorded
 * before that column existed are left out. Used by plot --figure zoom, report --table
 * zoom and the C15 row of report --table paper. */
#ifndef KV_ZOOM_RATE_H
#define KV_ZOOM_RATE_H
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char model[128];
    char method[160];   /* the row's name: "sekv", "sekv (untrained)", "sekv (params FILE)" */
    double budget;
    int L, H;           /* layers and query heads (from head_stats) */
    int n_results;      /* finished results with decode steps averaged */
    double *rate;       /* [L*H] mean zoom rate over the results */
    double *expanded;   /* [L*H] spans expanded, summed over steps and results */
} zr_panel;

typedef struct {
    int heads;
    double quiet;       /* share of (layer, head) with a rate below 0.05 */
    double third[3];    /* mean rate over the early, middle and late thirds of the layers */
    double top10;       /* share of all expansions taken by the top 10% of heads (by expansions) */
} zr_summary;

/* Panels of every (model, zoom method, budget) in run_id (<= 0: every run), in that
 * order; variant, model NULL: any. *n = 0 (and 0 returned) when there are none;
 * -1 after writing why. */
int zr_load(sqlite3 *h, int64_t run_id, const char *variant, const char *model, zr_panel **out, int *n, char *why,
            size_t wn);
void zr_summarize(const zr_panel *p, zr_summary *s);
void zr_free(zr_panel *p, int n);

#endif
