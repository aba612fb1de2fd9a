/* kvbench train-sekv: trains SeKV's zoom-in (routing W, thresholds tau, rank gate) on a
 * document corpus with the base model frozen, and writes the parameter file the sekv
 * method loads (params_file=...). */
#ifndef KV_TRAIN_SEKV_H
#define KV_TRAIN_SEKV_H
int cmd_train_sekv(int argc, char **argv);   /* train_sekv.c */
#endif
