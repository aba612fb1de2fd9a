/* Tokenizer tests.
 *   test_tokenizer                      all checks: the real model's tokenizer (skipped
 *                                       with SKIP if the file is absent), then synthetic
 *                                       SentencePiece / BPE vocabularies written as GGUF
 *   test_tokenizer --encode-lines FILE [--model PATH]
 *                                       ids of each line of FILE (escaped as in
 *                                       tests/tokenizer_ref.py: \n \r \t \\ \xHH), one line
 *                                       each, no special-token parsing
 *   test_tokenizer --model-path         the default model path
 * The id-for-id comparison with an independent Python tokenizer is
 * tests/test_tokenizer_ref.sh. */
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "gguf_write.h"
#include "../model/gguf.h"
#include "../model/hf_load.h"
#include "../model/model.h"
#include "../model/tokenizer.h"

/* CPU time of this process: the encode-time limits guard against quadratic work, and wall
 * time on a shared machine failed them under load (test-seeds: 1.115 s for 0.3 s of work). */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Whole-sequence encode into a fresh array; *n gets the count. */
static int32_t *encode(const kv_tokenizer *t, const char *s, size_t len, int special, int *n) {
    *n = tok_encode(t, s, len, special, NULL, 0);
    int32_t *ids = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *ids);
    if (*n < 0 || !ids || tok_encode(t, s, len, special, ids, *n) != *n) {
        fprintf(stderr, "encode failed\n");
        exit(2);
    }
    return ids;
}

static char *decode(const kv_tokenizer *t, const int32_t *ids, int n, size_t *len) {
    size_t cap = 16 * (size_t)n + 16;
    char *buf = malloc(cap);
    if (!buf) exit(2);
    *len = (size_t)tok_decode(t, ids, n, buf, cap);
    return buf;
}

