/* kvbench methods: the registered KV-cache methods with their parameters and defaults. */
#include "commands.h"
#include "../methods/method.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench methods [NAME...]\n"
            "\n"
            "Lists every registered method (or only the named ones) with its summary and its\n"
            "parameters: name, default and meaning. Parameters are given to a method as\n"
            "key=value,key=value overrides of these defaults.\n"
            "\n"
            "  --help   this text\n");
}

static void print_method(const kv_method *m) {
    printf("%s\n  %s\n", m->name, m->summary ? m->summary : "");
    int any = 0;
    for (const kv_param *p = m->params; p && p->name; p++) {
        if (!any) printf("  parameters:\n");
        any = 1;
        printf("    %-14s default %-8s %s\n", p->name, p->deflt ? p->deflt : "-", p->help ? p->help : "");
    }
    if (!any) printf("  parameters: none\n");
}

int cmd_methods(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "kvbench methods: unknown option '%s' (see kvbench methods --help)\n", argv[i]);
            return 2;
        }
        if (!kv_method_find(argv[i])) {
            fprintf(stderr, "kvbench methods: unknown method '%s' (kvbench methods lists them)\n", argv[i]);
            return 2;
        }
    }
    if (kv_method_count() == 0) {
        fprintf(stderr, "kvbench methods: no methods are built into this kvbench\n");
        return 1;
    }
    int first = 1;
    for (int i = 0; i < kv_method_count(); i++) {
        const kv_method *m = kv_method_at(i);
        int wanted = argc < 2;
        for (int a = 1; a < argc && !wanted; a++) wanted = kv_method_find(argv[a]) == m;
        if (!wanted) continue;
        if (!first) printf("\n");
        first = 0;
        print_method(m);
    }
    return 0;
}
