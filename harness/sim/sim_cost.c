/* What kvbench sim adds to the methods' own bytes: weights, activations, prefill
 * statistics; the CPU engine's memory model (for checking a run's measured peak RSS);
 * bandwidths and the per-token latency model. Every term is named where it is computed. */
#include "sim.h"
#include "../../kernels/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_other_bytes(const sim_shape *s, int ctx, double weight_bytes, int act_bytes, int chunk,
                     const kv_needs *needs, sim_other *o) {
    const kv_model_config *c = &s->cfg;
    double E = c->n_embd, F = c->n_ff, V = c->n_vocab, H = c->n_head;
    double qd = H * c->head_dim, kvd = (double)c->n_head_kv * c->head_dim;
    double C = chunk < ctx ? chunk : ctx;
    o->weights = weight_bytes > 0 ? weight_bytes * s->n_params : s->file_weight_bytes;
    /* one decode step: residual, two norms' outputs, q, k, v, the MLP's gate and up, the
     * logits in f32, and one query head's attention row over the context at a time per
     * head (f32) */
    o->act_decode = act_bytes * (3 * E + qd + 2 * kvd + 2 * F) + 4 * V + 4 * H * (double)ctx;
    /* the chunked prefill: the same per token for C tokens at once, a fused (flash)
     * attention that never holds a score matrix, logits of the last token only */
    o->act_prefill = act_bytes * C * (3 * E + qd + 2 * kvd + 2 * F) + 4 * V;
    o->stats = 0;
    if (needs && needs->col_mass) o->stats += 4 * H * ctx;
    if (needs && needs->window > 0) o->stats += 4 * H * (double)(needs->window < ctx ? needs->window : ctx) * ctx;
}

/* The engine as of model/prefill.c, model/ops.c and harness/drivers/model_source.c (issue 16's
 * streaming prefill): the GGUF file is mapped and every page read (a random model's
 * weights are held once, in their type); the prefill's GEMMs dequantize one tile of at
 * most 512 rows at a time (no f32 copy of the weights); its work buffer holds the residual
 * stream of all n tokens plus one chunk's projections and MLP, or a block of 256 tokens'
 * logits, and is freed when the prefill ends.
 *  - kept whole (fidelity metrics, --repeat): every layer's f32 K/V and statistics stay
 *    until the case ends; each method ingests them in turn and is freed after its result.
 *  - streamed: each layer is handed to every method as it is computed and freed (all
 *    layers are held when a method needs the surprisal); every method's store is built
 *    during the prefill and stays until the case ends, so each result's peak holds them all. */
#define ENGINE_RUNTIME_BYTES (24.0 * 1048576)
void sim_engine_memory(const kv_model_config *c, double weight_bytes, int n, const kv_needs *needs,
                       double method_bytes, int streamed, double methods_all, double late, int any_late,
                       sim_engine_mem *o) {
    double E = c->n_embd, F = c->n_ff, V = c->n_vocab, L = c->n_layer, H = c->n_head, d = c->head_dim;
    double qd = H * d, kvd = (double)c->n_head_kv * d, C = n < 512 ? n : 512, CL = n < 256 ? n : 256;
    double mats = L * (2 * E * qd + 2 * E * kvd + 3 * E * F) + V * E;   /* the 7 per layer + output */
    memset(o, 0, sizeof *o);
    o->runtime = ENGINE_RUNTIME_BYTES;
    (void)mats;
    o->weights_mapped = weight_bytes;
    o->tiles = 4.0 * 512 * (E > F ? E : F);   /* one tile: at most 512 rows of the widest input */
    double layers_kv = streamed && !any_late ? 1 : L, layers_st = streamed ? 1 : L;
    o->kv_held = 2 * layers_kv * kvd * n * 4;
    if (needs && needs->col_mass) o->stats += 4 * layers_st * H * n;
    if (needs && needs->window > 0) o->stats += 4 * layers_st * H * (needs->window < n ? needs->window : n) * (double)n;
    double gw = F > qd ? F : qd, layers_fl = n * E + C * (E + qd + 2 * kvd + gw + F), logits_fl = n * E + CL * (E + V);
    o->act_prefill = 4 * ((layers_fl > logits_fl ? layers_fl : logits_fl) + (double)n * d);
    o->method = method_bytes;
    double base = o->runtime + o->weights_mapped;
    if (!streamed) {
        o->peak_prefill = base + o->kv_held + o->stats + o->tiles + o->act_prefill;
        o->peak_method = base + o->kv_held + o->stats + o->method;
        return;
    }
    /* during the layers: the early methods' stores grow beside one layer (or all, held for
     * the late ones) and the work buffer; after them the late methods ingest the held layers */
    o->methods_all = methods_all;
    double during = o->kv_held + o->stats + o->tiles + o->act_prefill + (methods_all - late);
    double after = o->kv_held + methods_all;
    o->peak_prefill = base + (during > after ? during : after);
    o->peak_method = base + methods_all;
}

