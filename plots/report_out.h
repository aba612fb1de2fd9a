/* What report prints of a results file's text, made safe for a terminal and a
 * spreadsheet (report_out.c). A results file may come from someone else: its method
 * names, params, models and run details are data, never terminal controls or formulas. */
#ifndef KV_REPORT_OUT_H
#define KV_REPORT_OUT_H
#include <stddef.h>
#include <stdio.h>

/* s[0..n) with every control byte written as \xNN: C0 (newline kept when keep_nl), DEL,
 * the C1 controls encoded in UTF-8 (U+0080..U+009F: \xc2\x9b is CSI) and every byte that
 * is not part of valid UTF-8 (a lone 0x9b is CSI to an 8-bit terminal). Printable ASCII
 * and valid UTF-8 are copied as they are. Returns a malloc'd NUL-terminated string (NULL
 * when out of memory). */
char *kv_escape_ctl(const char *s, size_t n, int keep_nl);

/* The Markdown of report: written into a memory stream (kv_md_open), then to out with
 * every control byte escaped (kv_md_close, which frees it; 0, or -1 when out fails). */
typedef struct {
    FILE *f;
    char *buf;
    size_t len;
} kv_md;
int kv_md_open(kv_md *m);
int kv_md_close(kv_md *m, FILE *out);

/* One CSV cell (then ',' or, when last, a newline), its control bytes escaped and, as
 * OWASP advises against formula injection, a ' put before a cell that starts with =, +,
 * - or @, unless the whole cell is a plain decimal number (kvbench's own numbers, such as
 * -0.5 or -1e-05, stay numbers). */
void kv_csv_cell(FILE *f, const char *s, int last);
/* One line of CSV cells from a printf format whose conversions are separated by commas
 * ("%s,paper,%s,%.17g"): each comma-separated piece of fmt is formatted on its own, so a
 * comma or quote inside a value stays inside its cell. */
void kv_csv_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
