/* kvbench plot: figures from a results file, drawn by gnuplot. The data (NAME.dat) and
 * the script (NAME.gp) are kept next to the images so a figure can be redrawn or edited
 * by hand: `gnuplot NAME.gp` from the directory kvbench ran in.
 *
 * niah: the heatmap of needle-in-a-haystack runs, context length x needle depth, one
 * panel per method and budget: the mean score of the cases of a cell (infeasible and
 * failed count as 0), or with --metric a fidelity metric (nll, kl: finished results;
 * top1: failures as 0).
 * Depths are fractions of the context in the database (model runs take --depths in %
 * and store fractions); a run whose depths exceed 1 is taken to hold percentages.
 * memory, latency, budget, zoom: see plot_lines.c. */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "report_out.h"
#include "plot_cmds.h"
#include "../kernels/cli_opt.h"
#include "plot_util.h"
#include "runinfo.h"
#include "../results/query.h"

extern char **environ;

typedef struct {
    char *method;
    double budget;
    int n_points;
} panel;

typedef struct {
    int np, nx, ny;
    panel *panels;
    int *ctx;          /* [nx] */
    double *depth;     /* [ny] */
    double *score;     /* [np][nx][ny] mean score in %, NAN where nothing finished */
    double pct;        /* depth x pct = depth in %: 100 for fractions, 1 for percentages */
} heatmap;

static void heatmap_free(heatmap *m) {
    for (int p = 0; p < m->np; p++) free(m->panels[p].method);
    free(m->panels), free(m->ctx), free(m->depth), free(m->score);
    memset(m, 0, sizeof *m);
}

static int panel_cmp(const void *a, const void *b) {
    const panel *x = a, *y = b;
    int c = kv_method_cmp(x->method, y->method);
    return c ? c : (x->budget > y->budget) - (x->budget < y->budget);
}

/* The heatmap's metrics: the cell value (kvq_niah_cells says which results it averages). */
static const struct {
    const char *name;
    enum kvq_niah q;
    const char *title, *fmt;
    int pct;
} METRICS[] = {
    {"score", KVQ_NIAH_SCORE, "NIAH score (%; infeasible and failed count as 0)", "%.0f", 1},
    {"nll", KVQ_NIAH_NLL, "NIAH answer NLL (nats per token, teacher-forced; lower is better)", "%.2f", 0},
    {"kl", KVQ_NIAH_KL, "NIAH KL(FullKV || method) over FullKV's greedy answer (nats; lower is better)", "%.2f", 0},
    {"top1", KVQ_NIAH_TOP1, "NIAH top-1 agreement with FullKV's greedy answer (%)", "%.0f", 1},
};
static int metric_ix = 0;

