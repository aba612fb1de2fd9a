/* SeKV's tiers on the CUDA backend (sekv_dev.c, kernels/cuda_spans.cu) against the host
 * path, on fresh random K/V/Q and surprisal, with zoom active (tau=0, room in the budget)
 * and a budget just over twice the prompt's persistent rows (raised where the room would
 * not hold a longest span at the last step), so that the 20 decode steps fold decoded
 * tokens into new spans (the device rows' valid marks at work).
 * Every build, with f32, bf16 and f16 rows: the CPU backend's run; with f32 rows and
 * gate=0, its outputs step by step against a float64 attention over the rows the state
 * says it attended (persistent rows, coarse rows with bias ln|S|, the expanded spans
 * rebuilt from their factors); with every type, every row attention read (rebuilt rows
 * too) holding a value of the type.
 * CUDA builds with a device (or the emulation, tests/gpu/emu.sh), in addition, for f32
 * rows with gate=0 and the soft gate (gate=2, gate masks applied on the device), bf16 with
 * gate=2 and f16 with gate=0:
 *   - the same run with the CUDA backend selected: outputs step by step against the CPU
 *     run (and the float64 reference for f32, gate=0), the same spans expanded for every
 *     (step, layer, head), the same persistent rows;
 *   - the span factors in pinned host memory (cudaPointerGetAttributes) on the CUDA
 *     backend, in pageable memory on the CPU backend;
 *   - the state's device bytes equal to the tracked allocator's growth at every step and
 *     at least its rows at the type's bytes, none with the CPU backend selected, and the
 *     allocator back to its value before init after free;
 *   - 16-bit rows: fewer device bytes than the same run with f32 rows, at every step by at
 *     least the 16-bit rows' own bytes. */
#include "../kernels/core.h"
#include "../methods/sekv/sekv.h"
#include "../methods/sekv/sekv_spans.h"
#include "../kernels/kvtype.h"
#include "cuda_check.h"
#ifdef KB_CUDA
#include "../kernels/cuda_backend.h"
#include "../kernels/cuda_spans.h"
#endif

#define TOL 1e-5

enum { L = 2, H = 4, HKV = 2, G = H / HKV, D = 32, STEPS = 20, MAXS = 512, RANK = 8 };

typedef struct {
    int n;
    size_t stride;          /* floats between kv heads: (n + STEPS) * D */
    float *K, *V;           /* [L][HKV][n+STEPS][D] */
    float *Q;               /* [STEPS][L][H][D] */
    float *surp;            /* [n+STEPS] */
} scen;

static float *krow(const scen *s, int l, int j, int t) { return s->K + ((size_t)l * HKV + j) * s->stride + (size_t)t * D; }
static float *vrow(const scen *s, int l, int j, int t) { return s->V + ((size_t)l * HKV + j) * s->stride + (size_t)t * D; }
static float *qrow(const scen *s, int k, int l) { return s->Q + ((size_t)k * L + l) * H * D; }

static scen make_scen(int n) {
    scen s = {n, (size_t)(n + STEPS) * D, NULL, NULL, NULL, NULL};
    size_t kv = (size_t)L * HKV * s.stride;
    s.K = malloc(kv * sizeof *s.K), s.V = malloc(kv * sizeof *s.V);
    s.Q = malloc((size_t)STEPS * L * H * D * sizeof *s.Q);
    s.surp = malloc((size_t)(n + STEPS) * sizeof *s.surp);
    test_fill(s.K, kv, 1), test_fill(s.V, kv, 1);
    test_fill(s.Q, (size_t)STEPS * L * H * D, 1.5f);
    for (int t = 0; t < n + STEPS; t++) s.surp[t] = (float)(-log(test_unif() + 1e-9) * (test_unif() < 0.1 ? 5 : 1));
    s.surp[0] = 0;
    return s;
}
static void free_scen(scen *s) { free(s->K), free(s->V), free(s->Q), free(s->surp); }

