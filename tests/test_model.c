/* The engine on the real model: FullKV through the method interface generates the same
 * tokens as the engine's own plain cache; prefill K/V and logits equal those of decoding
 * the same tokens one at a time; chunked prefill equals unchunked; attention statistics
 * are distributions; malformed model files and over-long prompts are refused by name.
 *
 * `test_model --dump DIR` instead writes, for the two fixed prompts, the prompt ids, the
 * prefill's surprisal and last logits, and FullKV's greedy tokens with the logits of every
 * decode step, for tests/model_ref.py to check against numpy in float64 (decode with f32
 * activations; `--dump-q8 DIR` the same with the default 8-bit activations);
 * `test_model --dump-model MODEL DIR` does the same for another model and DIR/p0_ids.txt
 * (`--dump-model-q8 MODEL DIR` with 8-bit activations). */
#include "check.h"
#include "../kernels/core.h"
#include "../model/engine.h"
#include "../model/random_model.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const kv_method kv_fullkv;

static const char *PROMPT_CHAT = "Explain in a few sentences why the sky is blue.";
static const char *PROMPT_TEXT = "The old lighthouse keeper climbed the stairs every evening. He lit the "
                                 "lamp, watched the ships pass, and wrote about the sea in";
enum { GEN = 32 };

static int encode(const kv_model *m, int chat, int32_t *ids, int cap) {
    const kv_tokenizer *t = model_tokenizer(m);
    char *text = chat ? tok_chat_prompt(t, NULL, PROMPT_CHAT) : strdup(PROMPT_TEXT);
    int n = tok_encode(t, text, strlen(text), chat, ids, cap);
    free(text);
    return n;
}

static void random_ids(const kv_model *m, int32_t *ids, int n) {
    for (int i = 0; i < n; i++) ids[i] = test_int(17, model_config(m)->n_vocab - 1);  /* no control ids */
}