/* Strict UTF-8 check (for the streamed chunks). */
static int valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int k = s[i] < 0x80 ? 1 : (s[i] >> 5) == 6 ? 2 : (s[i] >> 4) == 14 ? 3 : (s[i] >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (int j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

static void show(const char *what, const char *s, size_t n) {
    fprintf(stderr, "%s [", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, (uint8_t)s[i] < 0x20 ? "\\x%02X" : "%c", (uint8_t)s[i]);
    fprintf(stderr, "]\n");
}

/* ---------- the real model (SmolLM2, pre-tokenizer smollm) ---------- */

static const char *FRAGS[] = {
    "Hello", " world", "!", " 123", "don't", " I'LL", "we've", "  ", "   ", "\n", "\r\n", "\t", " \t ",
    "caf\xC3\xA9", " na\xC3\xAFve", "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C", "\xE3\x81\x93\xE3\x82\x93",
    "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",
    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82", "x\xC2\xB2", "\xC2\xBD", "3.14159", "2024-01-31",
    "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; i++) {", "}", "#include <stdio.h>",
    "<|im_start|>", "...", "=====", "'s", "'", "a", "Z", "0", "\xC2\xA0", "\xE3\x80\x80", "$", "\\", "\"q\"",
};
#define NFRAGS ((int)(sizeof FRAGS / sizeof FRAGS[0]))

static void random_text(char *buf, size_t cap, size_t *len) {
    size_t n = 0;
    int k = test_int(1, 12);
    for (int i = 0; i < k; i++) {
        const char *f = FRAGS[test_int(0, NFRAGS - 1)];
        size_t fl = strlen(f);
        if (n + fl >= cap) break;
        memcpy(buf + n, f, fl);
        n += fl;
    }
    buf[n] = 0;
    *len = n;
}

static void check_roundtrip(const kv_tokenizer *t, const char *s, size_t len) {
    int n;
    int32_t *ids = encode(t, s, len, 0, &n);
    size_t dl;
    char *d = decode(t, ids, n, &dl);
    CHECK(dl == len && !memcmp(d, s, len), "round trip differs");
    if (dl != len || memcmp(d, s, len)) { show("  in ", s, len); show("  out", d, dl); }
    free(ids);
    free(d);
}

/* Expected ids reported by a third-party SmolLM2 implementation (model-format.md 6);
 * tests/test_tokenizer_ref.sh is the main check. */
static void check_ids(const kv_tokenizer *t, const char *s, const int32_t *want, int nwant) {
    int n;
    int32_t *ids = encode(t, s, strlen(s), 0, &n);
    int same = n == nwant;
    for (int i = 0; same && i < n; i++) same = ids[i] == want[i];
    CHECK(same, "ids of \"%s\" differ (got %d ids, first %d)", s, n, n ? ids[0] : -1);
    free(ids);
}

/* The text each id prints, joined with '|', for a readable comparison. */
static void pieces_of(const kv_tokenizer *t, const char *s, int special, char *out, size_t cap) {
    int n;
    int32_t *ids = encode(t, s, strlen(s), special, &n);
    size_t o = 0;
    for (int i = 0; i < n && o + 64 < cap; i++) {
        if (i) out[o++] = '|';
        int k = tok_piece(t, ids[i], 1, out + o, (int)(cap - o));
        o += k > 0 ? (size_t)k : 0;
    }
    out[o] = 0;
    free(ids);
}

static void test_real(const char *path) {
    gguf_file f;
    char err[512];
    if (access(path, R_OK)) {
        printf("SKIP real-model tokenizer tests: %s is absent (make model)\n", path);
        return;
    }
    if (gguf_open(&f, path, err, sizeof err)) { CHECK(0, "%s", err); return; }
    kv_tokenizer *t = tok_load(&f, err, sizeof err);
    gguf_close(&f);
    CHECK(t != NULL, "tok_load: %s", err);
    if (!t) return;
    CHECK(tok_vocab(t) == 49152, "vocab %d", tok_vocab(t));
    CHECK(tok_bos(t) == 1 && tok_eos(t) == 2 && tok_add_bos(t) == 0, "bos %d eos %d add_bos %d",
          tok_bos(t), tok_eos(t), tok_add_bos(t));

    /* documented ids (cross-check) */
    check_ids(t, "Hello world! 123", (int32_t[]){19556, 905, 17, 216, 33, 34, 35}, 7);
    check_ids(t, "\n", (int32_t[]){198}, 1);
    check_ids(t, "  multiple   spaces", (int32_t[]){216, 2701, 256, 5600}, 4);
    check_ids(t, "", NULL, 0);

    /* pre-tokenizer effects (model-format.md 5.3): digits alone, a space is not glued to them */
    char buf[4096];
    pieces_of(t, " 123", 0, buf, sizeof buf);
    CHECK(!strcmp(buf, " |1|2|3"), "\" 123\" pieces [%s]", buf);
    pieces_of(t, "a 2024, 7", 0, buf, sizeof buf);
    CHECK(!strcmp(buf, "a| |2|0|2|4|,| |7"), "\"a 2024, 7\" pieces [%s]", buf);

    /* round trips: fixed strings, then fresh random mixes */
    static const char *fixed[] = {
        "Hello world! 123", "  multiple   spaces", "\t\ttabs\tand\nnewlines\r\n\n", "   ", " ", "",
        "caf\xC3\xA9 cr\xC3\xA8me br\xC3\xBBl\xC3\xA9" "e", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE"
        "\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88", "\xF0\x9F\x98\x80\xF0\x9F\x8E\x89 emoji",
        "0123456789 3.14 1,000,000", "int main(void) {\n    return 0;\n}\n", "don't I'LL we've they're",
        "trailing spaces   ", "\xE2\x80\xA8\xC2\xA0\xE3\x80\x80", "<|im_start|>user\nhi<|im_end|>",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) check_roundtrip(t, fixed[i], strlen(fixed[i]));
    for (int r = 0; r < 300; r++) {
        size_t len;
        random_text(buf, sizeof buf, &len);
        check_roundtrip(t, buf, len);
    }

    /* invalid UTF-8: llama.cpp encodes each bad byte as U+FFFD (EF BF BD) */
    static const struct { const char *in, *out; } bad[] = {
        {"\xFF", "\xEF\xBF\xBD"},
        {"a\x80" "b", "a\xEF\xBF\xBD" "b"},
        {"\xE4\xBD", "\xEF\xBF\xBD\xEF\xBF\xBD"},            /* truncated 3-byte character */
        {"\xF0\x9F\x98", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"x\xC3(", "x\xEF\xBF\xBD("},                         /* lead byte, no continuation */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int n;
        size_t dl;
        int32_t *ids = encode(t, bad[i].in, strlen(bad[i].in), 0, &n);
        char *d = decode(t, ids, n, &dl);
        CHECK(dl == strlen(bad[i].out) && !memcmp(d, bad[i].out, dl), "invalid UTF-8 case %zu", i);
        free(ids);
        free(d);
    }

    /* count-only call, and a too-small buffer: the count comes back, nothing past cap written */
    {
        const char *s = "The quick brown fox jumps over the lazy dog, 42 times.";
        int n;
        int32_t *full = encode(t, s, strlen(s), 0, &n), part[64];
        for (int i = 0; i < 64; i++) part[i] = -7;
        int cap = n / 2;
        CHECK(tok_encode(t, s, strlen(s), 0, part, cap) == n, "count with small cap");
        int ok = 1;
        for (int i = 0; i < 64; i++) ok &= i < cap ? part[i] == full[i] : part[i] == -7;
        CHECK(ok, "small-cap call wrote wrong ids or past cap");
        free(full);
    }

    /* special tokens: text unless parse_special; pieces of control tokens print only on request */
    {
        int n;
        int32_t *ids = encode(t, "<|im_start|>", 12, 1, &n);
        CHECK(n == 1 && ids[0] == 1, "parse_special: %d ids, first %d", n, n ? ids[0] : -1);
        free(ids);
        ids = encode(t, "<|im_start|>", 12, 0, &n);
        int has1 = 0;
        for (int i = 0; i < n; i++) has1 |= ids[i] == 1;
        CHECK(n > 1 && !has1, "without parse_special the text is BPE-encoded (%d ids)", n);
        free(ids);
        char p[32];
        CHECK(tok_piece(t, 1, 0, p, sizeof p) == 0 && p[0] == 0, "control piece without show_special");
        CHECK(tok_piece(t, 1, 1, p, sizeof p) == 12 && !strcmp(p, "<|im_start|>"), "control piece shown: %s", p);
        CHECK(tok_piece(t, 19556, 0, p, sizeof p) == 5 && !strcmp(p, "Hello"), "piece 19556: %s", p);
        CHECK(tok_piece(t, 216, 0, p, sizeof p) == 1 && p[0] == ' ', "piece 216");
        CHECK(tok_piece(t, -1, 0, p, sizeof p) == -1 && tok_piece(t, 49152, 0, p, sizeof p) == -1, "bad id");
        pieces_of(t, "a<|im_end|>b<|endoftext|><|im_start|>", 1, buf, sizeof buf);
        CHECK(!strcmp(buf, "a|<|im_end|>|b|<|endoftext|>|<|im_start|>"), "specials in text: [%s]", buf);
    }

    /* stop ids: eos 2 (<|im_end|>) and 0 (<|endoftext|>) */
    CHECK(tok_is_stop(t, 2) && tok_is_stop(t, 0), "stop ids 0 and 2");
    CHECK(!tok_is_stop(t, 1) && !tok_is_stop(t, 19556) && !tok_is_stop(t, 198), "non-stop ids");
    for (int i = 0; i < 100; i++) {
        int id = test_int(3, 49151);
        CHECK(!tok_is_stop(t, id), "id %d is not a stop", id);
    }

    /* chat prompt: the ChatML turn with SmolLM2's default system (model-format.md 4) */
    {
        const char *want = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                           "<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";
        char *p = tok_chat_prompt(t, NULL, "What is 2+2?");
        CHECK(p && !strcmp(p, want), "chat prompt: [%s]", p ? p : "(null)");
        int n;
        int32_t *ids = encode(t, p, strlen(p), 1, &n);
        int n1 = 0, n2 = 0;
        for (int i = 0; i < n; i++) { n1 += ids[i] == 1; n2 += ids[i] == 2; }
        CHECK(n > 0 && ids[0] == 1 && n1 == 3 && n2 == 2, "chat ids: first %d, %d x <|im_start|>, %d x <|im_end|>",
              n ? ids[0] : -1, n1, n2);
        size_t o = 0;
        for (int i = 0; i < n; i++) o += (size_t)tok_piece(t, ids[i], 1, buf + o, (int)(sizeof buf - o));
        CHECK(o == strlen(want) && !memcmp(buf, want, o), "chat prompt pieces rebuild the text");
        size_t dl;
        char *d = decode(t, ids + n - 3, 3, &dl);
        CHECK(dl >= 10 && !strcmp(d + dl - 10, "assistant\n"), "ends with assistant\\n: [%s]", d);
        free(d);
        free(ids);
        free(p);
        p = tok_chat_prompt(t, "Be brief.", "Hi");
        CHECK(p && !strcmp(p, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                               "<|im_start|>assistant\n"), "chat prompt with a system: [%s]", p ? p : "(null)");
        free(p);
    }

    /* streaming: every chunk is whole UTF-8 characters; together they are the decode */
    for (int r = 0; r < 50; r++) {
        size_t len, dl, sl = 0;
        random_text(buf, sizeof buf, &len);
        int n;
        int32_t *ids = encode(t, buf, len, 0, &n);
        char *d = decode(t, ids, n, &dl), streamed[4096], chunk[256];
        tok_stream st;
        tok_stream_init(&st);
        int ok = 1;
        for (int i = 0; i < n; i++) {
            int k = tok_stream_next(t, &st, ids[i], 0, chunk, sizeof chunk);
            ok &= k >= 0 && valid_utf8((uint8_t *)chunk, (size_t)k);
            if (k > 0) { memcpy(streamed + sl, chunk, (size_t)k); sl += (size_t)k; }
        }
        int k = tok_stream_flush(&st, chunk, sizeof chunk);
        CHECK(k == 0, "nothing pending at the end of valid text");
        CHECK(ok && sl == dl && !memcmp(streamed, d, dl), "streamed text differs");
        /* a truncated decode stops at a character boundary */
        char small[24];
        int m = tok_decode(t, ids, n, small, sizeof small);
        CHECK(m >= 0 && m < (int)sizeof small && (size_t)m <= dl && !memcmp(small, d, (size_t)m) &&
              valid_utf8((uint8_t *)small, (size_t)m) && (dl < sizeof small ? (size_t)m == dl : m >= (int)sizeof small - 4),
              "truncated decode (%d of %zu bytes)", m, dl);
        free(ids);
        free(d);
    }

    /* speed: 100 KB of license text (or the fragment mixes), and one 100 KB word */
    {
        size_t cap = 100 * 1024, len = 0;
        char *big = malloc(cap + 1);
        static const char *files[] = {"/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0",
                                      "/usr/share/common-licenses/GFDL-1.3", "/usr/share/common-licenses/Artistic"};
        for (size_t i = 0; i < 4 && len < cap; i++) {
            FILE *fp = fopen(files[i], "rb");
            if (!fp) continue;
            len += fread(big + len, 1, cap - len, fp);
            fclose(fp);
        }
        while (len < cap) {
            size_t fl;
            random_text(buf, sizeof buf, &fl);
            if (fl > cap - len) fl = cap - len;
            memcpy(big + len, buf, fl);
            len += fl;
        }
        double t0 = now_s();
        int n = tok_encode(t, big, len, 0, NULL, 0);
        double dt = now_s() - t0;
        printf("encode %zu bytes of text: %d tokens in %.3f s\n", len, n, dt);
        CHECK(n > 0 && dt < 1.0, "100 KB encode took %.3f s", dt);
        memset(big, 'a', len);
        t0 = now_s();
        n = tok_encode(t, big, len, 0, NULL, 0);
        dt = now_s() - t0;
        printf("encode one %zu-byte word: %d tokens in %.3f s\n", len, n, dt);
        CHECK(n > 0 && dt < 1.0, "100 KB single-piece encode took %.3f s", dt);
        free(big);
    }
    tok_free(t);
}

/* ---------- synthetic vocabularies written as GGUF files ---------- */

static char tmpdir[64];

typedef struct {
    const char *model, *pre, *tpl;
    int n;
    const char **tok;
    const int32_t *type;    /* NULL: all normal */
    const float *score;     /* NULL: none */
    int nmerge;
    const char **merges;
    int bos, eos, unk;      /* -1: absent */
} synth;

static kv_tokenizer *synth_load(const synth *s, char *err, size_t errlen) {
    static int count;
    gw_buf b = {0};
    int nkv = 3 + (s->pre != NULL) + (s->tpl != NULL) + (s->type != NULL) + (s->score != NULL) +
              (s->merges != NULL) + (s->bos >= 0) + (s->eos >= 0) + (s->unk >= 0);
    gw_header(&b, 3, 0, (uint64_t)nkv);
    gw_kv_str(&b, "general.architecture", "llama");
    gw_kv_str(&b, "tokenizer.ggml.model", s->model);
    if (s->pre) gw_kv_str(&b, "tokenizer.ggml.pre", s->pre);
    if (s->tpl) gw_kv_str(&b, "tokenizer.chat_template", s->tpl);
    gw_kv_arr(&b, "tokenizer.ggml.tokens", 8, (uint64_t)s->n);
    for (int i = 0; i < s->n; i++) gw_str(&b, s->tok[i]);
    if (s->type) {
        gw_kv_arr(&b, "tokenizer.ggml.token_type", 5, (uint64_t)s->n);
        for (int i = 0; i < s->n; i++) gw_u32(&b, (uint32_t)s->type[i]);
    }
    if (s->score) {
        gw_kv_arr(&b, "tokenizer.ggml.scores", 6, (uint64_t)s->n);
        for (int i = 0; i < s->n; i++) gw_f32(&b, s->score[i]);
    }
    if (s->merges) {
        gw_kv_arr(&b, "tokenizer.ggml.merges", 8, (uint64_t)s->nmerge);
        for (int i = 0; i < s->nmerge; i++) gw_str(&b, s->merges[i]);
    }
    if (s->bos >= 0) gw_kv_u32(&b, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos);
    if (s->eos >= 0) gw_kv_u32(&b, "tokenizer.ggml.eos_token_id", (uint32_t)s->eos);
    if (s->unk >= 0) gw_kv_u32(&b, "tokenizer.ggml.unknown_token_id", (uint32_t)s->unk);
    gw_align(&b, 32);
    char path[128];
    snprintf(path, sizeof path, "%s/synth%d.gguf", tmpdir, count++);
    gguf_file f;
    kv_tokenizer *t = NULL;
    if (gw_save(&b, path)) snprintf(err, errlen, "cannot write %s", path);
    else if (!gguf_open(&f, path, err, errlen)) {
        t = tok_load(&f, err, errlen);
        gguf_close(&f);
    }
    gw_free(&b);
    unlink(path);
    return t;
}

/* SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces over
 * {U+2581, a, b, c, d}. */
#define SPM_BASE 259
#define SPM_MAX 400
typedef struct { const char *tok[SPM_MAX]; char store[SPM_MAX][24]; int32_t type[SPM_MAX]; float score[SPM_MAX]; int n; } spm_vocab;

static int spm_add(spm_vocab *v, const char *s, float score, int type) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->tok[i], s)) return i;
    snprintf(v->store[v->n], sizeof v->store[0], "%s", s);
    v->tok[v->n] = v->store[v->n];
    v->score[v->n] = score;
    v->type[v->n] = type;
    return v->n++;
}