/* Loads the cells; -1 after printing why. variant: NULL for all. */
static int load_niah(sqlite3 *h, int64_t run, const char *variant, heatmap *m) {
    if (metric_ix) {   /* the fidelity columns exist from schema version 3 on */
        if (!kvq_has_column(h, "results", "kl")) {
            fprintf(stderr, "kvbench plot: --metric %s: this results file predates the fidelity metrics (schema 3)\n",
                    METRICS[metric_ix].name);
            return -1;
        }
    }
    sqlite3_stmt *st = NULL;
    int cap;
    for (int a = 0; a < 2; a++) {
        if (!(st = kvq_niah_axis(h, a, run, variant))) goto sqlerr;
        cap = 0;
        int n = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                void *p = a == 0 ? realloc(m->ctx, cap * sizeof *m->ctx) : realloc(m->depth, cap * sizeof *m->depth);
                if (!p) goto oom;
                if (a == 0) m->ctx = p;
                else m->depth = p;
            }
            if (a == 0) m->ctx[n++] = sqlite3_column_int(st, 0);
            else m->depth[n++] = sqlite3_column_double(st, 0);
        }
        sqlite3_finalize(st);
        st = NULL;
        if (a == 0) m->nx = n;
        else m->ny = n;
    }
    m->pct = m->ny && m->depth[m->ny - 1] > 1 ? 1 : 100;
    if (!(st = kvq_niah_panels(h, run, variant))) goto sqlerr;
    cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (m->np == cap) {
            cap = cap ? 2 * cap : 16;
            panel *p = realloc(m->panels, cap * sizeof *p);
            if (!p) goto oom;
            m->panels = p;
        }
        const unsigned char *name = sqlite3_column_text(st, 0);
        m->panels[m->np++] = (panel){strdup(name ? (const char *)name : "?"), sqlite3_column_double(st, 1), 0};
    }
    sqlite3_finalize(st);
    st = NULL;
    if (m->np) qsort(m->panels, m->np, sizeof *m->panels, panel_cmp);
    size_t ncell = (size_t)m->np * m->nx * m->ny;
    m->score = malloc((ncell + 1) * sizeof *m->score);
    if (!m->score) goto oom;
    for (size_t i = 0; i < ncell; i++) m->score[i] = NAN;
    if (!(st = kvq_niah_cells(h, METRICS[metric_ix].q, run, variant))) goto sqlerr;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        double budget = sqlite3_column_double(st, 1), depth = sqlite3_column_double(st, 3);
        int ctx = sqlite3_column_int(st, 2), p = -1, x = -1, y = -1;
        for (int k = 0; k < m->np; k++)
            if (!strcmp(m->panels[k].method, name ? name : "?") && m->panels[k].budget == budget) p = k;
        for (int k = 0; k < m->nx; k++)
            if (m->ctx[k] == ctx) x = k;
        for (int k = 0; k < m->ny; k++)
            if (m->depth[k] == depth) y = k;
        if (p < 0 || x < 0 || y < 0) continue;   /* cannot happen: same join as the axes */
        if (sqlite3_column_type(st, 4) == SQLITE_NULL) continue;
        m->score[((size_t)p * m->nx + x) * m->ny + y] = sqlite3_column_double(st, 4);
        m->panels[p].n_points++;
    }
    sqlite3_finalize(st);
    return 0;
sqlerr:
    fprintf(stderr, "kvbench plot: reading results: %s\n", sqlite3_errmsg(h));
    sqlite3_finalize(st);
    return -1;
oom:
    fprintf(stderr, "kvbench plot: out of memory\n");
    sqlite3_finalize(st);
    return -1;
}

/* Control characters (newline, carriage return, ...) end a gnuplot command or a comment
 * wherever they appear, so none is ever written into a script: the text after a newline
 * would run as gnuplot commands (system() included). */
static int is_ctl(char c) { return (unsigned char)c < 0x20 || c == 0x7f; }

int gp_find_control(const char *s) {
    for (const char *p = s; *p; p++)
        if (is_ctl(*p)) return (int)(p - s);
    return -1;
}

/* The one place data text enters a gnuplot script: the inside of a single-quoted string,
 * where gnuplot expands nothing (no backquote command, no @macro, no \ escape), so only
 * ' needs escaping, as ''. A double-quoted string would run `cmd` taken from a model
 * name or a results file. Control characters are dropped. */
static void gp_sq_char(FILE *f, char c) {
    if (c == '\'') fputc('\'', f);
    if (!is_ctl(c)) fputc(c, f);
}

void gp_str(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) gp_sq_char(f, *s);
    fputc('\'', f);
}

void gp_text(FILE *f, const char *s) {
    for (; *s; s++) gp_sq_char(f, *s);
}

void gp_comment(FILE *f, const char *s) {
    for (; *s; s++) fputc(is_ctl(*s) ? '?' : *s, f);
}

