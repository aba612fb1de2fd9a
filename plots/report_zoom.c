/* kvbench report --table zoom: SeKV's zoom-in as figure 6 measures it (zoom_rate.h), one
 * row per (SeKV method, budget): how sparse (share of heads with a rate below 0.05), where
 * (mean rate in the early, middle and late thirds of the layers) and how concentrated
 * (share of all expansions taken by the top 10% of heads). The paper (appendix E):
 * sparse, concentrated in few heads, stronger in middle and later layers. */
#include <math.h>
#include <stdio.h>
#include "report_tables.h"
#include "report_out.h"
#include "zoom_rate.h"
#include "paper_rows.h"

int rt_zoom(sqlite3 *h, int64_t run_id, FILE *md, FILE *csv, const char *run, char *why, size_t wn) {
    zr_panel *p;
    int n;
    if (zr_load(h, run_id, NULL, NULL, &p, &n, why, wn)) return -1;
    if (!n) {
        char names[512];
        pr_names(KV_CLAIM_ZOOM, names, sizeof names);
        snprintf(why, wn, "no finished %s results (default params, or only a params_file) with decode steps", *names ? names : "zoom method");
        return -1;
    }
    if (md)
        fprintf(md, "Zoom rate per (layer, query head): spans expanded / compressed spans the head could expand, "
                    "averaged over decode steps (0 where none expanded) and cases (n). Quiet: share of heads with a "
                    "rate below 0.05; early/middle/late: mean rate over that third of the layers; top 10%%: share "
                    "of all expansions taken by the 10%% of heads that expanded most. The paper (figure 6): sparse, "
                    "in few heads, stronger in middle and later layers.\n\n"
                    "| method | budget | n | heads | quiet (< 0.05) | early | middle | late | top 10%% share | model |\n"
                    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    if (csv) rt_csv_header(csv);
    for (int i = 0; i < n; i++) {
        zr_summary s;
        zr_summarize(&p[i], &s);
        if (md) {   /* a third with no layer (a model of 1 or 2 layers) or no expansion at all prints "-" */
            char f[5][16];
            double x[] = {s.quiet, s.third[0], s.third[1], s.third[2], s.top10};
            for (int k = 0; k < 5; k++)
                if (isnan(x[k])) snprintf(f[k], sizeof f[k], "-");
                else snprintf(f[k], sizeof f[k], "%.3f", x[k]);
            fprintf(md, "| %s | %g | %d | %d | %s | %s | %s | %s | %s | %s |\n", p[i].method, p[i].budget,
                    p[i].n_results, s.heads, f[0], f[1], f[2], f[3], f[4], p[i].model);
        }
        static const char *const col[] = {"quiet", "early", "middle", "late", "top10"};
        double v[] = {s.quiet, s.third[0], s.third[1], s.third[2], s.top10};
        for (int k = 0; csv && k < 5; k++)
            kv_csv_line(csv, "%s,zoom,rates,%s,%s,,%.17g,%s,%.17g,%d", run, p[i].model, p[i].method, p[i].budget, col[k],
                        v[k], p[i].n_results);
    }
    zr_free(p, n);
    return 0;
}
