/* kvbench sim --measure-inputs: the tables kvbench sim draws its synthetic inputs from,
 * measured on the default model over text of the corpus (~/.cache/kvbench/corpus, which
 * is disjoint from the NIAH haystack), written as C source (harness/sim/sim_stats_table.c):
 *   the surprisal stream and sentence ends of every token of the chunks, in order;
 *   K's and V's singular-value spectrum (share of s^2, rows centred per head), their mean
 *   per-element variance and the rms of the mean row, averaged over layers, kv heads and
 *   chunks. */
#include "sim.h"
#include "../../kernels/cpu.h"
#include "../../kernels/host.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The corpus files listed in MANIFEST.tsv (5th column), in order. */
static int manifest(const char *dir, char names[][256], int cap) {
    char path[1024], line[2048];
    snprintf(path, sizeof path, "%s/MANIFEST.tsv", dir);
    char why[160];
    FILE *f = kb_fopen_regular(path, KB_CAP_DEFAULT, why, sizeof why);   /* read by lines */
    if (!f) return -1;
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char *c = line;
        for (int k = 0; k < 4 && c; k++) c = strchr(c, '\t'), c = c ? c + 1 : NULL;
        if (!c) continue;
        c[strcspn(c, "\r\n")] = 0;
        snprintf(names[n++], 256, "%s", c);
    }
    fclose(f);
    return n;
}

/* s^2 shares of the centred rows X [n][d] (added to spec), mean variance and mean-row rms. */
static int spectrum(const float *X, int n, int d, double *spec, double *var, double *mrms) {
    float *A = malloc((size_t)n * d * sizeof *A), *U = malloc((size_t)n * d * sizeof *U);
    float *S = malloc((size_t)d * sizeof *S), *Vt = malloc((size_t)d * d * sizeof *Vt);
    double *mu = calloc((size_t)d, sizeof *mu);
    int rc = -1;
    if (!A || !U || !S || !Vt || !mu) goto done;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) mu[i] += X[(size_t)t * d + i] / n;
    double tot = 0, m2 = 0;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) {
            double x = X[(size_t)t * d + i] - mu[i];
            A[(size_t)t * d + i] = (float)x;
            tot += x * x;
        }
    for (int i = 0; i < d; i++) m2 += mu[i] * mu[i];
    if (kb_cpu_svd(A, n, d, d, U, S, Vt)) goto done;
    double ss = 0;
    for (int i = 0; i < d; i++) ss += (double)S[i] * S[i];
    for (int i = 0; i < d; i++) spec[i] += ss > 0 ? (double)S[i] * S[i] / ss : 0;
    *var += tot / ((double)n * d);
    *mrms += sqrt(m2 / d);
    rc = 0;
done:
    free(A), free(U), free(S), free(Vt), free(mu);
    return rc;
}

