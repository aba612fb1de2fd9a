/* Terminal- and spreadsheet-safe output of report (report_out.h). */
#include "report_out.h"

#include <csv.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0 if there is none
 * (overlong forms, surrogates and code points past U+10FFFF are not valid). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

char *kv_escape_ctl(const char *s, size_t n, int keep_nl) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    char *out = malloc(4 * n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        size_t len = u[i] < 0x80 ? 1 : utf8_len(u + i, n - i);
        int ctl = u[i] < 0x80 ? (u[i] < 0x20 && !(keep_nl && u[i] == '\n')) || u[i] == 0x7f
                              : !len || (u[i] == 0xc2 && u[i + 1] < 0xa0);   /* invalid, or C1 */
        if (!len) len = 1;
        for (size_t k = 0; k < len; k++) {
            if (ctl) *o++ = '\\', *o++ = 'x', *o++ = hex[u[i + k] >> 4], *o++ = hex[u[i + k] & 15];
            else *o++ = (char)u[i + k];
        }
        i += len;
    }
    *o = 0;
    return out;
}

int kv_md_open(kv_md *m) {
    m->buf = NULL, m->len = 0;
    m->f = open_memstream(&m->buf, &m->len);
    return m->f ? 0 : -1;
}

int kv_md_close(kv_md *m, FILE *out) {
    int rc = 0;
    if (!m->f) return -1;
    if (fclose(m->f)) rc = -1;
    char *e = rc ? NULL : kv_escape_ctl(m->buf, m->len, 1);
    if (!e || fputs(e, out) == EOF) rc = -1;
    free(e), free(m->buf);
    m->f = NULL, m->buf = NULL, m->len = 0;
    return rc;
}

/* [+-]digits[.digits][e[+-]digits] (or .digits): a cell a spreadsheet reads as a number;
 * or inf / nan, as printf writes a double (harmless text to a spreadsheet). */
static int plain_number(const char *s) {
    int digits = 0;
    if (*s == '+' || *s == '-') s++;
    if (!strcmp(s, "inf") || !strcmp(s, "nan")) return 1;
    for (; *s >= '0' && *s <= '9'; s++) digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++) digits++;
    if (!digits) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    return *s == 0;
}

void kv_csv_cell(FILE *f, const char *s, int last) {
    char *e = kv_escape_ctl(s, strlen(s), 0);
    const char *c = e ? e : "(out of memory)";
    if (strchr("=+-@", c[0]) && c[0] && !plain_number(c)) {
        size_t n = strlen(c);
        char *q = malloc(n + 2);
        if (q) {
            q[0] = '\'';
            memcpy(q + 1, c, n + 1);
            csv_fwrite(f, q, n + 1);
            free(q);
        }
    } else {
        csv_fwrite(f, c, strlen(c));
    }
    free(e);
    fputc(last ? '\n' : ',', f);
}

/* Each piece of fmt between commas holds at most one conversion (checked by the format
 * attribute of the callers' literal strings only as a whole: keep them simple). */
void kv_csv_line(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    for (const char *p = fmt;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char piece[64], cell[1024] = "";
        if (n >= sizeof piece) n = sizeof piece - 1;
        memcpy(piece, p, n);
        piece[n] = 0;
        const char *pc = strchr(piece, '%');
        if (pc) {   /* one conversion: take its argument by type */
            size_t k = strcspn(pc + 1, "sdgf") + 1;
            char conv = pc[k];
            if (conv == 's') snprintf(cell, sizeof cell, piece, va_arg(ap, const char *));
            else if (conv == 'd') snprintf(cell, sizeof cell, piece, va_arg(ap, int));
            else snprintf(cell, sizeof cell, piece, va_arg(ap, double));
        } else {
            snprintf(cell, sizeof cell, "%s", piece);
        }
        kv_csv_cell(f, cell, !comma);
        if (!comma) break;
        p = comma + 1;
    }
    va_end(ap);
}