/* The sekv-spread variant: its fold at B/2 is what the compaction checks below need. */
static kv_state *start(const scen *s, const char *params, int budget, int kt) {
    char err[256] = "";
    kv_setup su = {.decode_rule = KV_DECODE_HOLD, .n_layers = L, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .n_prompt = s->n,
                   .max_decode = STEPS, .budget_tokens = budget, .params = params, .kv_type = kt};
    kv_state *st = kv_sekv_spread.init(&su, err, sizeof err);
    for (int l = 0; st && l < L; l++) {
        kv_prefill p = {.layer = l, .n = s->n, .K = krow(s, l, 0, 0), .V = vrow(s, l, 0, 0), .kv_stride = s->stride,
                        .surprisal = s->surp};
        if (kv_sekv_spread.ingest(st, &p, err, sizeof err)) {
            kv_sekv_spread.free(st);
            st = NULL;
        }
    }
    CHECK(st != NULL, "sekv setup (%s, %s, budget %d): %s", params, kb_kvtype_name(kt), budget, err);
    return st;
}

/* float64 attention of head h over what the state attended at its last attend(): the
 * persistent rows, the spans expanded for h rebuilt from their factors (every component:
 * gate=0 only), the other spans' coarse rows with bias ln|S|. */
static void ref_head(const kv_state *st, int l, int h, const float *q, double *out) {
    int n = sekv_rows(st, l, NULL, NULL), j = h / G;
    int32_t *pos = malloc(sizeof(int32_t) * n), *sp = malloc(sizeof(int32_t) * n), ex[MAXS];
    sekv_rows(st, l, pos, sp);
    int ne = sekv_expanded(st, l, h, ex), cap = 0;
    for (int r = 0; r < n; r++) cap += sp[r] < 0 ? 1 : sekv_span_at(st, l, sp[r]).len;
    double *lg = malloc(sizeof(double) * cap), mx = -INFINITY, z = 0;
    const float **vr = malloc(sizeof(float *) * cap);
    float *Kt = malloc(sizeof(float) * cap * D), *Vt = malloc(sizeof(float) * cap * D);
    int m = 0;
    for (int r = 0; r < n; r++) {
        int s = sp[r], expanded = 0;
        for (int i = 0; i < ne; i++) expanded |= s >= 0 && ex[i] == s;
        const float *k, *v;
        if (expanded) {
            int len = sekv_span_at(st, l, s).len;
            sekv_span_tokens(st, l, j, s, Kt + (size_t)m * D, Vt + (size_t)m * D);
            for (int t = 0; t < len; t++, m++) {
                double dot = 0;
                for (int c = 0; c < D; c++) dot += (double)q[c] * Kt[(size_t)m * D + c];
                lg[m] = dot / sqrt((double)D);
                vr[m] = Vt + (size_t)m * D;
            }
            continue;
        }
        sekv_row(st, l, j, r, &k, &v);
        double dot = 0;
        for (int c = 0; c < D; c++) dot += (double)q[c] * k[c];
        lg[m] = dot / sqrt((double)D) + (s < 0 ? 0 : log((double)sekv_span_at(st, l, s).len));
        vr[m++] = v;
    }
    for (int i = 0; i < m; i++) mx = lg[i] > mx ? lg[i] : mx;
    for (int i = 0; i < m; i++) z += (lg[i] = exp(lg[i] - mx));
    for (int c = 0; c < D; c++) out[c] = 0;
    for (int i = 0; i < m; i++)
        for (int c = 0; c < D; c++) out[c] += lg[i] / z * vr[i][c];
    free(pos), free(sp), free(lg), free(vr), free(Kt), free(Vt);
}

/* One run's record: outputs [STEPS][L][H][D], expanded spans per (step, layer, head),
 * the persistent rows per (step, layer). */
typedef struct {
    float *out;
    int32_t *ex, *nex;      /* [STEPS][L][H][MAXS], [STEPS][L][H] */
    int32_t *rows;          /* [STEPS][L] persistent rows */
    int spans0, spans1;     /* layer 0's spans after ingest and at the end */
    int all_expanded;       /* some step expanded every span for every head (then the budget is too loose) */
    long rebuilt;           /* rebuilt rows read on the host, summed over (step, layer, kv head) */
    long from_factors;      /* expansions of spans the slow tier keeps as factors, not rows */
    size_t held[STEPS], rows_b[STEPS];   /* the state's device bytes, its resident rows' bytes, per step */
} record;

