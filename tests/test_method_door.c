/* The door's checks and defaults (kv_method_resolve, kv_method_register): every
 * registered method has every member; a table of another ABI version or size, without a
 * required member or with a bad name is refused with one line; the optional members of a
 * minimal table get their defaults (no statistics asked, zero counters, no slow-tier
 * rows, empty texts, no events, no trained parameters, no commands, no trained file, an
 * empty paper), a version-1 table (the size of version 1) too; a table built against
 * other helper structs (KV_HELPERS_VERSION) is refused, a version-3 one loads, a version-4 one loads
 * with key_channels at its default (every channel); a command without a
 * function is refused; a taken name or command is refused, a new method is found and
 * listed after the built-in methods with its origin, its commands found by name. */
#include <string.h>
#include "../methods/method.h"
#include "check.h"

static kv_state *x_init(const kv_setup *s, char *err, size_t n) { return (void)s, (void)err, (void)n, NULL; }
static int x_ingest(kv_state *st, const kv_prefill *p, char *err, size_t n) { return (void)st, (void)p, (void)err, (void)n, 0; }
static void x_append(kv_state *st, int l, const float *k, const float *v, const kv_token *t) { (void)st, (void)l, (void)k, (void)v, (void)t; }
static void x_attend(kv_state *st, int l, const float *q, float *o) { (void)st, (void)l, (void)q, (void)o; }
static void x_memory(const kv_state *st, kv_mem *o) { (void)st, memset(o, 0, sizeof *o); }
static int x_rows(const kv_state *st, int l, int j, int32_t *p, int c, int *n) { return (void)st, (void)l, (void)j, (void)p, (void)c, (void)n, 0; }
static void x_free(kv_state *st) { (void)st; }

static int x_cmd(int argc, char **argv) { return (void)argc, (void)argv, 7; }
static int x_chan(const kv_state *st, int l, int j, int32_t *c) { return (void)st, (void)l, (void)j, c[0] = 1, 5; }

static const kv_method minimal = {KV_METHOD_HEAD, .name = "door-test", .init = x_init, .ingest = x_ingest,
                                  .append = x_append, .attend = x_attend, .memory = x_memory, .rows = x_rows,
                                  .free = x_free};

static void refused(const kv_method *t, const char *expect) {
    kv_method out;
    char err[512] = "";
    int rc = kv_method_resolve(t, &out, err, sizeof err);
    CHECK(rc == -1 && strstr(err, expect) && !strchr(err, '\n'), "expected a refusal with '%s', got %d '%s'", expect, rc, err);
}

