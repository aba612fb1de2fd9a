/* The one option rule (kernels/cli_opt.h): "--flag value" and "--flag=value" give the same
 * name and value; a bare flag takes none ("--quiet=1" is refused); a flag at the end of
 * argv lacks its value; a word is not an option; an over-long name is no option of any
 * command; kb_opt_read refuses unknown flags and words where none are taken. Every value
 * string of a random flag/value pair, with '=' inside values too. */
#include "check.h"
#include "../kernels/cli_opt.h"

int main(void) {
    test_seed();
    static const char *const bare[] = {"--quiet", "-h", NULL}, *const valued[] = {"--model", "--ctx", NULL};
    char flag[32];
    const char *val;
    for (int trial = 0; trial < 200; trial++) {
        char value[40];
        int len = 1 + (int)(test_next() % 30);
        for (int k = 0; k < len; k++) value[k] = (char)(' ' + 1 + test_next() % 94);   /* '=' and '-' included */
        value[len] = 0;
        char joined[64];
        snprintf(joined, sizeof joined, "--model=%s", value);
        char *eq[] = {"kvbench", joined, NULL}, *sp[] = {"kvbench", "--model", value, NULL};
        int i = 1, r = kb_opt_next(2, eq, &i, bare, flag, sizeof flag, &val);
        CHECK(r == KB_OPT_OK && !strcmp(flag, "--model") && val && !strcmp(val, value) && i == 1, "'%s'", joined);
        i = 1;
        r = kb_opt_next(3, sp, &i, bare, flag, sizeof flag, &val);
        CHECK(r == KB_OPT_OK && !strcmp(flag, "--model") && val == sp[2] && i == 2, "--model '%s'", value);
    }
    char *v[] = {"kvbench", "--quiet", "word", "--quiet=1", "--a-flag-name-longer-than-the-buffer=1", "--ctx", NULL};
    int i = 1;
    CHECK(kb_opt_next(6, v, &i, bare, flag, sizeof flag, &val) == KB_OPT_OK && !val && i == 1, "bare flag");
    i = 2;
    CHECK(kb_opt_next(6, v, &i, bare, flag, sizeof flag, &val) == KB_OPT_WORD && i == 2, "word");
    i = 3;
    CHECK(kb_opt_next(6, v, &i, bare, flag, sizeof flag, &val) == KB_OPT_BARE_VALUE && !strcmp(flag, "--quiet"),
          "bare flag with a value");
    i = 4;
    CHECK(kb_opt_next(6, v, &i, bare, flag, sizeof flag, &val) == KB_OPT_TOO_LONG, "long name");
    i = 5;
    CHECK(kb_opt_next(6, v, &i, bare, flag, sizeof flag, &val) == KB_OPT_NO_VALUE && !strcmp(flag, "--ctx") && i == 5,
          "a value missing at the end");
    char why[128];
    CHECK(!strcmp(kb_opt_problem(KB_OPT_NO_VALUE, "--ctx", why, sizeof why), "--ctx needs a value"), "%s", why);
    CHECK(!strcmp(kb_opt_problem(KB_OPT_BARE_VALUE, "--quiet", why, sizeof why), "--quiet takes no value"), "%s", why);

    /* kb_opt_read: a known flag 0, a word 1 where words are taken, the rest -1 (one line printed) */
    char *w[] = {"kvbench", "--ctx=4", "name", "--bogus", "1", NULL};
    i = 1;
    CHECK(kb_opt_read("test", 5, w, &i, bare, valued, 0, flag, sizeof flag, &val) == 0 && !strcmp(val, "4"), "known");
    i = 2;
    CHECK(kb_opt_read("test", 5, w, &i, bare, valued, 1, flag, sizeof flag, &val) == 1, "word taken");
    i = 2;
    CHECK(kb_opt_read("test", 5, w, &i, bare, valued, 0, flag, sizeof flag, &val) == -1, "word refused");
    i = 3;
    CHECK(kb_opt_read("test", 5, w, &i, bare, valued, 0, flag, sizeof flag, &val) == -1, "unknown flag");
    return check_done("test_cli_opt");
}
