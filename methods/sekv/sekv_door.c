/* SeKV's answers to the door's optional questions (method.h), shared by every SeKV table
 * through SEKV_DOOR_HOOKS (sekv_state.h): the slow-tier traffic, the event log (zoom-ins),
 * the parameters the automatic fit chose, a description and the trainable-parameter count;
 * and, on kv_sekv's table only, the trained-parameters file and SeKV's commands.
 * The harness asks these through kv_method, never by SeKV's name. */
#include "sekv_state.h"
#include "sekv_params.h"

#include <stdio.h>
#include <string.h>

/* Rows rebuilt from slow-tier span factors at the last step (an upper bound on what the
 * factors' upload moves). */
double sekv_door_slow_rows(const kv_state *st, int layer) {
    double rows = 0;
    for (int j = 0; j < st->Hkv; j++) {
        int recon;
        sekv_resident(st, layer, j, NULL, &recon);
        rows += recon;
    }
    return rows;
}

size_t sekv_door_events(const kv_state *st, kv_event *out, size_t cap) {
    const sekv_zoom_event *ev = NULL;
    size_t n = sekv_zoom_log(st, &ev);
    for (size_t i = 0; out && i < n && i < cap; i++)
        out[i] = (kv_event){ev[i].step, ev[i].layer, ev[i].head, ev[i].expanded, ev[i].spans};
    return n;
}

/* Routing W, thresholds tau and the rank gate at the default rank cap 32. */
size_t sekv_door_trained(const kv_setup *s, char *detail, size_t len) {
    sekv_params p = {.n_layers = s->n_layers, .n_heads = s->n_heads, .head_dim = s->head_dim, .rank_cap = 32,
                     .dp = SEKV_DPRIME, .hidden = SEKV_HIDDEN};
    size_t n = sekv_params_count(&p), w = (size_t)s->n_layers * s->n_heads * SEKV_DPRIME * s->head_dim,
           tau = (size_t)s->n_layers * s->n_heads;
    snprintf(detail, len, "routing W %zu, tau %zu, rank gate %zu", w, tau, n - w - tau);
    return n;
}

void sekv_needs(const kv_setup *s, kv_needs *out) {
    (void)s;
    out->col_mass = 0;
    out->window = 0;
}

/* kv_sekv's file for this setup, as init finds it (its checks included). Only kv_sekv's
 * table answers: the run keys of sekv-ref and sekv-spread have never held their file. */
/* The parameter file a SeKV row would load with these params (for the run identity):
 * every row that can load one says which, so its sha256 is part of the run key. */
static int trained_file_of(const kv_method *m, const kv_setup *s, char *path, size_t len) {
    char why[512];
    kv_state *st = sekv_init_as(m, s, why, sizeof why);
    /* no parameters for this model (a refusal for the run's sekv rows) is no file here:
     * every run on such a model, whatever its methods, keeps the key it had */
    snprintf(path, len, "%s", st ? sekv_params_path(st) : strstr(why, SEKV_NO_PARAMS) ? "" : "?");
    sekv_free(st);
    return 1;
}
int sekv_door_trained_file(const kv_setup *s, char *path, size_t len) { return trained_file_of(&kv_sekv, s, path, len); }
int sekv_ref_trained_file(const kv_setup *s, char *path, size_t len) { return trained_file_of(&kv_sekv_ref, s, path, len); }
int sekv_spread_trained_file(const kv_setup *s, char *path, size_t len) {
    return trained_file_of(&kv_sekv_spread, s, path, len);
}

const kv_command sekv_commands[] = {
    {"train-sekv", "train SeKV's zoom-in (routing, thresholds, rank gate) on a corpus", cmd_train_sekv},
    {"sekv-probe", "SeKV's zoom-in on NIAH dev cases: answer NLL, zoom precision and recall", sekv_probe_main},
    {NULL, NULL, NULL},
};