/* The H200 SXM's data-sheet figures (NVIDIA): HBM3e 4.8 TB/s; PCIe Gen5 x16 64 GB/s per
 * direction. Published, not measured here. */
#define H200_HBM_BPS 4.8e12
#define PCIE5_X16_BPS 64e9

void sim_bw_get(double bw_host_flag, double bw_device_flag, double bw_pcie_flag, sim_bw *bw) {
    memset(bw, 0, sizeof *bw);
    bw->device = H200_HBM_BPS, bw->pcie = PCIE5_X16_BPS;
    snprintf(bw->device_src, sizeof bw->device_src, "H200 HBM3e 4.8 TB/s (published, not measured)");
    snprintf(bw->pcie_src, sizeof bw->pcie_src, "Gen5 x16 64 GB/s per direction (published, not measured)");
    if (bw_device_flag > 0) {
        bw->device = bw_device_flag * 1e9;
        snprintf(bw->device_src, sizeof bw->device_src, "--bw-device %.4g GB/s", bw_device_flag);
    }
    if (bw_pcie_flag > 0) {
        bw->pcie = bw_pcie_flag * 1e9;
        snprintf(bw->pcie_src, sizeof bw->pcie_src, "--bw-pcie %.4g GB/s", bw_pcie_flag);
    }
    if (bw_host_flag > 0) {
        bw->host = bw_host_flag * 1e9;
        snprintf(bw->host_src, sizeof bw->host_src, "--bw-host %.3g GB/s", bw_host_flag);
        return;
    }
    char path[512];
    kb_cache_path("membw.tsv", path, sizeof path);
    char why[160];
    FILE *f = kb_fopen_regular(path, KB_CAP_DEFAULT, why, sizeof why);   /* read by lines */
    if (!f) {
        snprintf(bw->host_src, sizeof bw->host_src, "unknown (run make bench, or give --bw-host)");
        return;
    }
    char line[256], what[64];
    double gbs, best = 0;
    int threads;
    /* lines "read THREADS GBps" / "copy THREADS GBps"; the sim uses the best read figure */
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63s %d %lf", what, &threads, &gbs) == 3 && !strcmp(what, "read") && gbs > best) best = gbs;
    fclose(f);
    if (best > 0) {
        bw->host = best * 1e9;
        snprintf(bw->host_src, sizeof bw->host_src, "%.3g GB/s read, measured by make bench (%s)", best, path);
    } else {
        snprintf(bw->host_src, sizeof bw->host_src, "unknown (%s holds no read figure)", path);
    }
}

double sim_latency_ms(const sim_bw *bw, int gpu, double weights, double kv_read, double slow_read) {
    double fast = gpu ? bw->device : bw->host;
    if (!(fast > 0)) return -1;
    double s = (weights + kv_read) / fast;
    if (gpu) s += slow_read / bw->pcie;   /* the slow tier is the host: its bytes cross PCIe */
    else s += slow_read / fast;           /* on the CPU both tiers are host memory */
    return s * 1e3;
}
