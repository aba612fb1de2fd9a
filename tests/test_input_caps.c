/* Regression tests of unbounded inputs (issue 14, item 7):
 *  - a JSONL line over JSONL_MAX_RECORD is skipped with a message naming its size, the
 *    lines around it still load (it used to be parsed and tokenised whole: 125 s, 5 GB
 *    for 100 MB);
 *  - middle truncation of a text far over the budget tokenises only a head and a tail,
 *    and cuts at exactly the bytes the full tokenisation cuts at (checked against the
 *    full tokenisation on fresh random texts built from the haystack and random UTF-8);
 *  - the synthetic memory estimate is the sum of its arrays (against a float64 count
 *    written out here) and refuses what the machine cannot hold.
 * The tokenizer checks need the default model (SKIP without it). */
#include <unistd.h>
#include "check.h"
#include "../harness/drivers/run_mem.h"
#include "../model/gguf.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "../workloads/haystack.h"
#include "../kernels/jsonl.h"
#include "../workloads/tokspan.h"

static int count_line(void *ctx, const json_value *v, int line, char *err, size_t errlen) {
    (void)v; (void)line; (void)err; (void)errlen;
    ++*(int *)ctx;
    return 0;
}

static void test_jsonl_cap(void) {
    char path[] = "/tmp/kvbench_caps_XXXXXX", logbuf[4096] = "";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "{\"a\": 1}\n{\"big\": \"");
    size_t big = (size_t)JSONL_MAX_RECORD + 1000;
    char *chunk = malloc(1 << 20);
    memset(chunk, 'x', 1 << 20);
    for (size_t w = 0; w < big; w += 1 << 20) fwrite(chunk, 1, (1 << 20) < big - w ? (1 << 20) : big - w, f);
    free(chunk);
    fprintf(f, "\"}\n{\"b\": 2}\n");
    fclose(f);
    FILE *log = fmemopen(logbuf, sizeof logbuf - 1, "w");
    jsonl_stats st;
    char err[512];
    int n = 0;
    int rc = jsonl_read(path, count_line, &n, &st, log, err, sizeof err);
    fclose(log);
    CHECK(rc == 0 && n == 2 && st.accepted == 2 && st.skipped == 1 && st.lines == 3, "rc %d, %d accepted, %d skipped, %d lines",
          rc, st.accepted, st.skipped, st.lines);
    char want[256];
    snprintf(want, sizeof want, "%s:2: record of %zu bytes is over the limit of 64 MiB per line; skipped", path, big + 11);
    CHECK(strstr(logbuf, want) != NULL, "log '%s', want '%s'", logbuf, want);
    unlink(path);
}

/* The cuts of the full tokenisation s of text (the reference: what truncation did before). */
static void full_cuts(const tok_spans *s, const char *text, size_t len, int max_tokens, size_t *lo, size_t *hi) {
    *lo = *hi = len;
    if (s->n > max_tokens) {
        *lo = tokspan_char_floor(text, len, s->off[max_tokens / 2]);
        *hi = tokspan_char_floor(text, len, s->off[s->n - max_tokens / 2]);
        if (*hi < *lo) *hi = *lo;
    }
}