static record new_record(void) {
    record r = {.out = malloc(sizeof(float) * STEPS * L * H * D), .ex = calloc((size_t)STEPS * L * H * MAXS, sizeof(int32_t)),
                .nex = calloc((size_t)STEPS * L * H, sizeof(int32_t)), .rows = calloc((size_t)STEPS * L, sizeof(int32_t))};
    return r;
}
static void free_record(record *r) { free(r->out), free(r->ex), free(r->nex), free(r->rows); }

/* SeKV through prefill and STEPS decode steps on the selected backend. on_dev: the CUDA
 * backend is selected. ref: check each output against ref_head (gate=0). */
static void run(const scen *s, const char *params, int budget, int kt, int on_dev, int ref, record *rec) {
    size_t cur0 = dev_current();
    kv_state *st = start(s, params, budget, kt);
    if (!st) return;
    rec->spans0 = sekv_span_count(st, 0);
#ifdef KB_CUDA
    int pinned_bad = 0;
    if (kb_cuda(NULL))
        for (int l = 0; l < L; l++)
            for (int j = 0; j < HKV; j++)
                for (int sp = 0; sp < sekv_span_count(st, l); sp++)
                    pinned_bad += kb_cuda_host_pinned(sekv_span_factors(st, l, j, sp)) != on_dev;
    CHECK(pinned_bad == 0, "%s: %d span factor buffers %s pinned host memory", params, pinned_bad,
          on_dev ? "not in" : "in");
#endif
    float kk[HKV * D], vv[HKV * D];
    double worst = 0, refo[D];
    for (int k = 0; k < STEPS; k++) {
        for (int l = 0; l < L; l++) {
            for (int j = 0; j < HKV; j++) {
                memcpy(kk + j * D, krow(s, l, j, s->n + k), sizeof(float) * D);
                memcpy(vv + j * D, vrow(s, l, j, s->n + k), sizeof(float) * D);
            }
            kv_token t = {s->n + k, s->surp[s->n + k], 0};
            kv_sekv_spread.append(st, l, kk, vv, &t);
            float *out = rec->out + ((size_t)k * L + l) * H * D;
            test_poison(out, (size_t)H * D);
            kv_sekv_spread.attend(st, l, qrow(s, k, l), out);
            rec->rows[k * L + l] = sekv_rows(st, l, NULL, NULL);
            int all = 1;
            for (int h = 0; h < H; h++) {
                size_t at = ((size_t)k * L + l) * H + h;
                rec->nex[at] = sekv_expanded(st, l, h, rec->ex + at * MAXS);
                for (int i = 0; i < rec->nex[at]; i++)
                    rec->from_factors += !sekv_store_rows(sekv_span_at(st, l, rec->ex[at * MAXS + i]).len, D, RANK);
                all &= rec->nex[at] == sekv_span_count(st, l);
                if (!ref) continue;
                ref_head(st, l, h, qrow(s, k, l) + (size_t)h * D, refo);
                double e = rel_l2(out + (size_t)h * D, refo, D);
                if (e > worst) worst = e;
                CHECK(e < TOL, "%s %s step %d layer %d head %d: rel err vs float64 %.3g", params, on_dev ? "cuda" : "cpu",
                      k, l, h, e);
            }
            rec->all_expanded |= all;
            /* every row attention read, rebuilt ones too, holds a value of the K/V type (on
             * the host: with the CUDA backend the rebuilt rows exist only on the device) */
            int off = 0;
            for (int j = 0; j < HKV && !on_dev; j++) {
                int P = 0, R = 0;
                sekv_resident(st, l, j, &P, &R);
                for (int r = 0; r < P + R; r++) {
                    const float *kr, *vr;
                    sekv_row(st, l, j, r, &kr, &vr);
                    for (int c = 0; c < D; c++) off += kb_kv_round(kt, kr[c]) != kr[c] || kb_kv_round(kt, vr[c]) != vr[c];
                }
                rec->rebuilt += R;
            }
            CHECK(off == 0, "%s %s step %d layer %d: %d elements of the rows are not %s values", params,
                  on_dev ? "cuda" : "cpu", k, l, off, kb_kvtype_name(kt));
        }
        size_t held = sekv_device_bytes(st), grew = dev_current() - cur0, rows_b = 0;
        for (int l = 0; l < L; l++)
            for (int j = 0; j < HKV; j++) rows_b += (size_t)sekv_resident(st, l, j, NULL, NULL) * 2 * D * kb_kvtype_bytes(kt);
        rec->held[k] = held, rec->rows_b[k] = rows_b;
        if (on_dev)
            CHECK(held == grew && held >= rows_b, "%s step %d: state holds %zu device bytes, allocator grew by %zu, rows %zu",
                  params, k, held, grew, rows_b);
        else
            CHECK(held == 0 && grew == 0, "%s step %d: %zu device bytes (allocator +%zu) on the CPU backend", params, k,
                  held, grew);
    }
    rec->spans1 = sekv_span_count(st, 0);
    if (ref)
        printf("%-22s %-4s n=%d B=%d spans %d -> %d: worst rel err vs float64 %.3g\n", params, on_dev ? "cuda" : "cpu",
               s->n, budget, rec->spans0, rec->spans1, worst);
    kv_sekv_spread.free(st);
    CHECK(dev_current() == cur0, "%s: %zu device bytes before init, %zu after free", params, cur0, dev_current());
}