static int write_dat(const char *path, const heatmap *m) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "# one block per panel (gnuplot index): x = context index, y = depth index, %s%s, ctx, depth %%\n",
            METRICS[metric_ix].name, METRICS[metric_ix].pct ? " %" : "");
    int block = 0;
    for (int p = 0; p < m->np; p++) {
        if (!m->panels[p].n_points) continue;
        fprintf(f, "%s# ", block++ ? "\n\n" : "");
        gp_comment(f, m->panels[p].method);
        fprintf(f, " @ %g\n", m->panels[p].budget);
        for (int x = 0; x < m->nx; x++)
            for (int y = 0; y < m->ny; y++) {
                double s = m->score[((size_t)p * m->nx + x) * m->ny + y];
                if (!isnan(s)) fprintf(f, "%d %d %.6f %d %g\n", x, y, s, m->ctx[x], m->pct * m->depth[y]);
            }
    }
    return fclose(f);
}

static int write_gp(const char *path, const char *out, const char *dat, const kv_runinfo *ri, const heatmap *m,
                    const char *variant) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int shown = 0;
    for (int p = 0; p < m->np; p++) shown += m->panels[p].n_points > 0;
    int cols = (int)ceil(sqrt((double)shown)), rows = (shown + cols - 1) / cols;
    int w = 460 * cols < 1000 ? 1000 : 460 * cols, h = 380 * rows + 80;   /* wide enough for the run line */
    char title[1400], line[1024];
    kv_runinfo_line(ri, line, sizeof line);
    snprintf(title, sizeof title, "%s%s%s", METRICS[metric_ix].title, variant ? ", variant " : "", variant ? variant : "");

    gp_open(f, "niah", path, out, w, h);
    fprintf(f, "  set multiplot layout %d,%d title '", rows, cols);   /* two lines: what, which run */
    gp_text(f, title);
    fputs(GP_NL, f);
    gp_text_wrap(f, line, 110);
    fprintf(f, "' font ',9'\n");
    if (METRICS[metric_ix].pct) {
        fprintf(f, "  set palette defined (0 '#d73027', 50 '#fee08b', 100 '#1a9850')\n");
        fprintf(f, "  set cbrange [0:100]\n  set cblabel '%s %%'\n  set colorbox\n", METRICS[metric_ix].name);
    } else {   /* lower is better: green at 0 */
        double top = 0;
        for (size_t i = 0; i < (size_t)m->np * m->nx * m->ny; i++)
            if (!isnan(m->score[i]) && m->score[i] > top) top = m->score[i];
        fprintf(f, "  set palette defined (0 '#1a9850', 0.5 '#fee08b', 1 '#d73027')\n");
        fprintf(f, "  set cbrange [0:%g]\n  set cblabel '%s (nats)'\n  set colorbox\n", top > 0 ? top : 1,
                METRICS[metric_ix].name);
    }
    fprintf(f, "  set xrange [-0.5:%g]\n  set yrange [-0.5:%g]\n", m->nx - 0.5, m->ny - 0.5);
    fprintf(f, "  set xtics (");
    for (int x = 0; x < m->nx; x++) fprintf(f, "%s'%d' %d", x ? ", " : "", m->ctx[x], x);
    fprintf(f, ")\n  set ytics (");
    for (int y = 0; y < m->ny; y++) fprintf(f, "%s'%g' %d", y ? ", " : "", m->pct * m->depth[y], y);
    fprintf(f, ")\n");
    fprintf(f, "  set xlabel 'context length (tokens)'\n  set ylabel 'needle depth (%%)'\n");
    fprintf(f, "  set tics nomirror\n  set style fill solid 1.0 noborder\n");
    int block = 0;
    for (int p = 0; p < m->np; p++) {
        if (!m->panels[p].n_points) continue;
        char t[256];
        snprintf(t, sizeof t, "%s @ budget %g", m->panels[p].method, m->panels[p].budget);
        fprintf(f, "  set title ");
        gp_str(f, t);
        fprintf(f, " textcolor rgb '%s'\n", kv_method_color(m->panels[p].method));
        fprintf(f, "  plot ");
        gp_str(f, dat);
        fprintf(f, " index %d using 1:2:(0.5):(0.5):3 with boxxyerror lc palette notitle, \\\n       ", block);
        gp_str(f, dat);
        fprintf(f, " index %d using 1:2:(sprintf('%s', $3)) with labels font ',8' notitle\n", block,
                METRICS[metric_ix].fmt);
        block++;
    }
    fprintf(f, "  unset multiplot\n");
    gp_close(f);
    return fclose(f);
}

