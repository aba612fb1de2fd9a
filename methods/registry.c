/* The table of methods, in the order reports list them, then the methods registered at
 * run time (plugins). Every table is resolved (kv_method_resolve) on its way in: the
 * registry hands out complete copies, so no caller checks an optional member for NULL. */
#include "method.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern const kv_method kv_fullkv, kv_streamingllm, kv_h2o, kv_snapkv, kv_pyramidkv, kv_chunkkv,
    kv_sentencekv, kv_sekv, kv_sekv_ref, kv_sekv_spread, kv_knormpress,
    kv_tova, kv_keydiff, kv_lagkv, kv_randompress, kv_adakv_snapkv;
extern const kv_method kv_expected_attention, kv_criticalkv, kv_criticaladakv;   /* kvpress presses on door version 4 */
extern const kv_method kv_snapkv_think;                         /* door version 5: key channels */

static const kv_method *const builtin[] = {
    &kv_fullkv, &kv_streamingllm, &kv_h2o, &kv_snapkv, &kv_pyramidkv, &kv_chunkkv, &kv_sentencekv, &kv_sekv,
    &kv_sekv_ref, &kv_sekv_spread, &kv_knormpress, &kv_tova, &kv_keydiff, &kv_lagkv, &kv_randompress,
    &kv_adakv_snapkv,
    &kv_expected_attention, &kv_criticalkv, &kv_criticaladakv,
    &kv_snapkv_think,
};
#define N_BUILTIN (int)(sizeof builtin / sizeof builtin[0])
#define MAX_METHODS 256

static kv_method table[MAX_METHODS];
static const char *origin[MAX_METHODS];   /* NULL: built in */
static int n_table = -1;

/* ---------------------------------------------------------------- defaults */

static void no_needs(const kv_setup *s, kv_needs *out) {
    (void)s;
    memset(out, 0, sizeof *out);
}
static void no_head_stats(const kv_state *st, int layer, int head, kv_headstat *out) {
    (void)st, (void)layer, (void)head;
    out->kept = 0;
    out->events = 0;
}
static double no_slow_rows(const kv_state *st, int layer) { return (void)st, (void)layer, 0; }
static void empty_text(const kv_state *st, char *buf, size_t len) {
    (void)st;
    if (len) buf[0] = 0;
}
static size_t no_events(const kv_state *st, kv_event *out, size_t cap) { return (void)st, (void)out, (void)cap, 0; }
static size_t no_trained(const kv_setup *s, char *detail, size_t len) {
    (void)s;
    if (len) detail[0] = 0;
    return 0;
}
static const kv_param no_params[] = {{NULL, NULL, NULL}};
static const kv_command no_commands[] = {{NULL, NULL, NULL}};
static int no_trained_file(const kv_setup *s, char *path, size_t len) {
    (void)s;
    if (len) path[0] = 0;
    return 0;
}
static const char *const no_names[] = {NULL};
static const kv_claim no_claims[] = {{NULL, NULL, NULL, 0, 0, NULL, NULL}};
static const kv_paper_mem no_memory[] = {{NULL, 0, 0}};
static const kv_paper no_paper = {"", "", no_names, no_claims, "", NULL, "", "", "", no_memory};

static int all_channels(const kv_state *st, int layer, int kv_head, int32_t *chan) {
    return (void)st, (void)layer, (void)kv_head, (void)chan, -1;
}

static int name_ok(const char *s) {
    if (!s || !*s || strlen(s) > 48) return 0;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && !strchr("_.-", *s)) return 0;
    return 1;
}

int kv_method_resolve(const kv_method *in, kv_method *out, char *err, size_t errlen) {
    if (!in) return snprintf(err, errlen, "no method table"), -1;
    if (in->abi < 1 || in->abi > KV_METHOD_ABI)
        return snprintf(err, errlen, "method table of ABI version %d; this kvbench reads versions 1 to %d%s", in->abi,
                        KV_METHOD_ABI, in->abi > KV_METHOD_ABI ? " (rebuild it against this kvbench's method.h)" : ""),
               -1;
    /* each version's table has one size: a larger claim would make the copy below read past it */
    static const size_t known[KV_METHOD_ABI + 1] = {0, KV_METHOD_SIZE_V1, KV_METHOD_SIZE_V2, KV_METHOD_SIZE_V3,
                                                    KV_METHOD_SIZE_V4, KV_METHOD_SIZE_V5};
    _Static_assert(KV_METHOD_ABI == 5 && KV_METHOD_SIZE_V5 == sizeof(kv_method),
                   "a new ABI version needs its size in known[]");
    _Static_assert(KV_METHOD_SIZE_V4 == (offsetof(kv_method, helpers) + sizeof(int) + _Alignof(kv_method) - 1) /
                                            _Alignof(kv_method) * _Alignof(kv_method),
                   "version 4's size is its sizeof: helpers and the padding after it");
    _Static_assert(KV_METHOD_SIZE_V3 == KV_METHOD_SIZE_V4, "helpers no longer sits in version 3's padding");
    if (in->size != known[in->abi])
        return snprintf(err, errlen, "method table of %u bytes for ABI %d (expected %zu): built against another method.h",
                        in->size, in->abi, known[in->abi]),
               -1;
    memset(out, 0, sizeof *out);
    memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
    if (in->abi < 4) out->helpers = 1;   /* the member's bytes were padding then: version 1 */
    const char *name = name_ok(out->name) ? out->name : "a method";
    if (out->helpers != KV_HELPERS_VERSION)
        return snprintf(err, errlen,
                        "%s: built against the helper structs of version %d (kv_cacheset, kv_store, kb_decode_args); "
                        "this kvbench's are version %d: rebuild it against this kvbench's headers",
                        name, out->helpers, KV_HELPERS_VERSION),
               -1;
    if (!name_ok(out->name))
        return snprintf(err, errlen, "method name '%.60s': 1 to 48 characters of a-z 0-9 _ . -", out->name ? out->name : ""),
               -1;
    const char *missing = !out->init ? "init" : !out->ingest ? "ingest" : !out->append ? "append"
                        : !out->attend ? "attend" : !out->memory ? "memory" : !out->rows ? "rows"
                        : !out->free ? "free" : NULL;
    if (missing) return snprintf(err, errlen, "%s: the required member %s is NULL", name, missing), -1;
    for (const kv_command *c = out->commands; c && c->name; c++)
        if (!c->fn || !name_ok(c->name))
            return snprintf(err, errlen, "%s: command '%.60s': needs a name of a-z 0-9 _ . - and a function", name,
                            c->name),
                   -1;
    if (!out->summary) out->summary = "";
    if (!out->params) out->params = no_params;
    if (!out->needs) out->needs = no_needs;
    if (!out->head_stats) out->head_stats = no_head_stats;
    if (!out->slow_rows) out->slow_rows = no_slow_rows;
    if (!out->params_used) out->params_used = empty_text;
    if (!out->events) out->events = no_events;
    if (!out->describe) out->describe = empty_text;
    if (!out->trained_params) out->trained_params = no_trained;
    if (!out->commands) out->commands = no_commands;
    if (!out->trained_file) out->trained_file = no_trained_file;
    if (!out->paper) out->paper = &no_paper;
    if (!out->key_channels) out->key_channels = all_channels;
    out->abi = KV_METHOD_ABI;
    out->size = sizeof *out;
    return 0;
}

