/* What the figures of kvbench plot share: writing gnuplot scripts that draw PNG and SVG
 * from one set of commands, running gnuplot, and checking what it wrote. */
#ifndef KV_PLOT_UTIL_H
#define KV_PLOT_UTIL_H
#include <sqlite3.h>
#include <stdio.h>
#include "runinfo.h"

/* Every text written into a script or data file goes through these: control characters
 * (a newline would end a comment and start a command) are dropped or replaced, and text
 * from data only ever sits inside single quotes, where gnuplot expands nothing (inside
 * double quotes it runs `backquoted` commands).
 * gp_find_control: the offset of the first control character of s, or -1. */
int gp_find_control(const char *s);
/* Text inside a # comment line (control characters written as '?'). */
void gp_comment(FILE *f, const char *s);
/* A gnuplot single-quoted string ('' escapes '; control characters dropped). */
void gp_str(FILE *f, const char *s);
/* The inside of a single-quoted string (the caller writes the quotes, and may write
 * GP_NL between pieces for a line break). */
void gp_text(FILE *f, const char *s);
/* The same, breaking the line (GP_NL) after a ", " where the next item would pass width
 * characters: the long run line under a figure's title. */
void gp_text_wrap(FILE *f, const char *s, int width);
/* A line break inside a single-quoted title: close the string, join a double-quoted
 * newline (a fixed constant, never data), reopen. */
#define GP_NL "'.\"\\n\".'"
/* Opens the loop that draws everything twice: OUT.png (pngcairo, else png) and OUT.svg,
 * w x h pixels. The caller writes the plot commands, then gp_close(). */
void gp_open(FILE *f, const char *figure, const char *script, const char *out, int w, int h);
void gp_close(FILE *f);
/* Runs `gnuplot script`; 0, or -1 after printing why. */
int gp_run(const char *script);
/* The file exists, is non-empty and starts with magic; else prints why and returns -1. */
int gp_check_image(const char *path, const char *magic, size_t n);

/* The line and heatmap figures (plot_lines.c): "memory", "latency", "budget", "zoom".
 * Writes the data and the script for run ri.id; 0, or -1 after printing why. */
int plot_lines_known(const char *figure);
int plot_lines_write(const char *figure, sqlite3 *h, const kv_runinfo *ri, const char *variant, const char *out,
                     const char *gp, const char *dat);
/* kvbench plot --figure memory for a kvbench sim run (plot_sim.c): totals in GB with the
 * SeKV paper's reported points beside them. 0 or -1. */
int plot_sim_memory(sqlite3 *h, const kv_runinfo *ri, const char *out, const char *gp, const char *dat);
#endif