void gp_text_wrap(FILE *f, const char *s, int width) {
    int col = 0;
    for (const char *p = s; *p; p++) {
        if (p[0] == ',' && p[1] == ' ') {   /* break here if the next item would pass width */
            const char *next = strstr(p + 2, ", ");
            int len = next ? (int)(next - p) : (int)strlen(p);
            if (col + len > width) {
                fputs("," GP_NL, f);
                p++;
                col = 0;
                continue;
            }
        }
        gp_sq_char(f, *p);
        col += !is_ctl(*p);
    }
}

void gp_open(FILE *f, const char *figure, const char *script, const char *out, int w, int h) {
    char png[1100], svg[1100];
    snprintf(png, sizeof png, "%s.png", out);
    snprintf(svg, sizeof svg, "%s.svg", out);
    fprintf(f, "# kvbench plot --figure ");
    gp_comment(f, figure);
    fprintf(f, ": written by kvbench, redraw with `gnuplot ");
    gp_comment(f, script);
    fprintf(f, "`\n");
    fprintf(f, "# pngcairo when this gnuplot has it, else the libgd png terminal\n");
    fprintf(f, "pngterm = strstrt(GPVAL_TERMINALS, 'pngcairo') > 0 ? 'pngcairo' : 'png'\n");
    fprintf(f, "do for [fmt in 'png svg'] {\n");
    fprintf(f, "  if (fmt eq 'png') {\n");
    fprintf(f, "    if (pngterm eq 'pngcairo') { set terminal pngcairo noenhanced size %d,%d font 'sans,10' }"
               " else { set terminal png noenhanced size %d,%d }\n", w, h, w, h);
    fprintf(f, "    set output ");
    gp_str(f, png);
    fprintf(f, "\n  } else {\n    set terminal svg noenhanced size %d,%d font 'sans,10' background '#ffffff'\n"
               "    set output ", w, h);
    gp_str(f, svg);
    fprintf(f, "\n  }\n");
}

void gp_close(FILE *f) { fprintf(f, "  set output\n}\n"); }

/* Runs `gnuplot script`; 0 on success, else prints why. */
int gp_run(const char *script) {
    char *args[] = {"gnuplot", (char *)script, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, "gnuplot", NULL, NULL, args, environ);
    if (err) {
        if (err == ENOENT) fprintf(stderr, "kvbench plot: gnuplot not found on PATH (install gnuplot)\n");
        else fprintf(stderr, "kvbench plot: cannot start gnuplot: %s\n", strerror(err));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "kvbench plot: waiting for gnuplot: %s\n", strerror(errno));
            return -1;
        }
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        if (WIFEXITED(status)) fprintf(stderr, "kvbench plot: gnuplot failed (exit %d) on %s\n", WEXITSTATUS(status), script);
        else fprintf(stderr, "kvbench plot: gnuplot killed by signal %d on %s\n", WTERMSIG(status), script);
        return -1;
    }
    return 0;
}