static void spm_base(spm_vocab *v) {
    v->n = 0;
    spm_add(v, "<unk>", 0, 2);
    spm_add(v, "<s>", 0, 3);
    spm_add(v, "</s>", 0, 3);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        spm_add(v, s, 0, 6);
    }
}

static int spm_find(const spm_vocab *v, const char *s, size_t n) {
    for (int i = SPM_BASE; i < v->n; i++)
        if (strlen(v->tok[i]) == n && !memcmp(v->tok[i], s, n)) return i;
    return -1;
}

/* Naive reference: repeatedly merge the adjacent pair whose concatenation is a piece of
 * highest score (leftmost on ties); leftovers become byte tokens. */
static int spm_ref(const spm_vocab *v, const char *text, int32_t *out) {
    char s[512];
    size_t n = 0;
    memcpy(s, "\xE2\x96\x81", 3);
    n = 3;
    for (const char *p = text; *p; p++) {
        if (*p == ' ') { memcpy(s + n, "\xE2\x96\x81", 3); n += 3; }
        else s[n++] = *p;
    }
    int start[512], len[512], ns = 0;
    for (size_t p = 0; p < n;) {
        uint8_t c = (uint8_t)s[p];
        int k = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        start[ns] = (int)p;
        len[ns++] = k;
        p += (size_t)k;
    }
    for (;;) {
        int best = -1;
        float bs = 0;
        for (int i = 0; i + 1 < ns; i++) {
            int id = spm_find(v, s + start[i], (size_t)(len[i] + len[i + 1]));
            if (id >= 0 && (best < 0 || v->score[id] > bs)) { best = i; bs = v->score[id]; }
        }
        if (best < 0) break;
        len[best] += len[best + 1];
        memmove(start + best + 1, start + best + 2, (size_t)(ns - best - 2) * sizeof *start);
        memmove(len + best + 1, len + best + 2, (size_t)(ns - best - 2) * sizeof *len);
        ns--;
    }
    int m = 0;
    for (int i = 0; i < ns; i++) {
        int id = spm_find(v, s + start[i], (size_t)len[i]);
        if (id >= 0) out[m++] = id;
        else
            for (int j = 0; j < len[i]; j++) out[m++] = 3 + (uint8_t)s[start[i] + j];
    }
    return m;
}

