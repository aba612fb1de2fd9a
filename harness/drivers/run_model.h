/* kvbench run through the model: text workloads (niah, ruler, longbench, infinitebench,
 * gsm8k) over methods and budgets into the results file. run.c hands over when
 * run_model_wanted() says so. */
#ifndef KV_RUN_MODEL_H
#define KV_RUN_MODEL_H
#include <stdio.h>

/* 1 if argv asks for a model run: --model is given, or --workload names a text workload
 * (anything but synthetic-*), or --help after such a --workload. */
int run_model_wanted(int argc, char **argv);
int cmd_run_model(int argc, char **argv);
/* The model run's own options (not those of run_common_usage), for `kvbench run --help`. */
void run_model_options(FILE *f);

#endif