/* The image must exist, be non-empty and start as its format says. */
int gp_check_image(const char *path, const char *magic, size_t n) {
    FILE *f = fopen(path, "rb");
    char head[16] = {0};
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    if (got < n || memcmp(head, magic, n)) {
        fprintf(stderr, "kvbench plot: gnuplot did not write %s\n", path);
        return -1;
    }
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench plot --db FILE [--run ID] [--figure F] [--metric M] [--variant V] [--out PATH]\n"
            "  Draws a figure of one run with gnuplot: PATH.png and PATH.svg, plus the data (PATH.dat)\n"
            "  and gnuplot script (PATH.gp) to redraw it. Every figure averages the finished (ok)\n"
            "  results of each point (the score figures count infeasible and failed results as 0);\n"
            "  line figures draw each point's 95%% interval as an error bar; methods keep one colour.\n"
            "  --figure niah     heatmap, context length x needle depth, one panel per method and budget;\n"
            "                    the mean score (%%) of each cell (default), or --metric's\n"
            "  --metric M        niah: score (default), nll (answer NLL), kl (KL(FullKV || method)) or\n"
            "                    top1 (agreement with FullKV's greedy tokens, %%); see kvbench run --fidelity\n"
            "  --figure memory   fast-tier KV peak (MiB) vs context length, one line per method\n"
            "                    (and budget); on a kvbench sim run: total GB (weights + fast tier +\n"
            "                    activations) vs context, with the SeKV paper's points for llama3-8b\n"
            "  --figure latency  decode time per token (ms) vs context length, one line per method\n"
            "  --figure budget   mean score (%%) vs budget, one line per method; a method with a single\n"
            "                    budget (the reference) is drawn as a dashed reference line\n"
            "  --figure zoom     zoom rate per layer and query head (SeKV's, and any method whose paper\n"
            "                    has a zoom claim): spans expanded / compressed spans available per\n"
            "                    decode step, mean over cases, one panel per method and budget, one\n"
            "                    fixed 0-1 colour scale\n"
            "  --db FILE         results file written by kvbench run\n"
            "  --run ID          run id (default: the latest run)\n"
            "  --variant V       only cases of this variant (needle kind or task); default: all\n"
            "  --out PATH        output name without extension (default: FIGURE-runID in this directory)\n");
}

/* The niah heatmap: data and script. 0, or -1 after printing why. */
static int niah_write(sqlite3 *h, const kv_runinfo *ri, const char *path, const char *variant, const char *out,
                      const char *gp, const char *dat) {
    heatmap m = {0};
    int rc = load_niah(h, ri->id, variant, &m);
    int shown = 0;
    for (int p = 0; p < m.np; p++) shown += m.panels[p].n_points > 0;
    if (rc == 0 && !shown) {
        fprintf(stderr, "kvbench plot: run %lld in '%s' has no finished cases with a context length and depth%s%s\n",
                (long long)ri->id, path, variant ? " for variant " : "", variant ? variant : "");
        rc = -1;
    }
    for (int p = 0; rc == 0 && p < m.np; p++)
        if (!m.panels[p].n_points) {   /* a method name from the file: escaped for the terminal */
            char *name = kv_escape_ctl(m.panels[p].method, strlen(m.panels[p].method), 0);
            fprintf(stderr, "kvbench plot: %s @ %g has no finished cases; panel left out\n", name ? name : "?",
                    m.panels[p].budget);
            free(name);
        }
    if (rc == 0 && (write_dat(dat, &m) || write_gp(gp, out, dat, ri, &m, variant))) {
        fprintf(stderr, "kvbench plot: cannot write %s / %s: %s\n", dat, gp, strerror(errno));
        rc = -1;
    }
    heatmap_free(&m);
    return rc;
}