static void test_spm(void) {
    char err[512];
    spm_vocab *v = calloc(1, sizeof *v);
    /* hand-checked case: "ab" -> ab (-0.5) beats ▁a (-2), then ▁ab (-0.1) */
    spm_base(v);
    int u = spm_add(v, "\xE2\x96\x81", -1, 1), a = spm_add(v, "a", -1, 1), b = spm_add(v, "b", -1, 1);
    int ua = spm_add(v, "\xE2\x96\x81" "a", -2, 1), ab = spm_add(v, "ab", -0.5f, 1);
    int uab = spm_add(v, "\xE2\x96\x81" "ab", -0.1f, 1);
    synth s = {"llama", NULL, "[INST] {{ messages }} [/INST]", v->n, v->tok, v->type, v->score, 0, NULL, 1, 2, 0};
    kv_tokenizer *t = synth_load(&s, err, sizeof err);
    CHECK(t != NULL, "SPM load: %s", err);
    if (t) {
        int n;
        int32_t *ids = encode(t, "ab", 2, 0, &n);
        CHECK(n == 1 && ids[0] == uab, "\"ab\" -> [▁ab] (got %d ids)", n);
        free(ids);
        ids = encode(t, "a b", 3, 0, &n);
        CHECK(n == 3 && ids[0] == ua && ids[1] == u && ids[2] == b, "\"a b\" -> [▁a ▁ b]");
        free(ids);
        ids = encode(t, "c\xC3\xA9", 3, 0, &n);   /* no pieces: ▁ then byte fallback */
        CHECK(n == 4 && ids[0] == u && ids[1] == 3 + 'c' && ids[2] == 3 + 0xC3 && ids[3] == 3 + 0xA9,
              "byte fallback (%d ids)", n);
        size_t dl;
        char *d = decode(t, ids, n, &dl);
        CHECK(dl == 3 && !memcmp(d, "c\xC3\xA9", 3), "byte fallback decodes back");
        free(d);
        free(ids);
        ids = encode(t, "<s>ab", 5, 1, &n);
        CHECK(n == 2 && ids[0] == 1 && ids[1] == uab, "<s> parsed, space prefix after it");
        free(ids);
        CHECK(tok_add_bos(t) == 1 && tok_bos(t) == 1 && tok_is_stop(t, 2) && !tok_is_stop(t, a), "SPM ids");
        (void)ab;
        char *p = tok_chat_prompt(t, NULL, "Hi");
        CHECK(p && !strcmp(p, "[INST] Hi [/INST]"), "[INST] prompt: [%s]", p ? p : "");
        free(p);
        p = tok_chat_prompt(t, "S", "Hi");
        CHECK(p && !strcmp(p, "[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST]"), "[INST] prompt with system: [%s]", p ? p : "");
        free(p);
        tok_free(t);
    }

    /* random vocabularies (scores with ties) and texts against the naive reference */
    static const char *alpha[] = {"\xE2\x96\x81", "a", "b", "c", "d"};
    static const char *chars[] = {"a", "b", "c", "d", " ", "\xC3\xA9", "\xE4\xB8\xAD", "e"};
    for (int trial = 0; trial < 20; trial++) {
        spm_base(v);
        for (int i = 0; i < 5; i++) spm_add(v, alpha[i], -(float)test_int(0, 5), 1);
        for (int i = 0; i < 80; i++) {
            char w[24] = "";
            int k = test_int(2, 5);
            for (int j = 0; j < k; j++) strcat(w, alpha[test_int(0, 4)]);
            spm_add(v, w, -(float)test_int(0, 5) * 0.5f, 1);
        }
        synth s2 = {"llama", NULL, NULL, v->n, v->tok, v->type, v->score, 0, NULL, 1, 2, 0};
        t = synth_load(&s2, err, sizeof err);
        CHECK(t != NULL, "SPM random load: %s", err);
        if (!t) break;
        for (int r = 0; r < 30; r++) {
            char text[128] = "";
            int k = test_int(0, 30);
            for (int j = 0; j < k; j++) strcat(text, chars[test_int(0, 7)]);
            int32_t want[512];
            int nw = spm_ref(v, text, want), n;
            int32_t *ids = encode(t, text, strlen(text), 0, &n);
            int same = n == nw;
            for (int i = 0; same && i < n; i++) same = ids[i] == want[i];
            CHECK(same || !*text, "SPM ids differ from the reference for [%s] (%d vs %d ids)", text, n, nw);
            size_t dl;
            char *d = decode(t, ids, n, &dl);
            CHECK(dl == strlen(text) && !memcmp(d, text, dl), "SPM round trip [%s] -> [%s]", text, d);
            free(d);
            free(ids);
        }
        tok_free(t);
    }
    free(v);
}

