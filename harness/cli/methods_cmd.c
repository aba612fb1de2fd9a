/* kvbench methods: the registered KV-cache methods with their parameters and defaults,
 * and SeKV's trainable-parameter count for the model's shape. */
#include "commands.h"
#include "../../methods/method.h"
#include "../../model/model.h"
#include "../../kernels/cli_opt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench methods [--model F] [NAME...]\n"
            "\n"
            "Lists every registered method (or only the named ones) with its summary and its\n"
            "parameters: name, default and meaning. Parameters are given to a method as\n"
            "key=value,key=value overrides of these defaults. For a method with trained\n"
            "state (SeKV) it also counts the trainable parameters for the model's shape and\n"
            "their share of the model.\n"
            "Each method also says what it does under kvbench run --decode append|hold.\n"
            "\n"
            "  --model F   the model for the trainable-parameter count (default %s)\n"
            "  --help      this text\n",
            model_default_path());
}

/* A method's trainable parameters (kv_method.trained_params) for the model's attention
 * shape, and their share of the model's parameters; the model is loaded once, for the
 * first method that has any. */
static kv_model *model;   /* loaded at most once per command */
static char why[600];

static void print_trained(const kv_method *m, const char *model_path) {
    char detail[256];
    kv_setup probe = {.n_layers = 1, .n_heads = 1, .n_kv_heads = 1, .head_dim = 64};
    if (!m->trained_params(&probe, detail, sizeof detail)) return;   /* none for any shape */
    if (!model && !*why && !(model = model_load(model_path, why, sizeof why)) && !*why)
        snprintf(why, sizeof why, "cannot load %s", model_path);
    if (!model) {
        printf("  trainable parameters: depend on the model's shape; no model to count for (%s)\n", why);
        return;
    }
    const kv_model_config *cf = model_config(model);
    kv_setup s = {.n_layers = cf->n_layer, .n_heads = cf->n_head, .n_kv_heads = cf->n_head_kv, .head_dim = cf->head_dim};
    size_t n = m->trained_params(&s, detail, sizeof detail);
    const char *base = strrchr(model_path, '/');
    printf("  trainable parameters: %zu (%.2f%% of the %.1fM of %s)%s%s\n", n, 100.0 * (double)n / (double)cf->n_params,
           cf->n_params / 1e6, base ? base + 1 : model_path, *detail ? ": " : "", detail);
}

/* The declared range of a parameter as " (lo to hi)" (or "" when none). */
static void range_text(const kv_method *m, const char *name, char *buf, size_t n) {
    buf[0] = 0;
    for (const kv_range *r = m->ranges; r && r->name; r++)
        if (!strcmp(r->name, name)) {
            size_t k = r->hi >= 1e9 ? (size_t)snprintf(buf, n, " (>= %g", r->lo)
                                    : (size_t)snprintf(buf, n, " (%g to %g", r->lo, r->hi);
            if (!isnan(r->special) && k < n) k += (size_t)snprintf(buf + k, n - k, ", or %g", r->special);
            if (k < n) snprintf(buf + k, n - k, ")");
        }
}

static void print_method(const kv_method *m) {
    printf("%s\n  %s\n", m->name, m->summary);
    if (kv_method_origin(m)) printf("  plugin: %s\n", kv_method_origin(m));
    printf("  decode: %s\n",
           m->keeps_all ? "keeps every token (the reference; no budget) under both rules"
           : m->evicts_decoding
               ? "evicts while decoding under both --decode rules: that is its paper's policy"
               : "append (default): prompt compressed once, generated tokens added at full resolution, "
                 "never evicted; hold: fast-tier rows kept within the budget by its own rule");
    printf("  prefill: %s\n", m->needs_surprisal
                                  ? "needs the prompt's surprisal, known after the last layer: the model's "
                                    "K/V of every layer is kept for it until the forward pass ends"
                                  : "ingests each layer as the forward pass computes it (layer-streaming)");
    /* door version 4's model members, as a 1024-token prompt of 8 heads of 64 would ask */
    kv_setup s = {.n_layers = 1, .n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .n_prompt = 1024, .budget_frac = 0.1};
    kv_needs nd = {0};
    m->needs(&s, &nd);
    if (nd.queries > 0 || nd.wo)
        printf("  reads from the model:%s%s (CPU prefill and synthetic cases; not the CUDA prefill yet)\n",
               nd.queries > 0 ? " the prompt's pre-RoPE queries and RoPE" : "",
               nd.wo ? (nd.queries > 0 ? " and the layer's output projection Wo" : " the layer's output projection Wo")
                     : "");
    int any = 0;
    for (const kv_param *p = m->params; p && p->name; p++) {
        if (!any) printf("  parameters:\n");
        any = 1;
        char range[64];
        range_text(m, p->name, range, sizeof range);
        printf("    %-14s default %-8s %s%s\n", p->name, p->deflt ? p->deflt : "-", p->help ? p->help : "", range);
    }
    if (!any) printf("  parameters: none\n");
}

int cmd_methods(int argc, char **argv) {
    const char *model_path = model_default_path();
    int names = 0;   /* argv[1..names] are the method names once options are taken out */
    static const char *const bare[] = {"--help", "-h", NULL}, *const valued[] = {"--model", NULL};
    for (int i = 1; i < argc; i++) {
        char flag[64];
        const char *v;
        int r = kb_opt_read("methods", argc, argv, &i, bare, valued, 1, flag, sizeof flag, &v);
        if (r < 0) return 2;
        if (r == 0 && !strcmp(flag, "--model")) model_path = v;
        if (r == 0 && strcmp(flag, "--model")) {
            usage(stdout);
            return 0;
        }
        if (r == 0) continue;
        if (!kv_method_find(argv[i])) {
            fprintf(stderr, "kvbench methods: unknown method '%s' (kvbench methods lists them)\n", argv[i]);
            return 2;
        }
        argv[++names] = argv[i];
    }
    if (kv_method_count() == 0) {
        fprintf(stderr, "kvbench methods: no methods are built into this kvbench\n");
        return 1;
    }
    int first = 1;
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_method *m = kv_method_at(i);
        int wanted = names == 0;
        for (int a = 1; a <= names && !wanted; a++) wanted = kv_method_find(argv[a]) == m;
        if (!wanted) continue;
        if (!first) printf("\n");
        first = 0;
        print_method(m);
        print_trained(m, model_path);
    }
    if (model) model_free(model);
    model = NULL;
    return 0;
}