static double *to_double(const float *x, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static double rel_f(const float *x, const float *ref, size_t n) {
    double *r = to_double(ref, n), e = rel_l2(x, r, n);
    free(r);
    return e;
}

/* ---- a recorder around FullKV: keeps every appended k/v by (layer, position) ---- */

static struct { float *K, *V; int cap, kvd; } rec;

static void rec_append(kv_state *st, int layer, const float *k, const float *v, const kv_token *t) {
    memcpy(rec.K + ((size_t)layer * rec.cap + t->pos) * rec.kvd, k, rec.kvd * sizeof(float));
    memcpy(rec.V + ((size_t)layer * rec.cap + t->pos) * rec.kvd, v, rec.kvd * sizeof(float));
    kv_fullkv.append(st, layer, k, v, t);
}

static kv_state *fullkv_after_prefill(kv_model *m, const kv_prefill_out *pf, int max_decode) {
    const kv_model_config *c = model_config(m);
    kv_setup s = {.n_layers = c->n_layer, .n_heads = c->n_head, .n_kv_heads = c->n_head_kv, .head_dim = c->head_dim,
                  .n_prompt = pf->n, .max_decode = max_decode, .budget_frac = 1.0};
    char err[256];
    kv_state *st = kv_fullkv.init(&s, err, sizeof err);
    CHECK(st != NULL, "fullkv init: %s", err);
    for (int l = 0; st && l < c->n_layer; l++) {
        kv_prefill p = prefill_layer(pf, l);
        CHECK(kv_fullkv.ingest(st, &p, err, sizeof err) == 0, "ingest layer %d: %s", l, err);
    }
    return st;
}

/* Prefill of n tokens vs prefill of the first token then n-1 decode steps. */
static void test_prefill_matches_decode(kv_model *m) {
    const kv_model_config *c = model_config(m);
    int n = test_int(12, 28), d = c->head_dim, Hkv = c->n_head_kv, kvd = Hkv * d;
    int32_t ids[28];
    random_ids(m, ids, n);
    char err[256];
    kv_needs none = {0};
    kv_prefill_out full, one;
    CHECK(model_prefill(m, ids, n, &none, &full, err, sizeof err) == 0, "%s", err);
    CHECK(model_prefill(m, ids, 1, &none, &one, err, sizeof err) == 0, "%s", err);
    rec.cap = n;
    rec.kvd = kvd;
    rec.K = malloc((size_t)c->n_layer * n * kvd * sizeof(float));
    rec.V = malloc((size_t)c->n_layer * n * kvd * sizeof(float));
    test_poison(rec.K, (size_t)c->n_layer * n * kvd);
    test_poison(rec.V, (size_t)c->n_layer * n * kvd);
    /* position 0 comes from the one-token prefill */
    for (int l = 0; l < c->n_layer; l++)
        for (int j = 0; j < Hkv; j++) {
            memcpy(rec.K + (size_t)l * n * kvd + j * d, one.K + ((size_t)l * Hkv + j) * d, d * sizeof(float));
            memcpy(rec.V + (size_t)l * n * kvd + j * d, one.V + ((size_t)l * Hkv + j) * d, d * sizeof(float));
        }
    kv_method recm = kv_fullkv;
    recm.append = rec_append;
    kv_state *st = fullkv_after_prefill(m, &one, n);
    float *logits = malloc((size_t)c->n_vocab * sizeof(float)), *surp = malloc((size_t)n * sizeof(float));
    memcpy(logits, one.last_logits, (size_t)c->n_vocab * sizeof(float));
    surp[0] = 0;
    for (int t = 1; st && t < n; t++) {
        surp[t] = (float)model_surprisal(m, logits, ids[t]);
        kv_token info = {t, surp[t], model_sent_end(m, ids[t])};
        test_poison(logits, (size_t)c->n_vocab);
        CHECK(model_decode(m, &recm, st, ids[t], t, &info, logits) == 0, "decode at %d", t);
    }
    /* the prefill's [L][Hkv][n][d] in the recorder's [L][n][Hkv][d] order */
    size_t total = (size_t)c->n_layer * n * kvd;
    float *pk = malloc(total * sizeof(float)), *pv = malloc(total * sizeof(float));
    for (int l = 0; l < c->n_layer; l++)
        for (int t = 0; t < n; t++)
            for (int j = 0; j < Hkv; j++) {
                size_t src = (((size_t)l * Hkv + j) * n + t) * d, dst = ((size_t)l * n + t) * kvd + j * d;
                memcpy(pk + dst, full.K + src, d * sizeof(float));
                memcpy(pv + dst, full.V + src, d * sizeof(float));
            }
    double ek = rel_f(rec.K, pk, total), ev = rel_f(rec.V, pv, total);
    double el = rel_f(logits, full.last_logits, (size_t)c->n_vocab), es = rel_f(surp, full.surprisal, (size_t)n);
    printf("prefill vs decode (n=%d): K %.2e, V %.2e, last logits %.2e, surprisal %.2e\n", n, ek, ev, el, es);
    CHECK(ek < 1e-4 && ev < 1e-4, "K/V of prefill and decode differ: %.3g %.3g", ek, ev);
    CHECK(el < 1e-4, "last logits of prefill and decode differ: %.3g", el);
    CHECK(es < 1e-4, "surprisal of prefill and decode differ: %.3g", es);
    kv_fullkv.free(st);
    free(pk); free(pv); free(rec.K); free(rec.V); free(logits); free(surp);
    prefill_out_free(&full);
    prefill_out_free(&one);
}

/* Chunks of 7 tokens vs one chunk, with both statistics; the statistics are distributions. */
static void test_chunked_prefill(kv_model *m) {
    const kv_model_config *c = model_config(m);
    int n = test_int(30, 50), win = 8, L = c->n_layer, H = c->n_head;
    int32_t ids[50];
    random_ids(m, ids, n);
    kv_needs needs = {.col_mass = 1, .window = win};
    kv_prefill_out a, b;
    char err[256];
    CHECK(model_prefill(m, ids, n, &needs, &a, err, sizeof err) == 0, "%s", err);
    model_set_prefill_chunk(m, 7);
    CHECK(model_prefill(m, ids, n, &needs, &b, err, sizeof err) == 0, "%s", err);
    model_set_prefill_chunk(m, 0);
    size_t kv = (size_t)L * c->n_head_kv * n * c->head_dim;
    double e[6] = {rel_f(b.K, a.K, kv), rel_f(b.V, a.V, kv), rel_f(b.col_mass, a.col_mass, (size_t)L * H * n),
                   rel_f(b.win_probs, a.win_probs, (size_t)L * H * win * n),
                   rel_f(b.surprisal, a.surprisal, n), rel_f(b.last_logits, a.last_logits, c->n_vocab)};
    printf("chunk 7 vs %d (n=%d): K %.1e V %.1e mass %.1e win %.1e surprisal %.1e logits %.1e\n", n, n,
           e[0], e[1], e[2], e[3], e[4], e[5]);
    /* Different chunkings take different sgemm blockings, so f32 rounding differs and grows
     * through 30 layers: K/V agree to ~1e-6, the attention statistics of the top layers to
     * ~1e-5 (seen up to 1.7e-5). 1e-4, as for prefill against decode. */
    for (int i = 0; i < 6; i++) CHECK(e[i] < 1e-4, "chunked prefill differs in output %d: %.3g", i, e[i]);
    CHECK(a.win == win, "win %d", a.win);
    double worst_mass = 0, worst_row = 0, beyond = 0;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            double s = 0;
            for (int t = 0; t < n; t++) s += a.col_mass[((size_t)l * H + h) * n + t];
            worst_mass = fmax(worst_mass, fabs(s - n) / n);
            for (int r = 0; r < win; r++) {
                const float *row = a.win_probs + (((size_t)l * H + h) * win + r) * n;
                int p = n - win + r;
                double rs = 0;
                for (int t = 0; t < n; t++) (t <= p ? (rs += row[t]) : (beyond += fabs(row[t])));
                worst_row = fmax(worst_row, fabs(rs - 1));
            }
        }
    CHECK(worst_mass < 1e-4, "col_mass of a head does not sum to n: %.3g", worst_mass);
    CHECK(worst_row < 1e-4 && beyond == 0, "window rows: sum off by %.3g, %.3g beyond causal", worst_row, beyond);
    int se = 0;
    for (int t = 0; t < n; t++) se += a.sent_end[t] == model_sent_end(m, ids[t]);
    CHECK(se == n, "sent_end of the prefill disagrees with model_sent_end");
    prefill_out_free(&a);
    prefill_out_free(&b);
}

