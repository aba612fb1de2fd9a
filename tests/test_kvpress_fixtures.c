/* kvbench's methods keep the same prompt rows as pinned kvpress on the same inputs:
 * the files in tests/fixtures/kvpress hold random keys, values and attention rows and the rows
 * kvpress 0.5.5 keeps per kv head (written by tools/kvpress_fixtures.py, `make
 * kvpress-fixtures`); each is replayed through the kvbench method with the same parameters
 * and budget, and the kept set of every kv head must match: Jaccard 1.0. The presses that read
 * the model (ExpectedAttention, CriticalKV: door version 4) also get the file's pre-RoPE
 * queries, its RoPE and its Wo, handed over as a driver would (kv_needs.queries, wo). ThinK's files
 * (snapkv-think: kvpress's SnapKV then ThinK) also list the key channels kvpress zeroed per kv head
 * after the kept lines: the channels kvbench prunes (all but kv_method.key_channels, door version
 * 5) must be the same set, Jaccard 1.0. Run from the
 * repository root (tests/run.sh does). Fixed files: the same work for every seed. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../methods/method.h"
#include "check.h"

#define DIR_ "tests/fixtures/kvpress"

static int read_floats(FILE *f, const char *tag, float *x, size_t n) {
    char w[16];
    if (fscanf(f, "%15s", w) != 1 || strcmp(w, tag)) return -1;
    for (size_t i = 0; i < n; i++)
        if (fscanf(f, "%f", &x[i]) != 1) return -1;
    return 0;
}

/* The optional "zeroed J COUNT idx..." lines (one per kv head): the key channels kvpress
 * zeroed, against those m prunes (every channel key_channels does not list). */
static void zeroed_channels(FILE *f, const char *path, const kv_method *m, const kv_state *st, int Hkv, int d) {
    int32_t keep[1024];
    for (int j = 0; j < Hkv; j++) {
        int jj, cnt, want[1024], pruned[1024] = {0};
        if (fscanf(f, " zeroed %d %d", &jj, &cnt) != 2) {
            CHECK(j == 0, "%s: %d zeroed lines, %d kv heads", path, j, Hkv);
            return;
        }
        CHECK(jj == j && cnt >= 0 && cnt <= d, "%s: bad zeroed line for kv head %d", path, j);
        for (int i = 0; i < cnt && i < d; i++)
            if (fscanf(f, "%d", &want[i]) != 1 || want[i] < 0 || want[i] >= d) cnt = i;
        int kc = m->key_channels(st, 0, j, keep), np = d, inter = 0;
        for (int i = 0; i < kc && i < d; i++)
            if (keep[i] >= 0 && keep[i] < d && !pruned[keep[i]]) pruned[keep[i]] = 1, np--;
        for (int c = 0; c < d; c++) pruned[c] = !pruned[c];   /* 1: pruned */
        if (kc < 0) np = 0, memset(pruned, 0, sizeof pruned);
        for (int i = 0; i < cnt; i++) inter += pruned[want[i]];
        double jac = np + cnt - inter ? (double)inter / (np + cnt - inter) : 1;
        CHECK(jac == 1.0, "%s: kv head %d: key channels pruned, Jaccard %.4f (kvbench %d, kvpress %d, %d shared)", path,
              j, jac, np, cnt, inter);
    }
}