int main(void) {
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_method *m = kv_method_at(i);
        CHECK(m->abi == KV_METHOD_ABI && m->size == sizeof *m && m->summary && m->params && m->needs && m->head_stats &&
                  m->slow_rows && m->params_used && m->events && m->describe && m->trained_params && m->commands &&
                  m->trained_file && m->paper && m->paper->claims && m->paper->baselines && m->paper->memory &&
                  m->key_channels,
              "%s: a member left unset after registration", m->name);
        CHECK(!kv_method_origin(m), "%s: built in, yet an origin", m->name);
    }
    CHECK(kv_method_reference() && kv_method_reference()->keeps_all, "no reference method");

    kv_method t = minimal, out;
    char err[512] = "";
    t.abi = KV_METHOD_ABI + 1;
    char want[128];
    snprintf(want, sizeof want, "ABI version %d; this kvbench reads versions 1 to %d", KV_METHOD_ABI + 1, KV_METHOD_ABI);
    refused(&t, want);
    t = minimal, t.abi = 0;
    refused(&t, "ABI version 0");
    t = minimal, t.size = sizeof t - 8;
    refused(&t, "built against another method.h");
    /* a version-1 table claiming more than version 1's size (issue 36: 4096 loaded, the
     * copy then read past the table) */
    t = minimal, t.abi = 1, t.size = 4096;
    refused(&t, "method table of 4096 bytes for ABI 1");
    t = minimal, t.abi = 1, t.size = sizeof t;
    refused(&t, "built against another method.h");
    t = minimal, t.attend = NULL;
    refused(&t, "door-test: the required member attend is NULL");
    t = minimal, t.rows = NULL;
    refused(&t, "the required member rows is NULL");
    t = minimal, t.name = "Has Space";
    refused(&t, "method name 'Has Space'");
    t = minimal, t.name = NULL;
    refused(&t, "method name ''");
    refused(NULL, "no method table");

    CHECK(kv_method_resolve(&minimal, &out, err, sizeof err) == 0, "minimal table refused: %s", err);
    kv_setup s = {.n_layers = 2, .n_heads = 2, .n_kv_heads = 1, .head_dim = 8, .n_prompt = 10, .budget_frac = 0.5};
    kv_needs nd = {7, 7, 7, 7};
    out.needs(&s, &nd);
    CHECK(nd.col_mass == 0 && nd.window == 0 && nd.queries == 0 && nd.wo == 0, "default needs asked for %d/%d/%d/%d",
          nd.col_mass, nd.window, nd.queries, nd.wo);
    kv_headstat hs = {7, 7};
    out.head_stats(NULL, 0, 0, &hs);
    CHECK(hs.kept == 0 && hs.events == 0, "default head_stats %g %g", hs.kept, hs.events);
    char buf[16] = "x", det[16] = "x";
    out.params_used(NULL, buf, sizeof buf);
    CHECK(!buf[0], "default params_used wrote '%s'", buf);
    buf[0] = 'x';
    out.describe(NULL, buf, sizeof buf);
    CHECK(!buf[0], "default describe wrote '%s'", buf);
    CHECK(out.slow_rows(NULL, 0) == 0 && out.events(NULL, NULL, 0) == 0, "default slow_rows/events not zero");
    CHECK(out.trained_params(&s, det, sizeof det) == 0 && !det[0], "default trained_params not zero");
    CHECK(out.params && !out.params[0].name && !strcmp(out.summary, ""), "default params/summary");
    char path[16] = "x";
    CHECK(!out.commands[0].name && out.trained_file(&s, path, sizeof path) == 0 && !path[0], "default commands/trained_file");
    CHECK(!out.paper->claims[0].id && !out.paper->baselines[0] && !out.paper->memory[0].method && !*out.paper->title,
          "default paper not empty");

    /* a table built against version 1: its size ends at trained_params; the rest defaults */
    kv_method v1 = minimal;
    v1.abi = 1, v1.size = (unsigned)KV_METHOD_SIZE_V1;
    v1.commands = (const kv_command[]){{"junk", "past a version-1 table's end: never read", x_cmd}, {NULL, NULL, NULL}};
    CHECK(kv_method_resolve(&v1, &out, err, sizeof err) == 0, "a version-1 table refused: %s", err);
    CHECK(out.abi == KV_METHOD_ABI && !out.commands[0].name && !out.paper->claims[0].id, "a version-1 table's new members");
    /* a version-2 table ends at paper: head_budgets (version 3) is never read, defaults to 0 */
    struct { kv_method m; char junk[64]; } v2 = {.m = minimal};
    memset(v2.junk, 0x5a, sizeof v2.junk);
    v2.m.abi = 2, v2.m.size = (unsigned)KV_METHOD_SIZE_V2, v2.m.head_budgets = 77;
    CHECK(kv_method_resolve(&v2.m, &out, err, sizeof err) == 0, "a version-2 table refused: %s", err);
    CHECK(out.abi == KV_METHOD_ABI && out.head_budgets == 0 && !out.paper->claims[0].id,
          "a version-2 table's version-3 member: head_budgets %d", out.head_budgets);
    /* a version-3 table predates `helpers`: its bytes were padding, whatever they hold, and
     * the table was built against the helper structs of version 1 */
    kv_method v3 = minimal;
    v3.abi = 3, v3.size = (unsigned)KV_METHOD_SIZE_V3, v3.helpers = 77;
    if (KV_HELPERS_VERSION == 1) {
        CHECK(kv_method_resolve(&v3, &out, err, sizeof err) == 0, "a version-3 table refused: %s", err);
        CHECK(out.helpers == 1 && out.abi == KV_METHOD_ABI, "a version-3 table: helpers %d", out.helpers);
    } else {
        refused(&v3, "built against the helper structs of version 1");
    }
    /* a version-4 table ends before key_channels (version 5): whatever lies past it is never
     * read, and the member defaults to -1 (every channel) */
    struct { kv_method m; char junk[64]; } v4 = {.m = minimal};
    memset(v4.junk, 0x5a, sizeof v4.junk);
    v4.m.abi = 4, v4.m.size = (unsigned)KV_METHOD_SIZE_V4;
    v4.m.key_channels = x_chan;   /* past its end: never called */
    CHECK(kv_method_resolve(&v4.m, &out, err, sizeof err) == 0, "a version-4 table refused: %s", err);
    int32_t ch[4] = {9, 9, 9, 9};
    CHECK(out.abi == KV_METHOD_ABI && out.key_channels && out.key_channels(NULL, 0, 0, ch) == -1 && ch[0] == 9,
          "a version-4 table's key_channels");
    CHECK(KV_METHOD_SIZE_V4 < KV_METHOD_SIZE_V5, "version 5 adds no bytes");
    v4.m.size = (unsigned)KV_METHOD_SIZE_V5;
    refused(&v4.m, "built against another method.h");
    /* a table built against other helper structs (kv_cacheset, kv_store, ...) is refused,
     * by its name; one without the member set (0) too */
    snprintf(want, sizeof want, "door-test: built against the helper structs of version %d", KV_HELPERS_VERSION + 1);
    t = minimal, t.helpers = KV_HELPERS_VERSION + 1;
    refused(&t, want);
    snprintf(want, sizeof want, "this kvbench's are version %d: rebuild it", KV_HELPERS_VERSION);
    refused(&t, want);
    t = minimal, t.helpers = 0;
    refused(&t, "built against the helper structs of version 0");
    CHECK(minimal.helpers == KV_HELPERS_VERSION, "KV_METHOD_HEAD set helpers %d", minimal.helpers);
    /* the drivers' union of needs: flags or'ed, row counts the larger (version 4's members too) */
    kv_needs all = {0}, a = {.col_mass = 1, .window = 8, .queries = 30}, b = {.window = 16, .queries = 12, .wo = 1};
    kv_needs_union(&all, &a);
    kv_needs_union(&all, &b);
    CHECK(all.col_mass == 1 && all.window == 16 && all.queries == 30 && all.wo == 1, "kv_needs_union: %d %d %d %d",
          all.col_mass, all.window, all.queries, all.wo);
    t = minimal, t.commands = (const kv_command[]){{"door-cmd", "help", NULL}, {NULL, NULL, NULL}};
    refused(&t, "door-test: command 'door-cmd': needs a name of a-z 0-9 _ . - and a function");
    t = minimal, t.commands = (const kv_command[]){{"Bad Cmd", "help", x_cmd}, {NULL, NULL, NULL}};
    refused(&t, "command 'Bad Cmd'");

    t = minimal, t.name = "snapkv";
    CHECK(kv_method_register(&t, "x.so", err, sizeof err) == -1 && strstr(err, "x.so: method 'snapkv' is already registered (built in)"),
          "a taken name: '%s'", err);
    CHECK(kv_command_find("sekv-probe") && !kv_command_find("door-cmd"), "the built-in commands");
    t = minimal, t.name = "door-other", t.commands = (const kv_command[]){{"sekv-probe", "again", x_cmd}, {NULL, NULL, NULL}};
    CHECK(kv_method_register(&t, "w.so", err, sizeof err) == -1 && strstr(err, "command 'sekv-probe' is already taken"),
          "a taken command: '%s'", err);
    int n0 = kv_method_count();
    t = minimal, t.commands = (const kv_command[]){{"door-cmd", "a plugin's command", x_cmd}, {NULL, NULL, NULL}};
    CHECK(kv_method_register(&t, "y.so", err, sizeof err) == 0, "register: %s", err);
    const kv_command *dc = kv_command_find("door-cmd");
    CHECK(dc && dc->fn(0, NULL) == 7, "the registered method's command is not found");
    const kv_method *m = kv_method_find("DOOR-TEST");
    CHECK(m && kv_method_count() == n0 + 1 && kv_method_at(n0) == m && m->init == x_init, "the registered method is not listed last");
    CHECK(m && kv_method_origin(m) && !strcmp(kv_method_origin(m), "y.so"), "origin of the registered method");
    CHECK(kv_method_register(&minimal, "z.so", err, sizeof err) == -1 && strstr(err, "already registered (y.so)"),
          "registered twice: '%s'", err);
    /* --methods groups: all is the registry; paper is the reference, every method with a paper
     * and that paper's baselines; kvpress the reference and the methods kvpress has */
    const kv_method *grp[256];
    CHECK(kv_method_group("nope", grp, 256) == -1 && kv_method_group(NULL, grp, 256) == -1, "a group 'nope'");
    int na = kv_method_group("all", grp, 256);
    CHECK(na == kv_method_count() && grp[0] == kv_method_at(0) && grp[na - 1] == kv_method_at(na - 1), "all: %d", na);
    int np = kv_method_group("paper", grp, 256), has_ref = 0, rows = 0, bases = 0;
    for (int i = 0; i < np; i++) {
        has_ref |= grp[i]->keeps_all;
        rows += grp[i]->paper->title[0] != 0;
        for (int k = 0; k < kv_method_count(); k++)
            for (const char *const *b = kv_method_at(k)->paper->baselines; *b; b++) bases += !strcmp(*b, grp[i]->name);
    }
    int want_rows = 0;
    for (int k = 0; k < kv_method_count(); k++) want_rows += kv_method_at(k)->paper->title[0] != 0;
    CHECK(np > 0 && has_ref && rows == want_rows && rows + bases + 1 >= np, "paper: %d methods, %d rows, %d baselines",
          np, rows, bases);
    int nk = kv_method_group("kvpress", grp, 256), has_snap = 0, has_sekv = 0;
    for (int i = 0; i < nk; i++) has_snap |= !strcmp(grp[i]->name, "snapkv"), has_sekv |= grp[i]->paper->title[0] != 0;
    CHECK(nk >= 12 && grp[0]->keeps_all && has_snap && !has_sekv, "kvpress: %d methods", nk);
    CHECK(kv_method_group("kvpress", grp, 2) == nk, "a group's count past cap");
    return check_done("test_method_door");
}
