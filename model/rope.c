/* RoPE frequencies, computed once at load from the model's kv_model_config.rope, and the
 * cos/sin rows every path (CPU prefill and decode, the CUDA backend's tables) is fed from.
 * The scalings follow transformers' modeling_rope_utils.py (linear, llama3, yarn) and,
 * for the per-pair divisors of a GGUF's rope_freqs tensor, llama.cpp's ggml rope: all
 * in double, as tests/model_ref.py does in float64. */
#include "engine.h"
#include <math.h>
#include <stdio.h>

/* transformers' get_mscale (the YaRN paper's attention temperature): 1 for factor <= 1. */
double rope_yarn_mscale(double factor) { return factor <= 1 ? 1.0 : 0.1 * log(factor) + 1.0; }

/* transformers' find_correction_dim: the pair index whose wavelength fits n_rot rotations
 * into the original context. */
static double yarn_corr_dim(double rotations, int dim, double base, int orig_ctx) {
    return dim * log(orig_ctx / (rotations * 2 * M_PI)) / (2 * log(base));
}

int rope_setup(kv_model *m, char *err, size_t errlen) {
    const kv_model_config *c = &m->cfg;
    const kv_rope_scaling *r = &c->rope;
    int half = m->n_rot / 2;
    double base = c->rope_base;
    if (half < 1 || half > KV_MAX_ROPE_PAIRS) {
        snprintf(err, errlen, "rope dimension count %d is outside [2, %d]", m->n_rot, 2 * KV_MAX_ROPE_PAIRS);
        return -1;
    }
    if (r->type != KV_ROPE_NONE && !(r->factor > 0 && r->factor < 1e6)) {
        snprintf(err, errlen, "rope scaling factor %g is not in (0, 1e6)", r->factor);
        return -1;
    }
    if (r->freq_factors && r->n_freq_factors != half) {
        snprintf(err, errlen, "rope_freqs has %d entries but the rope has %d dimension pairs", r->n_freq_factors, half);
        return -1;
    }
    if ((r->type == KV_ROPE_LLAMA3 || r->type == KV_ROPE_YARN) && r->orig_ctx < 1) {
        snprintf(err, errlen, "rope scaling needs the original context length (got %d)", r->orig_ctx);
        return -1;
    }
    if (r->type == KV_ROPE_LLAMA3 && !r->freq_factors &&
        !(r->low_freq_factor > 0 && r->high_freq_factor > r->low_freq_factor)) {
        snprintf(err, errlen, "llama3 rope scaling needs 0 < low_freq_factor (%g) < high_freq_factor (%g)",
                 r->low_freq_factor, r->high_freq_factor);
        return -1;
    }
    /* the default frequencies (transformers' _compute_default_rope_parameters), each
     * divided by its rope_freqs entry where the file has one (llama.cpp: theta / ff[i]) */
    for (int i = 0; i < half; i++) {
        double f = pow(base, -2.0 * i / m->n_rot);
        if (r->freq_factors) {
            if (!(r->freq_factors[i] > 0) || r->freq_factors[i] > 1e30f) {
                snprintf(err, errlen, "rope_freqs[%d] = %g is not positive", i, r->freq_factors[i]);
                return -1;
            }
            f /= r->freq_factors[i];
        }
        m->rope_inv_freq[i] = f;
    }
    m->rope_mscale = 1.0;
    if (r->type == KV_ROPE_LINEAR) {
        /* _compute_linear_scaling_rope_parameters: inv_freq / factor */
        for (int i = 0; i < half; i++) m->rope_inv_freq[i] /= r->factor;
    } else if (r->type == KV_ROPE_LLAMA3 && !r->freq_factors) {
        /* _compute_llama3_parameters: wavelengths longer than orig/low are interpolated by
         * factor, shorter than orig/high kept, and the band between is a smooth mix */
        double low_wl = r->orig_ctx / r->low_freq_factor, high_wl = r->orig_ctx / r->high_freq_factor;
        for (int i = 0; i < half; i++) {
            double f = m->rope_inv_freq[i], wl = 2 * M_PI / f;
            if (wl > low_wl) f /= r->factor;
            else if (!(wl < high_wl)) {
                double s = (r->orig_ctx / wl - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
                f = (1 - s) * f / r->factor + s * f;
            }
            m->rope_inv_freq[i] = f;
        }
    } else if (r->type == KV_ROPE_YARN) {
        /* _compute_yarn_parameters: find_correction_range, linear_ramp_factor and the mix of
         * inv_freq_interpolation (/ factor) and inv_freq_extrapolation (unchanged) */
        double bf = r->beta_fast > 0 ? r->beta_fast : 32, bs = r->beta_slow > 0 ? r->beta_slow : 1;
        double lo = floor(yarn_corr_dim(bf, m->n_rot, base, r->orig_ctx));
        double hi = ceil(yarn_corr_dim(bs, m->n_rot, base, r->orig_ctx));
        if (lo < 0) lo = 0;
        if (hi > m->n_rot - 1) hi = m->n_rot - 1;
        if (lo == hi) hi += 0.001;   /* linear_ramp_factor's guard against a zero width */
        for (int i = 0; i < half; i++) {
            double ramp = (i - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double extrap = 1 - ramp, f = m->rope_inv_freq[i];
            m->rope_inv_freq[i] = f / r->factor * (1 - extrap) + f * extrap;
        }
        m->rope_mscale = r->attn_factor > 0 ? r->attn_factor : rope_yarn_mscale(r->factor);
    }
    /* KV_ROPE_LLAMA3 with freq_factors: the tensor already holds the llama3 divisors */
    return 0;
}

void rope_cossin(const kv_model *m, int pos, float *cs) {
    for (int i = 0; i < m->n_rot / 2; i++) {
        double theta = pos * m->rope_inv_freq[i];
        cs[2 * i] = (float)(cos(theta) * m->rope_mscale);
        cs[2 * i + 1] = (float)(sin(theta) * m->rope_mscale);
    }
}

const char *rope_type_name(kv_rope_type t) {
    switch (t) {
    case KV_ROPE_LINEAR: return "linear";
    case KV_ROPE_LLAMA3: return "llama3";
    case KV_ROPE_YARN: return "yarn";
    default: return "none";
    }
}