/* End to end (tokenizer, chat template, engine, FullKV): a question with one right answer. */
static void test_answers_france(kv_model *m) {
    const kv_tokenizer *t = model_tokenizer(m);
    char *text = tok_chat_prompt(t, NULL, "What is the capital of France?");
    int32_t ids[256], out[GEN];
    int n = tok_encode(t, text, strlen(text), 1, ids, 256);
    free(text);
    kv_setup s = {.budget_frac = 1.0};
    char err[256], answer[1024] = "";
    int k = model_generate_method(m, &kv_fullkv, &s, ids, n, GEN, out, NULL, NULL, NULL, err, sizeof err);
    CHECK(k > 0, "%s", err);
    if (k > 0) tok_decode(t, out, k, answer, sizeof answer);
    CHECK(strstr(answer, "Paris") != NULL, "the capital of France is not Paris: '%s'", answer);
    printf("France -> %s\n", answer);
}

static void test_plain_vs_fullkv(kv_model *m, int chat) {
    int32_t ids[256], plain[GEN], meth[GEN];
    int n = encode(m, chat, ids, 256);
    char err[256];
    kv_gen_stats pst;
    memset(&pst, 0xff, sizeof pst);   /* poisoned: every field must be written */
    int np = model_generate_plain(m, ids, n, GEN, plain, &pst, err, sizeof err);
    CHECK(np > 0, "plain: %s", err);
    CHECK(pst.n_prompt == n && pst.n_new == np && (pst.n_steps == np || pst.n_steps == np - 1) &&
              pst.prefill_s > 0 && pst.decode_s > 0 && pst.mem.fast_tokens == 0,
          "plain stats: prompt %d new %d steps %d, %.3g s + %.3g s", pst.n_prompt, pst.n_new, pst.n_steps,
          pst.prefill_s, pst.decode_s);
    kv_setup s = {.budget_frac = 1.0};
    kv_gen_stats st;
    int nm = model_generate_method(m, &kv_fullkv, &s, ids, n, GEN, meth, NULL, NULL, &st, err, sizeof err);
    CHECK(nm == np, "%s prompt: plain made %d tokens, fullkv %d (%s)", chat ? "chat" : "text", np, nm,
          nm < 0 ? err : "");
    int same = 0;
    while (same < np && same < nm && plain[same] == meth[same]) same++;
    CHECK(same == np && nm == np, "fullkv departs from plain at token %d", same);
    CHECK(st.n_prompt == n && st.n_new == nm && st.mem.fast_tokens > 0, "stats: %d %d %ld", st.n_prompt,
          st.n_new, st.mem.fast_tokens);
    char text[2048];
    tok_decode(model_tokenizer(m), plain, np, text, sizeof text);
    printf("%s prompt (%d tokens) -> %d tokens, same through fullkv: %s\n", chat ? "chat" : "text", n, np,
           text);
}