static void test_truncation(const kv_tokenizer *t) {
    char err[512];
    size_t hay_len;
    char *hay = haystack_load(NULL, &hay_len, err, sizeof err);
    if (!hay) { printf("SKIP: truncation checks (%s)\n", err); return; }
    static const char *const extra[] = {" caf\xc3\xa9", " \xf0\x9f\x98\x80", "\n\n", "    ", " the", ".", " 42", "\xe4\xb8\xad\xe6\x96\x87"};
    for (int trial = 0; trial < 2; trial++) {
        /* ~2 MB: random slices of the essays with random words and UTF-8 between them */
        size_t cap = 2u << 20, n = 0;
        char *text = malloc(cap + 4096);
        while (n < cap) {
            uint64_t r = test_rng_state = test_rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t from = (r >> 20) % (hay_len - 4096), k = 64 + (r >> 8) % 2000;
            from = tokspan_char_floor(hay, hay_len, from);
            k = tokspan_char_floor(hay + from, hay_len - from, k);
            memcpy(text + n, hay + from, k);
            n += k;
            const char *e = extra[(r >> 4) % 8];
            memcpy(text + n, e, strlen(e));
            n += strlen(e);
        }
        text[n] = 0;
        tok_spans full;
        if (tokspan_encode(t, text, n, &full, err, sizeof err)) { CHECK(0, "%s", err); free(text); break; }
        int budgets[] = {64, 700, 3000};
        for (int b = 0; b < 3; b++) {
            size_t lo, hi, rlo, rhi;
            int ntok = 0;
            char *cut = tokspan_truncate_middle(t, text, budgets[b], &lo, &hi, &ntok, err, sizeof err);
            full_cuts(&full, text, n, budgets[b], &rlo, &rhi);
            CHECK(cut && ntok == -1, "budget %d: the whole %zu bytes were tokenised (%d tokens)", budgets[b], n, ntok);
            CHECK(lo == rlo && hi == rhi, "budget %d: cut [%zu, %zu), full tokenisation [%zu, %zu)", budgets[b], lo, hi, rlo, rhi);
            CHECK(cut && strlen(cut) == n - (hi - lo) && !memcmp(cut, text, lo) && !strcmp(cut + lo, text + hi), "spliced text");
            free(cut);
        }
        tokspan_free(&full);
        free(text);
    }
    /* a short text still takes the exact path with its token count */
    size_t lo, hi;
    int ntok = 0;
    char *cut = tokspan_truncate_middle(t, "Hello there, world.", 4, &lo, &hi, &ntok, err, sizeof err);
    CHECK(cut && ntok > 4 && lo < hi, "short text: %d tokens, cut [%zu, %zu)", ntok, lo, hi);
    free(cut);
    free(hay);
}

static void test_memory_estimate(void) {
    for (int i = 0; i < 20; i++) {
        uint64_t r = test_rng_state = test_rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        int L = 1 + r % 8, Hkv = 1 + (r >> 8) % 4, H = Hkv * (1 + (r >> 12) % 4), d = 8 << ((r >> 16) % 4);
        int ctx = 16 + (int)((r >> 20) % 100000), T = 1 + (r >> 40) % 64, win = (r >> 48) % 64;
        long double n = ctx + T, kv = (long double)L * Hkv * n * d * 2 * 4;
        long double method = 2.0L * L * Hkv * n * (2 * d * 4 + 12) + (long double)(H / Hkv) * n * 4 + 256 * n;
        long double want = kv + n * H * d * 4 + 2.0L * L * T * H * d * 4 + (long double)L * H * ctx * 4 +
                           (long double)L * H * (win < ctx ? win : ctx) * ctx * 4 + 16 * n + method;
        double got = run_mem_synthetic(L, H, Hkv, d, ctx, T, win);
        CHECK(fabsl(got - want) <= 1e-12L * want, "L%d H%d Hkv%d d%d ctx%d T%d win%d: %.17g vs %.17Lg", L, H, Hkv, d, ctx, T,
              win, got, want);
    }
    char err[256];
    double have = run_mem_physical();
    CHECK(have > 1e8, "physical memory %.0f", have);
    CHECK(run_mem_check(have / 2, "x", err, sizeof err) == 0, "half the memory refused");
    CHECK(run_mem_check(have * 1.01, "K/V", err, sizeof err) == -1 && strstr(err, "more than ") && strstr(err, "(K/V)"),
          "over the memory: %s", err);
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        printf("usage: test_input_caps   (JSONL record cap, truncation before tokenising, memory estimate)\n");
        return 0;
    }
    test_seed();
    test_jsonl_cap();
    test_memory_estimate();
    const char *model = model_default_path();
    gguf_file f;
    char err[512];
    kv_tokenizer *tok;
    if (access(model, R_OK)) printf("SKIP: truncation checks (%s is absent: make model)\n", model);
    else if (gguf_open(&f, model, err, sizeof err) || !(tok = tok_load(&f, err, sizeof err))) CHECK(0, "%s", err);
    else {
        test_truncation(tok);
        tok_free(tok);
        gguf_close(&f);
    }
    return check_done("test_input_caps");
}