/* The budget: just over twice the prompt's persistent rows (a probe run), so that
 * P passes B/2 after a few steps and decoded tokens are folded; and at least enough that
 * the room B - P still holds a span of l_max at the last step, when the STEPS decoded
 * rows sit in P (else a prompt with few persistent rows stops zooming halfway). */
static int pick_budget(const scen *s, const char *params, int l_max) {
    kv_state *st = start(s, params, 4 * s->n, KB_F32);
    if (!st) return 4 * s->n;
    int P = sekv_rows(st, 0, NULL, NULL);
    kv_sekv_spread.free(st);
    int fold = 2 * P + 6, last = P + STEPS + l_max + 6;
    return fold > last ? fold : last;
}

/* One scenario with gate (0 or 2), K/V type kt and longest span l_max: the CPU run (against
 * float64 for gate=0 with f32 rows); with cuda, the CUDA run against it, and for 16-bit
 * rows a CUDA run with f32 rows too: the 16-bit run's device bytes are lower by at least
 * its resident rows at 2 bytes an element at every step (the device rows are 16-bit, not
 * f32). l_max = 8: every span is kept as rows (rank 8, d 32: rows are smaller up to 11
 * tokens) and decoded tokens are folded into new spans; l_max = 24: longer spans, kept
 * as factors and rebuilt from them, and no fold within the 20 steps. */