/* Byte-level BPE vocabulary: the 256 mapped bytes, then the given extra tokens. */
typedef struct { const char *tok[300]; char store[256][4]; int32_t type[300]; int n; } bpe_vocab;

static void bpe_base(bpe_vocab *v) {
    int next = 0x100;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int cp = keep ? b : next++;
        char *s = v->store[b];
        if (cp < 0x80) { s[0] = (char)cp; s[1] = 0; }
        else { s[0] = (char)(0xC0 | cp >> 6); s[1] = (char)(0x80 | (cp & 0x3F)); s[2] = 0; }
        v->tok[b] = s;
        v->type[b] = 1;
    }
    v->n = 256;
}

static int bpe_add(bpe_vocab *v, const char *s, int type) {
    v->tok[v->n] = s;
    v->type[v->n] = type;
    return v->n++;
}

static void test_bpe_synth(void) {
    char err[512];
    bpe_vocab *v = calloc(1, sizeof *v);
    bpe_base(v);
    int aa = bpe_add(v, "aa", 1), ab = bpe_add(v, "ab", 1);
    int eot = bpe_add(v, "<|eot_id|>", 3), udt = bpe_add(v, "<tool>", 4);
    static const char *merges[] = {"a b", "a a"};
    synth s = {"gpt2", "llama-bpe", "{{ '<|start_header_id|>' + role }}", v->n, v->tok, v->type, NULL, 2, merges, -1, -1, -1};
    kv_tokenizer *t = synth_load(&s, err, sizeof err);
    CHECK(t != NULL, "BPE load: %s", err);
    if (t) {
        int n;
        int32_t *ids = encode(t, "aaa", 3, 0, &n);   /* equal ranks: the leftmost pair merges first */
        CHECK(n == 2 && ids[0] == aa && ids[1] == 'a', "\"aaa\" -> [aa a]");
        free(ids);
        ids = encode(t, "aaab", 4, 0, &n);           /* "a b" (rank 0) before "a a" (rank 1) */
        CHECK(n == 2 && ids[0] == aa && ids[1] == ab, "\"aaab\" -> [aa ab]");
        free(ids);
        ids = encode(t, "a<tool>b", 8, 0, &n);       /* user-defined: always its id (llama.cpp) */
        CHECK(n == 3 && ids[1] == udt, "user-defined token without parse_special");
        free(ids);
        CHECK(tok_is_stop(t, eot), "<|eot_id|> stops Llama-3");
        CHECK(tok_add_bos(t) == 1, "llama3 adds BOS by default");
        char *p = tok_chat_prompt(t, NULL, "Hi");
        CHECK(p && !strcmp(p, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                               "<|start_header_id|>assistant<|end_header_id|>\n\n"), "Llama-3 prompt: [%s]", p ? p : "");
        free(p);
        p = tok_chat_prompt(t, "S", "Hi");
        const char *sys = "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user";
        CHECK(p && !strncmp(p, sys, strlen(sys)),
              "Llama-3 prompt with system: [%s]", p ? p : "");
        free(p);
        tok_free(t);
    }

    /* Qwen2: ChatML with its default system (template literal with an escaped \n) */
    bpe_base(v);
    int ime = bpe_add(v, "<|im_end|>", 3), eot2 = bpe_add(v, "<|endoftext|>", 3);
    bpe_add(v, "<|im_start|>", 3);
    int twelve = bpe_add(v, "12", 1);
    static const char *qmerges[] = {"a b", "a a", "1 2"};
    synth q = {"gpt2", "qwen2",
               "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
               "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
               "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
               v->n, v->tok, v->type, NULL, 3, qmerges, -1, eot2, -1};
    t = synth_load(&q, err, sizeof err);
    CHECK(t != NULL, "qwen2 load: %s", err);
    if (t) {
        CHECK(tok_is_stop(t, ime) && tok_is_stop(t, eot2) && !tok_is_stop(t, 'a'), "qwen2 stop ids");
        char *p = tok_chat_prompt(t, NULL, "Hi");
        CHECK(p && !strcmp(p, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi"
                               "<|im_end|>\n<|im_start|>assistant\n"), "Qwen2 prompt: [%s]", p ? p : "");
        free(p);
        int n;
        int32_t *ids = encode(t, "x 12345", 7, 0, &n);   /* qwen2: one digit per piece, so no "12" */
        int has12 = 0;
        for (int i = 0; i < n; i++) has12 |= ids[i] == twelve;
        CHECK(n == 7 && !has12, "qwen2 digits: %d ids", n);
        free(ids);
        ids = encode(t, "12", 2, 0, &n);
        CHECK(n == 2, "qwen2 \"12\": %d ids", n);
        free(ids);
        tok_free(t);
    }

    /* refusals, each naming what is wrong */
    s.pre = "no-such-pre";
    t = synth_load(&s, err, sizeof err);
    CHECK(!t && strstr(err, "no-such-pre") && strstr(err, "tokenizer.ggml.pre"), "unknown pre: %s", err);
    tok_free(t);
    s.pre = "smollm";
    s.model = "bert";
    t = synth_load(&s, err, sizeof err);
    CHECK(!t && strstr(err, "'bert'") && strstr(err, "tokenizer.ggml.model"), "unknown model: %s", err);
    tok_free(t);
    s.model = "gpt2";
    s.merges = NULL;
    t = synth_load(&s, err, sizeof err);
    CHECK(!t && strstr(err, "tokenizer.ggml.merges"), "missing merges: %s", err);
    tok_free(t);
    s.merges = merges;
    s.eos = v->n + 5;
    t = synth_load(&s, err, sizeof err);
    CHECK(!t && strstr(err, "eos_token_id"), "eos outside the vocabulary: %s", err);
    tok_free(t);
    s.eos = -1;
    static const char *bad_merges[] = {"ab"};
    s.merges = bad_merges;
    s.nmerge = 1;
    t = synth_load(&s, err, sizeof err);
    CHECK(!t && strstr(err, "merges[0]"), "merge without a space: %s", err);
    tok_free(t);
    free(v);
}