int sim_measure_inputs(const char *model_path, const char *corpus, int chunks, int tokens, FILE *out, char *err,
                       size_t errlen) {
    static char names[512][256];
    int nf = manifest(corpus, names, 512);
    if (nf <= 0) return snprintf(err, errlen, "%s: no MANIFEST.tsv listing the corpus files", corpus), -1;
    kv_model *m = model_load(model_path, err, errlen);
    if (!m) return -1;
    const kv_model_config *cf = model_config(m);
    const int d = cf->head_dim, L = cf->n_layer, Hkv = cf->n_head_kv;
    float *surp = malloc((size_t)chunks * tokens * sizeof *surp);
    uint8_t *send = malloc((size_t)chunks * tokens);
    int32_t *ids = malloc((size_t)tokens * sizeof *ids);
    double *ks = calloc((size_t)d, sizeof *ks), *vs = calloc((size_t)d, sizeof *vs), kv = 0, vv = 0, km = 0, vm = 0;
    char used[4096] = "";
    int got = 0, rc = -1, nspec = 0;
    if (!surp || !send || !ids || !ks || !vs) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (int c = 0, fi = 0; c < chunks && fi < nf; fi++) {
        /* files spread over the manifest (docs, manual pages, sources), one chunk each */
        int pick = (int)((long)fi * 7 % nf);
        char path[1024];
        size_t len;
        snprintf(path, sizeof path, "%s/%s", corpus, names[pick]);
        char *text = kb_read_file(path, &len);
        if (!text) continue;
        int n = tok_encode(model_tokenizer(m), text, len, 0, ids, tokens);
        free(text);
        if (n < tokens) continue;
        kv_needs needs = {0};
        kv_prefill_out pf;
        if (model_prefill(m, ids, tokens, &needs, &pf, err, errlen)) goto done;
        memcpy(surp + (size_t)c * tokens, pf.surprisal, (size_t)tokens * sizeof *surp);
        memcpy(send + (size_t)c * tokens, pf.sent_end, (size_t)tokens);
        for (int l = 0; l < L; l++)
            for (int j = 0; j < Hkv; j++) {
                size_t off = ((size_t)l * Hkv + j) * tokens * d;
                if (spectrum(pf.K + off, tokens, d, ks, &kv, &km) || spectrum(pf.V + off, tokens, d, vs, &vv, &vm)) {
                    prefill_out_free(&pf);
                    snprintf(err, errlen, "SVD failed");
                    goto done;
                }
                nspec++;
            }
        prefill_out_free(&pf);
        snprintf(used + strlen(used), sizeof used - strlen(used), "%s%s", c ? ", " : "", names[pick]);
        got += tokens;
        c++;
        fprintf(stderr, "kvbench sim: measured chunk %d/%d (%s)\n", c, chunks, names[pick]);
    }
    if (!got || !nspec) {
        snprintf(err, errlen, "%s: no file of %d tokens or more", corpus, tokens);
        goto done;
    }
    fprintf(out, "/* Generated by `./kvbench sim --measure-inputs --chunks %d --tokens %d > harness/sim/sim_stats_table.c`\n"
                 " * (model %s, corpus %s): do not edit. The default model's surprisal and sentence\n"
                 " * ends over %d tokens of corpus text (%d chunks, in order), and its keys' and values'\n"
                 " * spectra over its %d (layer, kv head) blocks in every chunk. Chunks: %s. */\n",
            chunks, tokens, cf->name, "~/.cache/kvbench/corpus", got, got / tokens, nspec / (got / tokens), used);
    fprintf(out, "#include \"sim.h\"\n\nstatic const float surprisal[%d] = {", got);
    for (int i = 0; i < got; i++) fprintf(out, "%s%.3f", i % 12 ? "," : i ? ",\n    " : "\n    ", surp[i]);
    fprintf(out, "};\nstatic const uint8_t sent_end[%d] = {", got);
    for (int i = 0; i < got; i++) fprintf(out, "%s%d", i % 40 ? "," : i ? ",\n    " : "\n    ", send[i]);
    fprintf(out, "};\nstatic const float k_spec[%d] = {", d);
    for (int i = 0; i < d; i++) fprintf(out, "%s%.6g", i ? "," : "", ks[i] / nspec);
    fprintf(out, "};\nstatic const float v_spec[%d] = {", d);
    for (int i = 0; i < d; i++) fprintf(out, "%s%.6g", i ? "," : "", vs[i] / nspec);
    fprintf(out, "};\n\nconst sim_stats *sim_stats_default(void) {\n"
                 "    static const sim_stats s = {\"%s on %d tokens of ~/.cache/kvbench/corpus (kvbench sim "
                 "--measure-inputs)\", %d, surprisal, sent_end, %d, k_spec, v_spec, %.6gf, %.6gf, %.6gf, %.6gf};\n"
                 "    return &s;\n}\n",
            cf->name, got, got, d, kv / nspec, vv / nspec, km / nspec, vm / nspec);
    rc = 0;
done:
    free(surp), free(send), free(ids), free(ks), free(vs);
    model_free(m);
    return rc;
}
