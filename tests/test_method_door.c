/* The door's checks and defaults (kv_method_resolve, kv_method_register): every
 * registered method has every member; a table of another ABI version or size, without a
 * required member or with a bad name is refused with one line; the optional members of a
 * minimal table get their defaults (no statistics asked, zero counters, no slow-tier
 * rows, empty texts, no events, no trained parameters); a taken name is refused, a new
 * one is found and listed after the built-in methods with its origin. */
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
                  m->slow_rows && m->params_used && m->events && m->describe && m->trained_params,
              "%s: a member left unset after registration", m->name);
        CHECK(!kv_method_origin(m), "%s: built in, yet an origin", m->name);
    }
    CHECK(kv_method_reference() && kv_method_reference()->keeps_all, "no reference method");

    kv_method t = minimal, out;
    char err[512] = "";
    t.abi = KV_METHOD_ABI + 1;
    refused(&t, "ABI version 2; this kvbench reads versions 1 to 1");
    t = minimal, t.abi = 0;
    refused(&t, "ABI version 0");
    t = minimal, t.size = sizeof t - 8;
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
    kv_needs nd = {7, 7};
    out.needs(&s, &nd);
    CHECK(nd.col_mass == 0 && nd.window == 0, "default needs asked for %d/%d", nd.col_mass, nd.window);
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

    t = minimal, t.name = "snapkv";
    CHECK(kv_method_register(&t, "x.so", err, sizeof err) == -1 && strstr(err, "x.so: method 'snapkv' is already registered (built in)"),
          "a taken name: '%s'", err);
    int n0 = kv_method_count();
    CHECK(kv_method_register(&minimal, "y.so", err, sizeof err) == 0, "register: %s", err);
    const kv_method *m = kv_method_find("DOOR-TEST");
    CHECK(m && kv_method_count() == n0 + 1 && kv_method_at(n0) == m && m->init == x_init, "the registered method is not listed last");
    CHECK(m && kv_method_origin(m) && !strcmp(kv_method_origin(m), "y.so"), "origin of the registered method");
    CHECK(kv_method_register(&minimal, "z.so", err, sizeof err) == -1 && strstr(err, "already registered (y.so)"),
          "registered twice: '%s'", err);
    return check_done("test_method_door");
}
