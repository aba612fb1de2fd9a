#include "cli_opt.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "host.h"

static int is_bare(const char *const *bare, const char *flag) {
    for (; bare && *bare; bare++)
        if (!strcmp(*bare, flag)) return 1;
    return 0;
}

int kb_opt_next(int argc, char **argv, int *i, const char *const *bare, char *flag, size_t cap, const char **val) {
    const char *a = argv[*i], *eq = a[0] == '-' ? strchr(a, '=') : NULL;
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    *val = NULL;
    if (cap) snprintf(flag, cap, "%.*s", (int)len, a);
    if (a[0] != '-') return KB_OPT_WORD;
    if (len >= cap) return KB_OPT_TOO_LONG;
    if (is_bare(bare, flag)) return eq ? KB_OPT_BARE_VALUE : KB_OPT_OK;
    if (eq) *val = eq + 1;
    else if (*i + 1 < argc) *val = argv[++*i];
    else return KB_OPT_NO_VALUE;
    return KB_OPT_OK;
}

const char *kb_opt_problem(int code, const char *flag, char *buf, size_t len) {
    switch (code) {
    case KB_OPT_WORD: snprintf(buf, len, "unexpected argument '%s'", flag); break;
    case KB_OPT_NO_VALUE: snprintf(buf, len, "%s needs a value", flag); break;
    case KB_OPT_BARE_VALUE: snprintf(buf, len, "%s takes no value", flag); break;
    default: snprintf(buf, len, "unknown option '%s'", flag); break;
    }
    return buf;
}

static void complain(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void complain(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kb_vcomplain(cmd, fmt, ap);
    va_end(ap);
}

int kb_opt_read(const char *cmd, int argc, char **argv, int *i, const char *const *bare, const char *const *valued,
                int words, char *flag, size_t cap, const char **val) {
    int r = kb_opt_next(argc, argv, i, bare, flag, cap, val);
    if (r == KB_OPT_WORD && words) return 1;
    int known = r != KB_OPT_WORD && r != KB_OPT_TOO_LONG && (is_bare(bare, flag) || is_bare(valued, flag));
    if (r == KB_OPT_OK && known) return 0;
    char why[160];
    if (r == KB_OPT_WORD) complain(cmd, "unexpected argument '%s' (see kvbench %s --help)", argv[*i], cmd);
    else if (!known) complain(cmd, "unknown option '%s' (see kvbench %s --help)", r == KB_OPT_TOO_LONG ? argv[*i] : flag, cmd);
    else complain(cmd, "%s (see kvbench %s --help)", kb_opt_problem(r, flag, why, sizeof why), cmd);
    return -1;
}