int cmd_plot(int argc, char **argv) {
    const char *path = NULL, *figure = "niah", *out_arg = NULL, *variant = NULL;
    long long run = 0;
    int metric_given = 0;
    metric_ix = 0;
    static const char *const bare[] = {"--help", "-h", NULL},
                             *const valued[] = {"--db", "--run", "--figure", "--out", "--variant", "--metric", NULL};
    for (int i = 1; i < argc; i++) {
        char a[64];
        const char *v;
        if (kb_opt_read("plot", argc, argv, &i, bare, valued, 0, a, sizeof a, &v)) return 2;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--db")) path = v;
        else if (!strcmp(a, "--figure")) figure = v;
        else if (!strcmp(a, "--out")) out_arg = v;
        else if (!strcmp(a, "--variant")) variant = v;
        else if (!strcmp(a, "--metric")) {
            metric_ix = -1;
            for (int k = 0; k < 4; k++)
                if (!strcmp(v, METRICS[k].name)) metric_ix = k;
            if (metric_ix < 0) {
                fprintf(stderr, "kvbench plot: --metric '%s' is not score, nll, kl or top1\n", v);
                return 2;
            }
            metric_given = 1;
        }
        else {
            char *end;
            run = strtoll(v, &end, 10);
            if (*end || run <= 0) {
                fprintf(stderr, "kvbench plot: --run '%s' is not a positive run id\n", v);
                return 2;
            }
        }
    }
    if (!path) {
        fprintf(stderr, "kvbench plot: --db FILE is required (see --help)\n");
        return 2;
    }
    const char *named[][2] = {{"--out", out_arg}, {"--variant", variant}};
    for (int k = 0; k < 2; k++) {
        int at = named[k][1] ? gp_find_control(named[k][1]) : -1;
        if (at >= 0) {
            fprintf(stderr, "kvbench plot: %s contains a control character (byte 0x%02x at offset %d); refused\n",
                    named[k][0], (unsigned char)named[k][1][at], at);
            return 2;
        }
    }
    /* gnuplot's `set output` runs '|cmd' as a pipe (and '<' starts its input pipes): --out
     * is a plain path, of a length that fits the names made from it */
    if (out_arg) {
        const char *p = out_arg + strspn(out_arg, " ");
        if (!*out_arg || *p == '|' || *p == '<' || strlen(out_arg) > 1000) {
            fprintf(stderr, "kvbench plot: --out '%s': expected a plain file path (not empty, not starting with | or <, "
                            "at most 1000 bytes)\n", out_arg);
            return 2;
        }
    }
    if (strcmp(figure, "niah") && !plot_lines_known(figure)) {
        fprintf(stderr, "kvbench plot: --figure '%s' is unknown (figures: niah, memory, latency, budget, zoom)\n",
                figure);
        return 2;
    }
    if (metric_given && strcmp(figure, "niah")) {
        fprintf(stderr, "kvbench plot: --metric applies to --figure niah\n");
        return 2;
    }
    kv_runinfo ri;
    kv_db *db = kv_report_open("plot", path, run, &ri);
    if (!db) return 1;
    char out[1024], gp[1100], dat[1100], png[1100], svg[1100];
    if (out_arg) {
        size_t n = strlen(out_arg);   /* a given .png/.svg extension is dropped */
        if (n > 4 && (!strcmp(out_arg + n - 4, ".png") || !strcmp(out_arg + n - 4, ".svg"))) n -= 4;
        snprintf(out, sizeof out, "%.*s", (int)n, out_arg);
    } else {
        snprintf(out, sizeof out, "%s-run%lld", figure, (long long)ri.id);
    }
    snprintf(gp, sizeof gp, "%s.gp", out);
    snprintf(dat, sizeof dat, "%s.dat", out);
    snprintf(png, sizeof png, "%s.png", out);
    snprintf(svg, sizeof svg, "%s.svg", out);
    unlink(png);   /* so a stale image cannot pass the check below */
    unlink(svg);
    int rc = !strcmp(figure, "niah") ? niah_write(kvdb_sqlite(db), &ri, path, variant, out, gp, dat)
                                     : plot_lines_write(figure, kvdb_sqlite(db), &ri, variant, out, gp, dat);
    kvdb_close(db);
    if (rc == 0) rc = gp_run(gp);
    if (rc == 0) rc = gp_check_image(png, "\x89PNG\r\n\x1a\n", 8) | gp_check_image(svg, "<?xml", 5);
    if (rc == 0) printf("wrote %s and %s (data %s, script %s)\n", png, svg, dat, gp);
    kv_runinfo_free(&ri);
    return rc ? 1 : 0;
}
