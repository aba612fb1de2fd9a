/* The two commands plots/ offers (dispatched by harness/cli/main.c): declared here, in
 * the layer that defines them, so plots/ never includes the harness above it. */
#ifndef KV_PLOT_CMDS_H
#define KV_PLOT_CMDS_H
int cmd_report(int argc, char **argv);    /* plots/report.c */
int cmd_plot(int argc, char **argv);      /* plots/plot.c */
#endif
