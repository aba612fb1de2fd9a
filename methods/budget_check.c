#include "budget_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long kv_row_limit(const kv_method *m, const kv_setup *s, int decoded) {
    long B = kv_budget(s);
    if (m->keeps_all) return (long)s->n_prompt + decoded;
    if (m->evicts_decoding || s->decode_rule == KV_DECODE_HOLD) return B;
    return B + decoded;
}

int kv_runs_uncapped(const kv_method *m, const kv_setup *s) {
    const char *set = m->paper ? m->paper->uncapped : NULL, *eq = set ? strchr(set, '=') : NULL;
    if (!eq || eq == set || (size_t)(eq - set) >= 64) return 0;
    char key[64], val[128], why[256];
    memcpy(key, set, (size_t)(eq - set));
    key[eq - set] = 0;
    if (kv_param_text(m, s->params, key, val, sizeof val, why, sizeof why)) return 0;
    char *e1, *e2;
    double a = strtod(val, &e1), b = strtod(eq + 1, &e2);
    return *val && !*e1 && eq[1] && !*e2 ? a == b : !strcmp(val, eq + 1);
}

size_t kv_rows_bytes(const kv_method *m, const kv_state *st, const kv_setup *s, int layer, int kv_head, long rows,
                     const int32_t *pos, int npos) {
    const size_t d = (size_t)s->head_dim, elem = (size_t)kb_kvtype_bytes(s->kv_type);
    int kc = m->key_channels(st, layer, kv_head, NULL);
    long prompt = 0;
    for (int i = 0; kc >= 0 && (size_t)kc < d && i < npos; i++) prompt += pos[i] < s->n_prompt;
    if (prompt > rows) prompt = rows;   /* positions of slow-tier rows too */
    return ((size_t)prompt * ((size_t)kc + d) + (size_t)(rows - prompt) * 2 * d) * elem;
}

int kv_budget_check(const kv_method *m, const kv_state *st, const kv_setup *s, int decoded, char *err,
                    size_t errlen) {
    const int L = s->n_layers, Hkv = s->n_kv_heads;
    const long limit = kv_row_limit(m, s, decoded), B = kv_budget(s);
    const int uncapped = kv_runs_uncapped(m, s);
    const long end = (long)s->n_prompt + decoded;   /* positions are in [0, end) */
    const int cap = end > 0 && end < INT32_MAX ? (int)end : 1;
    const char *rule = m->keeps_all ? "keeps all" : m->evicts_decoding ? "evicts while decoding"
                                                                        : kv_decode_name(s->decode_rule);
    int32_t *pos = malloc((size_t)cap * sizeof *pos), *chan = calloc((size_t)s->head_dim + 1, sizeof *chan);
    if (!pos || !chan) return free(pos), free(chan), snprintf(err, errlen, "out of memory checking the rows held"), -1;
    int rc = -1;
    long total = 0;
    size_t need = 0;   /* the rows' K/V bytes */
    for (int j = 0; j < Hkv; j++) {
        long sum = 0;
        for (int l = 0; l < L; l++) {
            int npos = -1;
            int r = m->rows(st, l, j, pos, cap, &npos);
            if (r < 0) {
                snprintf(err, errlen, "layer %d kv head %d: rows() returned %d", l, j, r);
                goto done;
            }
            if (!uncapped && !m->layer_budgets && !m->head_budgets && r > limit) {
                snprintf(err, errlen, "layer %d kv head %d: %d fast-tier rows, limit %ld (B %ld, %s, %d decoded)", l, j,
                         r, limit, B, rule, decoded);
                goto done;
            }
            if (npos < 0 || npos > cap) {
                snprintf(err, errlen, "layer %d kv head %d: rows() reported %d positions into a buffer of %d", l, j,
                         npos, cap);
                goto done;
            }
            for (int i = 0; i < npos; i++) {
                if (pos[i] < 0 || pos[i] >= end) {
                    snprintf(err, errlen, "layer %d kv head %d: position %ld held, outside the %ld tokens so far", l, j,
                             (long)pos[i], end);
                    goto done;
                }
                if (i && pos[i] <= pos[i - 1]) {
                    snprintf(err, errlen, "layer %d kv head %d: position %ld %s", l, j, (long)pos[i],
                             pos[i] == pos[i - 1] ? "held twice" : "out of order (positions ascend)");
                    goto done;
                }
            }
            int kc = m->key_channels(st, l, j, chan);
            for (int i = 0; kc >= 0 && i < kc && i <= s->head_dim; i++)
                if (chan[i] < 0 || chan[i] >= s->head_dim || (i && chan[i] <= chan[i - 1])) kc = -2;
            if (kc < -1 || kc > s->head_dim) {
                snprintf(err, errlen, "layer %d kv head %d: key_channels() gave %d channels or a bad index (head_dim %d; "
                         "indices ascend in [0, %d))", l, j, kc, s->head_dim, s->head_dim);
                goto done;
            }
            need += kv_rows_bytes(m, st, s, l, j, r, pos, npos);
            sum += r;
        }
        if (!uncapped && m->layer_budgets && sum > (long)L * limit) {
            snprintf(err, errlen, "kv head %d: %ld fast-tier rows over %d layers, limit %ld (B %ld per layer, %s)", j,
                     sum, L, (long)L * limit, B, rule);
            goto done;
        }
        total += sum;
    }
    /* head-adaptive methods (head_budgets): the budget is each layer's sum over kv heads */
    for (int l = 0; l < L && !uncapped && m->head_budgets; l++) {
        long sum = 0;
        for (int j = 0; j < Hkv; j++) sum += m->rows(st, l, j, NULL, 0, NULL);
        if (sum > (long)Hkv * limit) {
            snprintf(err, errlen, "layer %d: %ld fast-tier rows over %d kv heads, limit %ld (B %ld per head, %s)", l, sum,
                     Hkv, (long)Hkv * limit, B, rule);
            goto done;
        }
    }
    kv_mem mem;
    memset(&mem, 0, sizeof mem);
    m->memory(st, &mem);
    if (mem.fast_tokens != total) {
        snprintf(err, errlen, "memory() says %ld fast-tier rows, rows() %ld", mem.fast_tokens, total);
        goto done;
    }
    if (mem.fast_aux_bytes > mem.fast_bytes || mem.fast_bytes - mem.fast_aux_bytes < need) {
        snprintf(err, errlen, "memory() says %zu fast-tier bytes (%zu auxiliary) for %ld rows of %zu K/V bytes", mem.fast_bytes,
                 mem.fast_aux_bytes, total, need);
        goto done;
    }
    if (mem.fast_peak < mem.fast_bytes || mem.slow_peak < mem.slow_bytes) {
        snprintf(err, errlen, "memory() peaks below what is resident (fast %zu of %zu, slow %zu of %zu)", mem.fast_peak,
                 mem.fast_bytes, mem.slow_peak, mem.slow_bytes);
        goto done;
    }
    rc = 0;
done:
    free(pos), free(chan);
    return rc;
}