static void one(const char *path) {
    FILE *f = fopen(path, "r");
    CHECK(f, "%s: cannot open", path);
    if (!f) return;
    char name[64], params[256];
    int n, H, Hkv, d, B, win;
    if (fscanf(f, "method %63s params %255s n %d H %d Hkv %d d %d B %d win %d", name, params, &n, &H, &Hkv, &d, &B,
               &win) != 8 || n < 1 || n > 100000 || H < 1 || Hkv < 1 || H % Hkv || d < 1 || d > 1024 || win < 1 ||
        win > n) {
        CHECK(0, "%s: bad header", path);
        fclose(f);
        return;
    }
    size_t N = (size_t)Hkv * n * d;
    float *K = malloc(N * sizeof *K), *V = malloc(N * sizeof *V), *P = malloc((size_t)H * win * n * sizeof *P);
    int *want = malloc((size_t)n * sizeof *want);
    int32_t *got = malloc((size_t)n * 2 * sizeof *got);
    int ok = read_floats(f, "K", K, N) == 0 && read_floats(f, "V", V, N) == 0 &&
             read_floats(f, "P", P, (size_t)H * win * n) == 0;
    CHECK(ok, "%s: short or bad K/V/P", path);
    /* the optional model sections, up to the first kept line (its word consumed here) */
    float *Q = NULL, *Wo = NULL;
    double theta = 0, inv_freq[512];
    int E = 0;
    char w[16] = "";
    while (ok && fscanf(f, "%15s", w) == 1 && strcmp(w, "kept")) {
        if (!strcmp(w, "Q") && !Q) {
            Q = malloc((size_t)H * n * d * sizeof *Q);
            for (size_t i = 0; i < (size_t)H * n * d && ok; i++) ok = fscanf(f, "%f", &Q[i]) == 1;
        } else if (!strcmp(w, "rope")) {
            ok = fscanf(f, "%lf", &theta) == 1 && theta > 1 && d / 2 <= 512;
        } else if (!strcmp(w, "Wo") && !Wo) {
            ok = fscanf(f, "%d", &E) == 1 && E > 0 && E < 100000;
            Wo = ok ? malloc((size_t)E * H * d * sizeof *Wo) : NULL;
            for (size_t i = 0; ok && i < (size_t)E * H * d; i++) ok = fscanf(f, "%f", &Wo[i]) == 1;
        } else ok = 0;
    }
    CHECK(ok && !strcmp(w, "kept"), "%s: bad model section '%s'", path, w);
    for (int i = 0; i < d / 2 && theta > 1; i++) inv_freq[i] = pow(theta, -2.0 * i / d);
    kv_rope rope = {.n_rot = d, .neox = 1, .inv_freq = inv_freq, .mscale = 1};
    const kv_method *m = kv_method_find(name);
    CHECK(m, "%s: method '%s' is not registered", path, name);
    kv_setup s = {.n_layers = 1, .n_heads = H, .n_kv_heads = Hkv, .head_dim = d, .n_prompt = n, .max_decode = 1,
                  .budget_tokens = B, .params = strcmp(params, "-") ? params : NULL};
    char err[256] = "";
    kv_state *st = ok && m ? m->init(&s, err, sizeof err) : NULL;
    CHECK(!m || !ok || st, "%s: init: %s", path, err);
    if (st) {
        kv_needs nd = {0};
        m->needs(&s, &nd);
        CHECK(nd.window <= win && !nd.col_mass, "%s: the method needs %d window rows (fixture %d) or column mass", path,
              nd.window, win);
        CHECK((!nd.queries || (Q && theta > 1)) && (!nd.wo || Wo), "%s: the method needs the model's queries or Wo, "
              "which the fixture lacks", path);
        kv_prefill p = {.layer = 0, .n = n, .K = K, .V = V, .kv_stride = (size_t)n * d, .win_probs = P, .win = win};
        if (nd.queries > 0 && Q) {   /* the last min(queries, n) rows, as a driver hands them */
            p.q_rows = nd.queries < n ? nd.queries : n;
            p.Q = Q + (size_t)(n - p.q_rows) * d, p.q_stride = (size_t)n * d, p.rope = &rope;
        }
        if (nd.wo && Wo) p.Wo = Wo, p.embd = E;
        CHECK(m->ingest(st, &p, err, sizeof err) == 0, "%s: ingest: %s", path, err);
        for (int j = 0; j < Hkv; j++) {
            int jj, cnt;
            if ((j ? fscanf(f, " kept %d %d", &jj, &cnt) : fscanf(f, "%d %d", &jj, &cnt)) != 2 || jj != j || cnt < 0 ||
                cnt > n) {
                CHECK(0, "%s: bad kept line for kv head %d", path, j);
                break;
            }
            for (int i = 0; i < cnt; i++)
                if (fscanf(f, "%d", &want[i]) != 1) cnt = i;
            int ng = 0, inter = 0;
            m->rows(st, 0, j, got, 2 * n, &ng);
            for (int a = 0; a < ng; a++)
                for (int b = 0; b < cnt; b++) inter += got[a] == want[b];
            double jac = ng + cnt - inter ? (double)inter / (ng + cnt - inter) : 1;
            CHECK(jac == 1.0, "%s: kv head %d: Jaccard %.4f (kvbench %d rows, kvpress %d, %d shared)", path, j, jac,
                  ng, cnt, inter);
        }
        zeroed_channels(f, path, m, st, Hkv, d);
        m->free(st);
    }
    fclose(f);
    free(K), free(V), free(P), free(want), free(got), free(Q), free(Wo);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    DIR *dir = opendir(DIR_);
    CHECK(dir, "no %s (run from the repository root)", DIR_);
    char *names[256];
    int nf = 0;
    for (struct dirent *e; dir && (e = readdir(dir)) && nf < 256;)
        if (strstr(e->d_name, ".txt")) names[nf++] = strdup(e->d_name);
    if (dir) closedir(dir);
    qsort(names, (size_t)nf, sizeof *names, by_name);
    CHECK(nf >= 20, "%d fixtures in %s", nf, DIR_);
    for (int i = 0; i < nf; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", DIR_, names[i]);
        int before = check_failures;
        one(path);
        printf("%-32s %s\n", names[i], check_failures == before ? "Jaccard 1.0 every kv head" : "DIFFERS");
        free(names[i]);
    }
    return check_done("test_kvpress_fixtures");
}
