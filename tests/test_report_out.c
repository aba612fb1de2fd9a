/* report's terminal and spreadsheet safety (plots/report_out.c):
 *  - kv_escape_ctl writes every C0 control byte (newline kept only when asked), DEL, the
 *    UTF-8 C1 controls (U+0080..U+009F, \xc2\x9b is CSI) and every byte outside valid
 *    UTF-8 as \xNN, and copies printable ASCII and valid UTF-8 as they are: fixed cases,
 *    then random byte strings (seeded) checked against an independent byte-by-byte
 *    decoder of the output: nothing but \n, printable ASCII and valid non-C1 UTF-8, and
 *    undoing the \xNN escapes gives the input back whenever the input held no backslash;
 *  - kv_csv_cell puts ' before a cell that starts with =, +, - or @ (OWASP) unless it is a
 *    plain decimal number (or inf / nan, as printf writes them), and quotes it;
 *  - kv_md_close prints the Markdown with its control bytes escaped. */
#include "../plots/report_out.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

static char *cell(const char *s) {   /* kv_csv_cell's output, without the trailing ',' */
    static char buf[1024];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    kv_csv_cell(f, s, 0);
    long n = ftell(f);
    fclose(f);
    buf[n > 0 ? n - 1 : 0] = 0;
    return buf;
}

/* 1 if out holds only \n (when nl), printable ASCII and valid UTF-8 other than C1. */
static int clean(const unsigned char *o, int nl) {
    while (*o) {
        unsigned c = *o;
        if (c < 0x80) {
            if ((c < 0x20 && !(nl && c == '\n')) || c == 0x7f) return 0;
            o++;
            continue;
        }
        int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!len) return 0;
        unsigned cp = c & (0xff >> (len + 1));
        for (int k = 1; k < len; k++) {
            if ((o[k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (o[k] & 0x3f);
        }
        if (cp < 0xa0 || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff || (len == 3 && cp < 0x800) ||
            (len == 4 && cp < 0x10000))
            return 0;
        o += len;
    }
    return 1;
}

/* The input back from the output, \xNN undone (only for inputs without a backslash). */
static size_t unescape(const char *o, unsigned char *back) {
    size_t n = 0;
    while (*o) {
        if (o[0] == '\\' && o[1] == 'x') {
            back[n++] = (unsigned char)strtoul((char[]){o[2], o[3], 0}, NULL, 16);
            o += 4;
        } else {
            back[n++] = (unsigned char)*o++;
        }
    }
    return n;
}

int main(void) {
    test_seed();
    static const struct { const char *in, *out; int nl; } esc[] = {
        {"plain ascii", "plain ascii", 0},
        {"\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m", 0},
        {"a\nb\tc\rd\x7f", "a\\x0ab\\x09c\\x0dd\\x7f", 0},
        {"a\nb\r", "a\nb\\x0d", 1},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0},
        {"csi \xc2\x9b" "31m", "csi \\xc2\\x9b31m", 0},   /* U+009B, CSI in UTF-8 */
        {"nbsp \xc2\xa0", "nbsp \xc2\xa0", 0},            /* U+00A0: printable */
        {"lone \x9b" "31m", "lone \\x9b31m", 0},
        {"cut \xe2\x82", "cut \\xe2\\x82", 0},
        {"overlong \xc0\xaf \xe0\x80\xaf", "overlong \\xc0\\xaf \\xe0\\x80\\xaf", 0},
        {"surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80", 0},
        {"", "", 0},
    };
    for (size_t i = 0; i < sizeof esc / sizeof esc[0]; i++) {
        char *o = kv_escape_ctl(esc[i].in, strlen(esc[i].in), esc[i].nl);
        CHECK(o && !strcmp(o, esc[i].out), "escape case %zu: got '%s', want '%s'", i, o ? o : "(null)", esc[i].out);
        free(o);
    }
    /* random bytes, biased towards controls, C1 lead bytes and UTF-8 pieces */
    static const unsigned char pick[] = {0x1b, 0x07, 0x00, '\n', '\r', 0x7f, 0x9b, 0xc2, 0x80, 0x9f, 0xa0, 0xc3,
                                         0xa9, 0xe2, 0x82, 0xac, 0xed, 0xf0, 0x9f, 0xf4, 0x90, 'a', '[', '='};
    int bad = 0;
    for (int t = 0; t < 20000 && !bad; t++) {
        unsigned char in[48], back[48 * 4 + 1];
        size_t n = (size_t)test_int(0, 47);
        for (size_t k = 0; k < n; k++)
            in[k] = test_unif() < 0.7 ? pick[test_int(0, (int)sizeof pick - 1)] : (unsigned char)test_int(1, 255);
        for (size_t k = 0; k < n; k++)
            if (in[k] == '\\') in[k] = '/';
        int nl = t & 1;
        char *o = kv_escape_ctl((const char *)in, n, nl);
        if (!o || !clean((const unsigned char *)o, nl) || unescape(o, back) != n || memcmp(back, in, n)) bad = 1;
        CHECK(!bad, "random case %d (%zu bytes): output '%s' is not clean or does not undo to the input", t, n,
              o ? o : "(null)");
        free(o);
    }

    static const struct { const char *in, *out; } csv[] = {
        {"=HYPERLINK(\"http://x\",\"y\")", "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""},
        {"+1+cmd|' /C calc'!A0", "\"'+1+cmd|' /C calc'!A0\""},
        {"-2+3", "\"'-2+3\""},
        {"@SUM(A1:A2)", "\"'@SUM(A1:A2)\""},
        {"-0.5", "\"-0.5\""},
        {"-1.2500000000000001e-05", "\"-1.2500000000000001e-05\""},
        {"+3", "\"+3\""},
        {"-inf", "\"-inf\""},
        {"-nan", "\"-nan\""},
        {"-", "\"'-\""},
        {"-1e", "\"'-1e\""},
        {"snapkv", "\"snapkv\""},
        {"", "\"\""},
        {"a,b", "\"a,b\""},
        {"=\x1b[2J", "\"'=\\x1b[2J\""},
        {"\x1b=1", "\"\\x1b=1\""},
    };
    for (size_t i = 0; i < sizeof csv / sizeof csv[0]; i++) {
        const char *o = cell(csv[i].in);
        CHECK(!strcmp(o, csv[i].out), "csv case %zu: got %s, want %s", i, o, csv[i].out);
    }

    kv_md md;
    char out[256];
    FILE *f = fmemopen(out, sizeof out, "w");
    CHECK(kv_md_open(&md) == 0, "kv_md_open");
    fprintf(md.f, "| \x1b]0;title\x07 | x |\n");
    CHECK(kv_md_close(&md, f) == 0, "kv_md_close");
    long n = ftell(f);
    fclose(f);
    out[n] = 0;
    CHECK(!strcmp(out, "| \\x1b]0;title\\x07 | x |\n"), "Markdown: got '%s'", out);
    return check_done("test_report_out");
}
