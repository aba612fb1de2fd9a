/* The one rule for a command's options, in every command: "--flag value" and "--flag=value"
 * mean the same; a flag that takes no value (bare) takes none, "--flag=x" included. The
 * commands keep their own words for what a value may be. */
#ifndef KB_CLI_OPT_H
#define KB_CLI_OPT_H
#include <stddef.h>

enum {
    KB_OPT_OK = 0,          /* an option: its name in flag, its value in *val (NULL if bare) */
    KB_OPT_WORD = 1,        /* argv[*i] is not an option (no leading '-'): a positional word */
    KB_OPT_NO_VALUE = 2,    /* a flag that takes a value ended argv */
    KB_OPT_BARE_VALUE = 3,  /* a bare flag given "=value" */
    KB_OPT_TOO_LONG = 4,    /* a name longer than the buffer: no option of any command */
};

/* Reads the option at argv[*i]: its name (up to '=') into flag[0..cap), its value (after
 * '=', else argv[*i + 1], advancing *i) into *val. bare: the flags that take no value, a
 * NULL-terminated list (NULL for none). Returns a KB_OPT_ code; flag holds the name for
 * the message whatever the code (argv[*i] itself for KB_OPT_WORD, cut to cap). */
int kb_opt_next(int argc, char **argv, int *i, const char *const *bare, char *flag, size_t cap, const char **val);

/* The message for a code other than KB_OPT_OK, without the command's prefix: "unexpected
 * argument 'x'", "--flag needs a value", "--flag takes no value", "unknown option '...'". */
const char *kb_opt_problem(int code, const char *flag, char *buf, size_t len);

/* kb_opt_next for a command that lists its flags, bare (no value) and valued (both
 * NULL-terminated): 0, a flag of either list; 1, a positional word, when words is nonzero;
 * -1, anything else (a word where none is taken, an unknown flag, a value missing or given
 * to a bare flag), with one line "kvbench CMD: <problem> (see kvbench CMD --help)" on stderr. */
int kb_opt_read(const char *cmd, int argc, char **argv, int *i, const char *const *bare, const char *const *valued,
                int words, char *flag, size_t cap, const char **val);

#endif
