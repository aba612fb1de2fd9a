/* kvbench subcommands: each lives in its own file and is dispatched by main.c (a method's
 * own commands come through its table: kv_method.commands). */
#ifndef KV_COMMANDS_H
#define KV_COMMANDS_H
#include "../../plots/plot_cmds.h"   /* cmd_report, cmd_plot */
int cmd_run(int argc, char **argv);       /* harness/drivers/run.c */
int cmd_methods(int argc, char **argv);   /* harness/cli/methods_cmd.c */
int cmd_info(int argc, char **argv);      /* harness/cli/model_cmd.c */
int cmd_generate(int argc, char **argv);  /* harness/cli/model_cmd.c */
int cmd_merge(int argc, char **argv);     /* harness/cli/merge_cmd.c */
int cmd_slurm_script(int argc, char **argv); /* harness/cli/slurm_script.c */
int cmd_conformance(int argc, char **argv); /* harness/cli/conformance_cmd.c */
int cmd_sim(int argc, char **argv);       /* harness/sim/sim.c */
#endif
