/* kvbench: one binary, one subcommand per job: the harness's commands below, then those the
 * registered methods bring (kv_method.commands: SeKV's trainer and probe, a plugin's). */
#include <stdio.h>
#include <string.h>
#include "commands.h"
#include "../identity/plugin.h"
#include "../../methods/method.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cmd_run, "replay a workload over methods and budgets into a SQLite file"},
    {"report", cmd_report, "print a results table (Markdown, or CSV with --csv)"},
    {"plot", cmd_plot, "draw figures from a results file with gnuplot"},
    {"methods", cmd_methods, "list the methods with their parameters and defaults"},
    {"info", cmd_info, "describe a model (GGUF file or Hugging Face directory)"},
    {"generate", cmd_generate, "answer a prompt with a model, optionally through a method"},
    {"merge", cmd_merge, "join the results files of a sharded run (run --shard K/N) into one"},
    {"slurm-script", cmd_slurm_script, "write a SLURM array script that runs a kvbench run in N shards, then merges"},
    {"sim", cmd_sim, "memory by tier and decode latency at any context, by the methods' own code, no weights loaded"},
    {"conformance", cmd_conformance, "check a method (a plugin's too) against the method interface's rules"},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
    fprintf(out, "usage: kvbench [--plugin FILE.so]... COMMAND [options]   (kvbench COMMAND --help for its options)\n\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].help);
    for (int i = 0; i < kv_method_count(); i++)
        for (const kv_command *c = kv_method_at(i)->commands; c->name; c++)
            fprintf(out, "  %-12s %s (%s)\n", c->name, c->help, kv_method_at(i)->name);
}

int main(int argc, char **argv) {
    char err[1024];
    if (kv_plugins_load(&argc, argv, err, sizeof err)) {   /* --plugin FILE on every command */
        fprintf(stderr, "kvbench: %s\n", err);
        return 2;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    const kv_command *mc = kv_command_find(argv[1]);
    if (mc) return mc->fn(argc - 1, argv + 1);
    fprintf(stderr, "kvbench: unknown command '%s' (commands:", argv[1]);   /* one line */
    for (int i = 0; i < N_COMMANDS; i++) fprintf(stderr, " %s%s", commands[i].name, i + 1 < N_COMMANDS ? "," : "");
    for (int i = 0; i < kv_method_count(); i++)
        for (const kv_command *c = kv_method_at(i)->commands; c->name; c++) fprintf(stderr, ", %s", c->name);
    fprintf(stderr, ")\n");
    return 2;
}