static void test_case(int gate, int cuda, int kt, int l_max) {
    scen s = make_scen(test_int(120, 180));
    char params[128];
    /* p_max=0.5 pinned: the budget below is sized so that P passes B/2 */
    snprintf(params, sizeof params, "alpha=1,rank=%d,gate=%d,tau=0,local=8,sinks=2,l_max=%d,p_max=0.5", RANK, gate, l_max);
    int budget = pick_budget(&s, params, l_max), ref = gate == 0 && kt == KB_F32;
    record rc = new_record(), rg = new_record();
    kb_select("cpu", NULL);
    run(&s, params, budget, kt, 0, ref, &rc);
    if (l_max <= 8)
        CHECK(rc.spans1 > rc.spans0, "%s: no decoded tokens folded into spans (%d -> %d)", params, rc.spans0, rc.spans1);
    else
        CHECK(rc.from_factors > 0, "%s: no span kept as factors was expanded", params);
    int some = 0;
    for (int i = 0; i < STEPS * L * H; i++) some += rc.nex[i] > 0;
    CHECK(some > STEPS * L * H / 2 && !rc.all_expanded && rc.rebuilt > 0,
          "%s: zoom not selective: %d of %d (step, layer, head) expanded a span, all at once: %d, rows rebuilt %ld",
          params, some, STEPS * L * H, rc.all_expanded, rc.rebuilt);
    if (cuda) {
#ifdef KB_CUDA
        kb_select("cuda", NULL);
        run(&s, params, budget, kt, 1, ref, &rg);
        kb_select("cpu", NULL);
        double worst = 0;
        int diff_ex = 0, diff_rows = 0;
        for (int k = 0; k < STEPS; k++)
            for (int l = 0; l < L; l++) {
                diff_rows += rg.rows[k * L + l] != rc.rows[k * L + l];
                for (int h = 0; h < H; h++) {
                    size_t at = ((size_t)k * L + l) * H + h;
                    double ref_o[D];
                    for (int c = 0; c < D; c++) ref_o[c] = rc.out[at * D + c];
                    double e = rel_l2(rg.out + at * D, ref_o, D);
                    if (e > worst) worst = e;
                    CHECK(e < TOL, "%s %s step %d layer %d head %d: cuda vs cpu rel err %.3g", params, kb_kvtype_name(kt),
                          k, l, h, e);
                    diff_ex += rg.nex[at] != rc.nex[at] ||
                               memcmp(rg.ex + at * MAXS, rc.ex + at * MAXS, sizeof(int32_t) * rc.nex[at]) != 0;
                }
            }
        CHECK(diff_ex == 0, "%s %s: %d (step, layer, head) expanded other spans on cuda", params, kb_kvtype_name(kt), diff_ex);
        CHECK(diff_rows == 0, "%s %s: %d (step, layer) with another persistent row count on cuda", params,
              kb_kvtype_name(kt), diff_rows);
        printf("%-22s %-4s cuda vs cpu: worst rel err %.3g over %d steps, same spans expanded: %s\n", params,
               kb_kvtype_name(kt), worst, STEPS, diff_ex ? "no" : "yes");
        if (kt != KB_F32) {
            record rf = new_record();
            kb_select("cuda", NULL);
            run(&s, params, budget, KB_F32, 1, 0, &rf);
            kb_select("cpu", NULL);
            int small = 0;
            for (int k = 0; k < STEPS; k++) small += rf.held[k] < rg.held[k] + rg.rows_b[k];
            CHECK(small == 0, "%s: %d of %d steps where %s device rows saved less than their own bytes against f32 "
                  "(last step: f32 %zu bytes, %s %zu, rows %zu)", params, small, STEPS, kb_kvtype_name(kt),
                  rf.held[STEPS - 1], kb_kvtype_name(kt), rg.held[STEPS - 1], rg.rows_b[STEPS - 1]);
            printf("%-22s %-4s device bytes at the last step: %zu (f32 rows: %zu)\n", params, kb_kvtype_name(kt),
                   rg.held[STEPS - 1], rf.held[STEPS - 1]);
            free_record(&rf);
        }
#endif
    }
    free_record(&rc);
    free_record(&rg);
    free_scen(&s);
}


int main(void) {
    test_seed();
    const char *why = NULL;
    const kb_backend *cuda = kb_cuda(&why);
#ifdef KB_CUDA
    if (cuda) {
        printf("backend cuda\n");
        warm_backend(1, D);
    }
#endif
    if (!cuda) printf("cuda backend not tested: %s\n", why ? why : "?");
    test_case(0, cuda != NULL, KB_F32, 8);
    if (cuda) test_case(2, 1, KB_F32, 8);
    test_case(0, cuda != NULL, KB_F32, 24);
    test_case(2, cuda != NULL, KB_BF16, 8);   /* the device default */
    test_case(2, cuda != NULL, KB_BF16, 24);
    test_case(0, cuda != NULL, KB_F16, 24);
    return check_done("test_cuda_sekv");
}