/* ---------- --encode-lines ---------- */

static size_t unescape(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) { out[o++] = s[i]; continue; }
        char c = s[++i];
        if (c == 'n') out[o++] = '\n';
        else if (c == 'r') out[o++] = '\r';
        else if (c == 't') out[o++] = '\t';
        else if (c == 'x' && i + 2 < n) {
            unsigned v;
            sscanf(s + i + 1, "%2x", &v);
            out[o++] = (char)v;
            i += 2;
        } else out[o++] = c;
    }
    return o;
}

static int encode_lines(const char *file, const char *model) {
    FILE *fp = fopen(file, "rb");
    if (!fp) { fprintf(stderr, "%s: cannot open\n", file); return 1; }
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *data = malloc((size_t)size + 1), *line = malloc((size_t)size + 1);
    if (!data || !line || fread(data, 1, (size_t)size, fp) != (size_t)size) { fprintf(stderr, "%s: read failed\n", file); return 1; }
    fclose(fp);
    gguf_file f;
    char err[512];
    /* a Hugging Face directory: its tokenizer.json (tests/test_hf_tokenizer.sh) */
    if ((hf_is_dir(model) ? hf_open_tokenizer(&f, model, err, sizeof err) : gguf_open(&f, model, err, sizeof err))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    kv_tokenizer *t = tok_load(&f, err, sizeof err);
    gguf_close(&f);
    if (!t) { fprintf(stderr, "%s\n", err); return 1; }
    for (long p = 0; p < size;) {
        char *nl = memchr(data + p, '\n', (size_t)(size - p));
        size_t ll = nl ? (size_t)(nl - data - p) : (size_t)(size - p);
        size_t n = unescape(data + p, ll, line);
        int cnt;
        int32_t *ids = encode(t, line, n, 0, &cnt);
        for (int i = 0; i < cnt; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
        free(ids);
        p += (long)ll + 1;
    }
    tok_free(t);
    free(data);
    free(line);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = model_default_path(), *lines = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: test_tokenizer [--model PATH] [--encode-lines FILE] [--model-path]\n"
                   "  no arguments: run the tokenizer tests (real model, then synthetic vocabularies)\n"
                   "  --encode-lines FILE: ids of each escaped line of FILE (see tests/tokenizer_ref.py)\n"
                   "  --model-path: print the default model path\n");
            return 0;
        } else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--encode-lines") && i + 1 < argc) lines = argv[++i];
        else if (!strcmp(argv[i], "--model-path")) { printf("%s\n", model); return 0; }
        else { fprintf(stderr, "test_tokenizer: unknown argument '%s' (see --help)\n", argv[i]); return 2; }
    }
    if (lines) return encode_lines(lines, model);
    test_seed();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_tokenizer.XXXXXX");
    if (!mkdtemp(tmpdir)) { fprintf(stderr, "mkdtemp failed\n"); return 2; }
    test_real(model);
    test_spm();
    test_bpe_synth();
    rmdir(tmpdir);
    return check_done("test_tokenizer");
}