/* ---- malformed files ---- */

static void write_file(const char *path, const void *data, size_t len, size_t total) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len, "write %s: %s", path, strerror(errno));
    if (f) {
        CHECK(ftruncate(fileno(f), (off_t)total) == 0, "truncate %s", path);  /* zeros after the header */
        fclose(f);
    }
}

static void expect_refused(const char *path, const char *what, const char *needle) {
    char err[512] = "";
    kv_model *bad = model_load(path, err, sizeof err);
    CHECK(bad == NULL, "%s: loaded", what);
    model_free(bad);
    CHECK(strstr(err, path) != NULL, "%s: message does not name the file: %s", what, err);
    CHECK(!needle || strstr(err, needle), "%s: message lacks '%s': %s", what, needle, err);
    printf("refused %-16s %s\n", what, err);
}

/* The tensor info record of name in a header copy: its name's length prefix. */
static uint8_t *find_record(uint8_t *hdr, size_t len, const char *name) {
    size_t nl = strlen(name);
    uint8_t key[80];
    uint64_t l64 = nl;
    memcpy(key, &l64, 8);
    memcpy(key + 8, name, nl);
    return memmem(hdr, len, key, 8 + nl);
}

static void test_malformed(kv_model *m) {
    const gguf_file *g = model_gguf(m);
    const kv_model_config *c = model_config(m);
    char path[] = "/tmp/kvbench_test_model_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    size_t hlen = g->data_start, total = g->size;
    uint8_t *hdr = malloc(hlen);

    write_file(path, g->base, total < (1u << 20) ? total : (1u << 20), total < (1u << 20) ? total : (1u << 20));
    expect_refused(path, "first 1 MB", NULL);
    write_file(path, g->base, hlen, hlen);
    expect_refused(path, "header only", NULL);

    memcpy(hdr, g->base, hlen);
    memcpy(hdr, "GGUX", 4);
    write_file(path, hdr, hlen, total);
    expect_refused(path, "wrong magic", NULL);

    memcpy(hdr, g->base, hlen);
    uint8_t *r = find_record(hdr, hlen, "blk.3.attn_k.weight");
    CHECK(r != NULL, "no record of blk.3.attn_k.weight in the header");
    if (r) {
        r[8 + strlen("blk.3.attn_")] = 'x';
        write_file(path, hdr, hlen, total);
        expect_refused(path, "missing tensor", "tensor blk.3.attn_k.weight is missing");

        memcpy(hdr, g->base, hlen);
        uint64_t ne1 = (uint64_t)c->n_head_kv * c->head_dim / 2;   /* half the rows */
        memcpy(r + 8 + strlen("blk.3.attn_k.weight") + 4 + 8, &ne1, 8);
        write_file(path, hdr, hlen, total);
        char want[160];
        snprintf(want, sizeof want, "tensor blk.3.attn_k.weight has shape [%d, %llu] but expected [%d, %d]",
                 c->n_embd, (unsigned long long)ne1, c->n_embd, c->n_head_kv * c->head_dim);
        expect_refused(path, "wrong shape", want);
    }
    memcpy(hdr, g->base, hlen);
    uint8_t *a = find_record(hdr, hlen, "general.architecture");
    CHECK(a != NULL, "no general.architecture in the header");
    if (a) {
        memcpy(a + 8 + 20 + 4 + 8, "gpt2x", 5);   /* key, type u32, length u64, then the value */
        write_file(path, hdr, hlen, total);
        expect_refused(path, "architecture", "architecture 'gpt2x' is not supported");
    }
    unlink(path);
    expect_refused("/nonexistent/kvbench.gguf", "missing file", NULL);
    free(hdr);
}