/* ---------------------------------------------------------------- the table */

static void build(void) {
    if (n_table >= 0) return;
    n_table = 0;
    for (int i = 0; i < N_BUILTIN; i++) {
        char err[256];
        if (kv_method_resolve(builtin[i], &table[n_table], err, sizeof err)) {
            fprintf(stderr, "kvbench: built-in method refused: %s\n", err);   /* a build mistake */
            exit(1);
        }
        origin[n_table++] = NULL;
    }
}

int kv_method_count(void) { build(); return n_table; }

const kv_method *kv_method_at(int i) {
    return i >= 0 && i < kv_method_count() ? &table[i] : NULL;
}

const kv_method *kv_method_find(const char *name) {
    for (int i = 0; name && i < kv_method_count(); i++)
        if (strcasecmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

const kv_method *kv_method_reference(void) {
    for (int i = 0; i < kv_method_count(); i++)
        if (table[i].keeps_all) return &table[i];
    return NULL;
}

int kv_method_register(const kv_method *m, const char *from, char *err, size_t errlen) {
    build();
    char why[300];
    kv_method r;
    if (kv_method_resolve(m, &r, why, sizeof why)) return snprintf(err, errlen, "%s: %s", from, why), -1;
    const kv_method *old = kv_method_find(r.name);
    if (old)
        return snprintf(err, errlen, "%s: method '%s' is already registered (%s)", from, r.name,
                        kv_method_origin(old) ? kv_method_origin(old) : "built in"),
               -1;
    for (const kv_command *c = r.commands; c->name; c++)
        if (kv_command_find(c->name))
            return snprintf(err, errlen, "%s: method '%s': command '%s' is already taken", from, r.name, c->name), -1;
    if (n_table >= MAX_METHODS) return snprintf(err, errlen, "%s: more than %d methods", from, MAX_METHODS), -1;
    char *o = strdup(from ? from : "?");
    if (!o) return snprintf(err, errlen, "%s: out of memory", from), -1;
    table[n_table] = r;
    origin[n_table++] = o;
    return 0;
}

const kv_command *kv_command_find(const char *name) {
    for (int i = 0; name && i < kv_method_count(); i++)
        for (const kv_command *c = table[i].commands; c->name; c++)
            if (!strcmp(c->name, name)) return c;
    return NULL;
}

const char *kv_method_origin(const kv_method *m) {
    for (int i = 0; i < kv_method_count(); i++)
        if (&table[i] == m) return origin[i];
    return NULL;
}

/* ---------------------------------------------------------------- groups */

/* The methods kvpress also has (each a press of kvpress/presses at NVIDIA/kvpress 8bb29b9);
 * h2o is kvpress's ObservedAttentionPress's paper (kvpress's press is prefill-only). */
static const char *const kvpress_names[] = {
    "streamingllm", "h2o", "snapkv", "pyramidkv", "chunkkv", "knormpress", "tova", "keydiff", "lagkv",
    "randompress", "adakv-snapkv",
    "expected-attention", "criticalkv", "criticaladakv", "snapkv-think",
    NULL,
};

static int in_paper(const kv_method *m) {
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_paper *pp = table[i].paper;
        if (!pp->title || !*pp->title) continue;
        if (&table[i] == m) return 1;
        for (const char *const *b = pp->baselines; *b; b++)
            if (!strcasecmp(*b, m->name)) return 1;
    }
    return 0;
}

static int in_kvpress(const kv_method *m) {
    for (const char *const *n = kvpress_names; *n; n++)
        if (!strcasecmp(*n, m->name)) return 1;
    return 0;
}

int kv_method_group(const char *name, const kv_method **out, int cap) {
    int which = !name ? -1 : !strcmp(name, "all") ? 0 : !strcmp(name, "paper") ? 1 : !strcmp(name, "kvpress") ? 2 : -1;
    if (which < 0) return -1;
    int n = 0;
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_method *m = &table[i];
        if (which == 0 || m->keeps_all || (which == 1 ? in_paper(m) : in_kvpress(m))) {
            if (n < cap) out[n] = m;
            n++;
        }
    }
    return n;
}