static void test_context_refused(kv_model *m) {
    const kv_model_config *c = model_config(m);
    int n = c->n_ctx_train + 1;
    int32_t *ids = calloc((size_t)n, sizeof *ids);
    kv_prefill_out pf;
    char err[256] = "", want[128];
    snprintf(want, sizeof want, "prompt of %d tokens is beyond the model's context of %d", n, c->n_ctx_train);
    CHECK(model_prefill(m, ids, n, NULL, &pf, err, sizeof err) == -1, "over-long prompt accepted");
    CHECK(strstr(err, want) != NULL, "message: %s", err);
    int32_t out[4];
    CHECK(model_generate_plain(m, ids, n, 4, out, NULL, err, sizeof err) == -1, "plain accepted an over-long prompt");
    free(ids);
}

/* ---- dump for model_ref.py ---- */

static int write_f32(const char *dir, const char *name, const float *x, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof(float), n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        if (f) fclose(f);
        return -1;
    }
    return fclose(f);
}

static int write_ids(const char *dir, const char *name, const int32_t *ids, int n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < n; i++) fprintf(f, "%d%c", ids[i], i + 1 < n ? ' ' : '\n');
    return fclose(f);
}

/* Prefill ids, then GEN greedy steps through FullKV (to a stop token if use_stop). */
static int dump_one(kv_model *m, const char *dir, int p, const int32_t *ids, int n, int use_stop) {
    const kv_model_config *c = model_config(m);
    int32_t gen[GEN];
    int ng = 0;
    char err[256], name[64];
    kv_prefill_out pf;
    if (model_prefill(m, ids, n, NULL, &pf, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    kv_state *st = fullkv_after_prefill(m, &pf, GEN);
    float *steps = malloc((size_t)GEN * c->n_vocab * sizeof(float));
    const float *logits = pf.last_logits;
    while (st && ng < GEN) {
        int id = model_argmax(logits, c->n_vocab);
        if (use_stop && tok_is_stop(model_tokenizer(m), id)) break;
        gen[ng] = id;
        kv_token info = {n + ng, (float)model_surprisal(m, logits, id), model_sent_end(m, id)};
        float *next = steps + (size_t)ng * c->n_vocab;
        if (model_decode(m, &kv_fullkv, st, id, n + ng, &info, next)) break;
        logits = next;
        ng++;
    }
    snprintf(name, sizeof name, "p%d_ids.txt", p);
    int bad = write_ids(dir, name, ids, n);
    snprintf(name, sizeof name, "p%d_gen.txt", p);
    bad |= write_ids(dir, name, gen, ng);
    snprintf(name, sizeof name, "p%d_surprisal.f32", p);
    bad |= write_f32(dir, name, pf.surprisal, n);
    snprintf(name, sizeof name, "p%d_last_logits.f32", p);
    bad |= write_f32(dir, name, pf.last_logits, c->n_vocab);
    snprintf(name, sizeof name, "p%d_step_logits.f32", p);
    bad |= write_f32(dir, name, steps, (size_t)ng * c->n_vocab);
    printf("prompt %d: %d tokens, %d generated\n", p, n, ng);
    free(steps);
    if (st) kv_fullkv.free(st);
    prefill_out_free(&pf);
    return bad || !st;
}

/* The two fixed prompts on the default model. */
static int dump(kv_model *m, const char *dir) {
    for (int p = 0; p < 2; p++) {
        int32_t ids[256];
        int n = encode(m, p == 0, ids, 256);
        if (dump_one(m, dir, p, ids, n, 1)) return 1;
    }
    return 0;
}

/* The engine's decode against its own prefill: the prompt and the first ng - 1 generated
 * ids prefilled at once must give the last decode step's logits (one table of RoPE
 * frequencies for both paths, whatever the scaling). Relative L2 < 1e-4, printed. */
static int prefill_matches_decode(kv_model *m, const char *dir, const int32_t *ids, int n) {
    char file[1024], err[256];
    snprintf(file, sizeof file, "%s/p0_gen.txt", dir);
    FILE *f = fopen(file, "r");
    int32_t *all = malloc((size_t)(n + 64) * sizeof *all);
    memcpy(all, ids, (size_t)n * sizeof *all);
    int ng = 0;
    while (f && ng < 64 && fscanf(f, "%d", &all[n + ng]) == 1) ng++;
    if (f) fclose(f);
    int nv = model_config(m)->n_vocab, rc = 1;
    kv_prefill_out pf;
    if (ng < 2 || model_prefill(m, all, n + ng - 1, NULL, &pf, err, sizeof err)) {
        fprintf(stderr, "test_model: prefill of prompt + generated: %s\n", ng < 2 ? "too few generated" : err);
        free(all);
        return 1;
    }
    snprintf(file, sizeof file, "%s/p0_step_logits.f32", dir);
    float *step = malloc((size_t)nv * sizeof *step);
    f = fopen(file, "rb");
    if (f && !fseek(f, (long)((size_t)(ng - 2) * nv * sizeof(float)), SEEK_SET) &&
        fread(step, sizeof(float), (size_t)nv, f) == (size_t)nv) {
        double *ref = malloc((size_t)nv * sizeof *ref);
        for (int i = 0; i < nv; i++) ref[i] = pf.last_logits[i];
        double e = rel_l2(step, ref, (size_t)nv);
        printf("prefill of %d tokens vs decode at position %d: logits rel L2 %.2e\n", n + ng - 1, n + ng - 2, e);
        rc = !(e < 1e-4);
        if (rc) fprintf(stderr, "FAIL: prefill and decode disagree (rel L2 %.3g >= 1e-4)\n", e);
        free(ref);
    }
    if (f) fclose(f);
    free(step);
    free(all);
    prefill_out_free(&pf);
    return rc;
}

/* Another model (tests/model_tiny.py's) with the ids in DIR/p0_ids.txt, prefilled in
 * chunks of 5, decoded for GEN steps regardless of stop tokens; then the prefill of
 * prompt and generated ids against the last decode step. */
static int dump_model(const char *path, const char *dir, int q8) {
    char err[512], file[1024];
    kv_model *m = model_load(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "test_model: %s\n", err);
        return 1;
    }
    snprintf(file, sizeof file, "%s/p0_ids.txt", dir);
    FILE *f = fopen(file, "r");
    enum { MAX_IDS = 4096 };
    int32_t *ids = malloc(MAX_IDS * sizeof *ids);
    int n = 0;
    while (f && n < MAX_IDS && fscanf(f, "%d", &ids[n]) == 1) n++;
    if (f) fclose(f);
    model_set_f32_activations(m, !q8);   /* f32: the float64 reference's tolerance is f32's */
    int rc = n > 0 ? (model_set_prefill_chunk(m, n > 512 ? 64 : 5), dump_one(m, dir, 0, ids, n, 0)) : 1;
    if (!n) fprintf(stderr, "test_model: no ids in %s\n", file);
    if (!rc && !q8) rc = prefill_matches_decode(m, dir, ids, n);   /* an f32 comparison */
    free(ids);
    model_free(m);
    return rc;
}

/* The frequency table rope_setup builds for a random: preset's published RoPE scaling
 * (config.json parameters, no rope_freqs tensor: the path a Hugging Face checkpoint
 * takes), one "inv_freq" per line then "mscale", for model_ref.py's transformers formulas. */
static int rope_table(const char *preset) {
    static kv_model m;
    char err[256];
    if (random_model_shape(preset, &m.cfg, NULL)) {
        fprintf(stderr, "test_model: unknown preset %s\n", preset);
        return 1;
    }
    m.n_rot = m.cfg.head_dim;
    if (rope_setup(&m, err, sizeof err)) {
        fprintf(stderr, "test_model: %s\n", err);
        return 1;
    }
    printf("%s %g %d %d %.17g %.17g %.17g %d\n", rope_type_name(m.cfg.rope.type), m.cfg.rope_base, m.n_rot,
           m.cfg.n_ctx_train, m.cfg.rope.factor, m.cfg.rope.low_freq_factor, m.cfg.rope.high_freq_factor,
           m.cfg.rope.orig_ctx);
    for (int i = 0; i < m.n_rot / 2; i++) printf("%.17g\n", m.rope_inv_freq[i]);
    printf("%.17g\n", m.rope_mscale);
    return 0;
}

int main(int argc, char **argv) {
    const char *path = model_default_path();
    char err[512];
    if (argc == 2 && !strcmp(argv[1], "--print-path")) {
        printf("%s\n", path);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "--dump-model")) return dump_model(argv[2], argv[3], 0);
    if (argc == 4 && !strcmp(argv[1], "--dump-model-q8")) return dump_model(argv[2], argv[3], 1);
    if (argc == 3 && !strcmp(argv[1], "--rope-table")) return rope_table(argv[2]);
    if (access(path, R_OK)) {
        fprintf(stderr, "test_model: no model at %s: run `make model` (or set KVBENCH_MODEL)\n", path);
        return 1;
    }
    kv_model *m = model_load(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "test_model: %s\n", err);
        return 1;
    }
    if (argc == 3 && (!strcmp(argv[1], "--dump") || !strcmp(argv[1], "--dump-q8"))) {
        /* --dump: f32 activations, to the reference's f32 tolerance; --dump-q8: the
         * default 8-bit activations (model_ref.py --q8 reports how far they move) */
        model_set_f32_activations(m, !strcmp(argv[1], "--dump"));
        int rc = dump(m, argv[2]);
        model_free(m);
        return rc;
    }
    test_seed();
    /* These compare f32 paths to f32 tolerances (prefill's GEMMs against decode's mat-vecs;
     * the plain attention loop against FullKV's kernel): with 8-bit activations a 1e-7
     * difference can flip one rounding and move logits by ~1e-2 (model_ref.py --q8). */
    model_set_f32_activations(m, 1);
    test_prefill_matches_decode(m);   /* random ids */
    /* fixed prompts and files, no draw from the generator: the same for every seed */
    int fixed = !test_seed_only("the fixed prompts, the context limit and the malformed files");
    if (fixed) {
        test_plain_vs_fullkv(m, 1);
        test_plain_vs_fullkv(m, 0);
    }
    model_set_f32_activations(m, 0);
    test_chunked_prefill(m);   /* random ids */
    if (fixed) {
        test_answers_france(m);
        test_context_refused(m);
        test_malformed(m);
    }
    model_free(m);
    return check_done("test_model");
}
