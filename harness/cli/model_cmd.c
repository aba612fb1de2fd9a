/* `kvbench info` (describe a GGUF model) and `kvbench generate` (answer a prompt,
 * with the model's attention going through a KV-cache method). */
#include "commands.h"
#include "../../kernels/core.h"
#include "../../model/model.h"
#include "../../methods/method.h"
#include "../../model/hf_load.h"
#include "../../model/quant.h"
#include "../../kernels/cli_opt.h"
#ifdef KB_CUDA
#include "../../kernels/cuda_mem.h"
#include "../../model/cuda_model.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static kv_model *open_model(const char *path) {
    char err[512], named[1024];   /* a short model name (model_resolve_name) */
    if (!(path = model_resolve_name(path, named, sizeof named, err, sizeof err))) {
        fprintf(stderr, "kvbench: %s\n", err);
        return NULL;
    }
    if (strncmp(path, "random:", 7) && access(path, R_OK)) {
        fprintf(stderr, "kvbench: no model at %s: run `make model` or pass --model PATH\n", path);
        return NULL;
    }
    kv_model *m = model_load(path, err, sizeof err);
    if (!m) fprintf(stderr, "kvbench: %s\n", err);
    return m;
}

/* The value after flag argv[*i], or NULL with a message. */
static int parse_int(const char *flag, const char *s, int lo, int hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "kvbench: %s '%s' must be an integer in [%d, %d]\n", flag, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* The RoPE scaling line of `kvbench info`, "none" included. */
static void rope_print(const kv_model_config *c) {
    const kv_rope_scaling *r = &c->rope;
    printf("%-14s %s", "rope scaling", rope_type_name(r->type));
    if (r->type != KV_ROPE_NONE) printf(", factor %g", r->factor);
    if (r->type == KV_ROPE_LLAMA3 && !r->freq_factors)
        printf(", low/high freq factor %g/%g", r->low_freq_factor, r->high_freq_factor);
    if (r->type == KV_ROPE_LLAMA3 || r->type == KV_ROPE_YARN) printf(", original context %d", r->orig_ctx);
    if (r->type == KV_ROPE_YARN)
        printf(", attention factor %g, beta fast/slow %g/%g", r->attn_factor > 0 ? r->attn_factor : rope_yarn_mscale(r->factor),
               r->beta_fast > 0 ? r->beta_fast : 32, r->beta_slow > 0 ? r->beta_slow : 1);
    if (r->freq_factors) printf("%sper-pair divisors from rope_freqs", r->type == KV_ROPE_NONE ? ": " : "; ");
    printf("\n");
}

int cmd_info(int argc, char **argv) {
    const char *path = model_default_path();
    static const char *const bare[] = {"--help", "-h", NULL}, *const valued[] = {"--model", NULL};
    for (int i = 1; i < argc; i++) {
        char a[64];
        const char *v;
        if (kb_opt_read("info", argc, argv, &i, bare, valued, 0, a, sizeof a, &v)) return 2;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: kvbench info [--model PATH]\n\n"
                   "Describe a model: architecture, shape, quantization, KV bytes per token.\n"
                   "  --model PATH   GGUF file or Hugging Face directory (docs/hf-checkpoints.md)\n"
                   "                 (default $KVBENCH_MODEL or the `make model` cache:\n"
                   "                 %s)\n", model_default_path());
            return 0;
        } else path = v;   /* --model */
    }
    kv_model *m = open_model(path);
    if (!m) return 2;   /* a missing, unreadable or unsupported model file is bad input */
    const kv_model_config *c = model_config(m);
    const gguf_file *f = model_gguf(m);
    printf("%-14s %s\n", "file", path);
    char hf[160];
    if (hf_describe(f, hf, sizeof hf)) printf("%-14s %s, %lld tensors\n", "size", hf, (long long)f->n_tensors);
    else printf("%-14s %.1f MB, GGUF v%u, %lld tensors\n", "size", f->size / 1048576.0, f->version,
                (long long)f->n_tensors);
    printf("%-14s %s\n", "architecture", c->arch);
    printf("%-14s %s\n", "name", c->name[0] ? c->name : "(none)");
    printf("%-14s %d\n", "layers", c->n_layer);
    printf("%-14s %d (kv heads %d, group %d)\n", "heads", c->n_head, c->n_head_kv, c->n_head / c->n_head_kv);
    printf("%-14s %d\n", "head dim", c->head_dim);
    printf("%-14s %d\n", "embedding", c->n_embd);
    printf("%-14s %d\n", "ffn", c->n_ff);
    printf("%-14s %d\n", "vocab", c->n_vocab);
    if (c->n_ctx_train < c->n_ctx_file)
        printf("%-14s %d (the file's %d, capped at its attention sliding window: no window mask)\n", "context",
               c->n_ctx_train, c->n_ctx_file);
    else printf("%-14s %d\n", "context", c->n_ctx_train);
    printf("%-14s %g (%s)\n", "rope base", c->rope_base, strcmp(c->arch, "qwen2") ? "adjacent pairs" : "neox halves");
    rope_print(c);
    printf("%-14s %g\n", "norm eps", c->norm_eps);
    printf("%-14s %s\n", "qkv bias", c->has_qkv_bias ? "yes" : "no");
    printf("%-14s %.1f M (%lld)\n", "parameters", c->n_params / 1e6, (long long)c->n_params);
    /* tensor types in order of first appearance, with counts */
    int types[64], counts[64], nt = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        int t = f->tensors[i].type, j = 0;
        while (j < nt && types[j] != t) j++;
        if (j == nt && nt < 64) types[nt] = t, counts[nt++] = 0;
        if (j < nt) counts[j]++;
    }
    printf("%-14s", "tensor types");
    for (int j = 0; j < nt; j++) printf(" %s x%d%s", quant_name(types[j]), counts[j], j + 1 < nt ? "," : "");
    printf("\n");
    long kv = 2L * c->n_layer * c->n_head_kv * c->head_dim;
    printf("%-14s %ld B f32, %ld B bf16 (%.0f MB f32 at the full context)\n", "KV per token", kv * 4, kv * 2,
           kv * 4.0 * c->n_ctx_train / 1048576.0);
    model_free(m);
    return 0;
}

static void generate_usage(void) {
    printf("usage: kvbench generate [--model FILE] --prompt TEXT [--chat] [--max-tokens N]\n"
           "                        [--method M] [--budget B] [--params k=v,..] [--threads N] [--plain]\n"
           "                        [--backend cpu|cuda] [--kv-type f32|f16|bf16]\n"
           "                        [--activations f32|q8]\n\n"
           "Greedy answer to a prompt; attention goes through a KV-cache method.\n"
           "  --model FILE      GGUF file or Hugging Face directory (default %s)\n"
           "  --prompt TEXT     the prompt\n"
           "  --chat            wrap the prompt in the model's chat template\n"
           "  --max-tokens N    tokens to generate at most (default 128)\n"
           "  --method M        KV-cache method (default: the reference, FullKV; `kvbench methods` lists them)\n"
           "  --budget B        kept fraction of the prompt in (0,1], or a token count > 1 (default 0.1;\n"
           "                    the reference ignores it)\n"
           "  --params k=v,..   the method's parameter overrides\n"
           "  --threads N       worker threads (default: online CPUs)\n"
           "  --backend NAME    cpu or cuda (default cpu): where the forward pass runs (cuda: make\n"
           "                    CUDA=1 and a device; without one a note, then the CPU). With --plain\n"
           "                    only the prefill moves to the device\n"
           "  --kv-type T       the method's K/V rows as f32 (default), f16 or bf16 (attention computes\n"
           "                    in f32); 16-bit needs a method (not --plain)\n"
           "  --activations A   f32 (default; logits as the references) or q8: decode mat-vecs on 8-bit\n"
           "                    activation blocks with int8 dot products, as llama.cpp (CPU only)\n"
           "  --plain           the engine's own full cache instead of a method (a cross-check)\n"
           "Text goes to stdout as it is generated; statistics to stderr.\n",
           model_default_path());
}

static void stream_token(void *ctx, int id) {
    char buf[256];
    int n = tok_piece(ctx, id, 0, buf, sizeof buf);
    fwrite(buf, 1, n < (int)sizeof buf ? n : (int)sizeof buf - 1, stdout);
    fflush(stdout);
}

static void list_methods(FILE *out) {
    for (int i = 0; i < kv_method_count(); i++) fprintf(out, "%s%s", i ? ", " : "", kv_method_at(i)->name);
}

/* Prompt ids (chat template and parse_special with --chat; BOS if the model asks). */
static int32_t *encode_prompt(const kv_tokenizer *t, const char *text, int chat, int *n) {
    char *chat_text = chat ? tok_chat_prompt(t, NULL, text) : NULL;
    if (chat && !chat_text) return NULL;
    const char *s = chat ? chat_text : text;
    int bos = !chat && tok_add_bos(t), cap = (int)strlen(s) + 2;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    int k = ids ? tok_encode(t, s, strlen(s), chat, ids + bos, cap - bos) : -1;
    free(chat_text);
    if (k < 0 || k > cap - bos) {
        free(ids);
        return NULL;
    }
    if (bos) ids[0] = tok_bos(t);
    *n = k + bos;
    return ids;
}

/* The timings line both generate paths print (stderr, after the text). */
static void print_timings(const kv_gen_stats *st) {
    fprintf(stderr, "prefill %.1f tok/s (%.2f s), decode %.1f tok/s (%d steps, %.2f s)\n",
            st->prefill_s > 0 ? st->n_prompt / st->prefill_s : 0.0, st->prefill_s,
            st->decode_s > 0 ? st->n_steps / st->decode_s : 0.0, st->n_steps, st->decode_s);
}

int cmd_generate(int argc, char **argv) {
    const char *path = model_default_path(), *prompt = NULL, *method = NULL, *params = NULL, *backend = "cpu";
    int chat = 0, max_tokens = 128, threads = 0, plain = 0, kv_type = KB_F32, q8 = 0;
    double budget = 0.1;
    static const char *const bare[] = {"--help", "-h", "--chat", "--plain", NULL},
                             *const valued[] = {"--model", "--prompt", "--max-tokens", "--method", "--budget",
                                                "--params", "--threads", "--backend", "--kv-type", "--activations",
                                                NULL};
    for (int i = 1; i < argc; i++) {
        char a[64];
        const char *v;
        if (kb_opt_read("generate", argc, argv, &i, bare, valued, 0, a, sizeof a, &v)) return 2;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            generate_usage();
            return 0;
        } else if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "--plain")) plain = 1;
        else {
            if (!strcmp(a, "--model")) path = v;
            else if (!strcmp(a, "--prompt")) prompt = v;
            else if (!strcmp(a, "--method")) method = v;
            else if (!strcmp(a, "--params")) params = v;
            else if (!strcmp(a, "--backend")) backend = v;
            else if (!strcmp(a, "--kv-type")) {
                if (kb_kvtype_parse(v, &kv_type)) {
                    fprintf(stderr, "kvbench generate: --kv-type '%s': expected f32, f16 or bf16\n", v);
                    return 2;
                }
            } else if (!strcmp(a, "--activations")) {
                if (model_activations_parse(v, &q8)) {
                    fprintf(stderr, "kvbench generate: --activations '%s': expected f32 or q8\n", v);
                    return 2;
                }
            } else if (!strcmp(a, "--max-tokens")) {
                if (parse_int(a, v, 1, 1 << 20, &max_tokens)) return 2;
            } else if (!strcmp(a, "--threads")) {
                if (parse_int(a, v, 1, 1024, &threads)) return 2;
            } else {
                char *end;
                budget = strtod(v, &end);
                if (!*v || *end || !(budget > 0) || (budget > 1 && budget != (int)budget) || budget > 1e9) {
                    fprintf(stderr, "kvbench: --budget '%s' must be a fraction in (0,1] or a whole token count\n", v);
                    return 2;
                }
            }
        }
    }
    if (!prompt) {
        fprintf(stderr, "kvbench generate: --prompt TEXT is required (see --help)\n");
        return 2;
    }
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda")) {
        fprintf(stderr, "kvbench generate: --backend '%s': expected cpu or cuda\n", backend);
        return 2;
    }
    if (q8 && !strcmp(backend, "cuda")) {
        fprintf(stderr, "kvbench generate: --activations q8 needs --backend cpu (the CUDA engine reads f32)\n");
        return 2;
    }
    if (kv_type != KB_F32 && plain) {
        fprintf(stderr, "kvbench generate: --kv-type %s needs a method (--plain keeps the engine's own f32 rows)\n",
                kb_kvtype_name(kv_type));
        return 2;
    }
    const kv_method *meth = method ? kv_method_find(method) : kv_method_reference();
    if (!method) method = meth ? meth->name : "(none)";
    if (!plain && !meth) {
        fprintf(stderr, "kvbench generate: unknown method '%s' (methods: ", method);
        list_methods(stderr);
        fprintf(stderr, ")\n");
        return 2;
    }
    char err[512];
    if (!plain && params && kv_param_check(meth, params, err, sizeof err)) {
        fprintf(stderr, "kvbench generate: --params: %s\n", err);
        return 2;
    }
    if (threads) kb_set_threads(threads);
    const char *why = NULL;
    if (!strcmp(backend, "cuda") && kb_select("cuda", &why)) {
        fprintf(stderr, "kvbench generate: --backend cuda: %s; running on the CPU\n", why ? why : "not available");
        backend = "cpu";
    }
    if (!strcmp(backend, "cpu")) kb_select("cpu", NULL);
    kv_model *m = open_model(path);
    if (!m) return 2;   /* a missing, unreadable or unsupported model file is bad input */
    model_set_f32_activations(m, !q8);
    const kv_tokenizer *tok = model_tokenizer(m);
    int n = 0, rc = 1;
    int32_t *ids = encode_prompt(tok, prompt, chat, &n), *out = malloc((size_t)max_tokens * sizeof *out);
    if (!ids || !out || n == 0) {
        fprintf(stderr, "kvbench generate: could not tokenise the prompt%s\n", ids && !n ? " (it is empty)" : "");
        goto done;
    }
    kv_gen_stats st;
    if (plain) {
        int k = model_generate_plain(m, ids, n, max_tokens, out, &st, err, sizeof err);
        if (k < 0) {
            fprintf(stderr, "kvbench generate: %s\n", err);
            goto done;
        }
        for (int i = 0; i < k; i++) stream_token((void *)tok, out[i]);
        printf("\n");
        fprintf(stderr, "plain full cache, prompt %d tokens, generated %d, %d threads\n", n, k, kb_threads());
        print_timings(&st);
        rc = 0;
        goto done;
    }
    kv_setup s = {.budget_frac = budget <= 1 ? budget : 0, .budget_tokens = budget > 1 ? (int)budget : 0,
                  .kv_type = kv_type, .params = params};
    int k = model_generate_method(m, meth, &s, ids, n, max_tokens, out, stream_token, (void *)tok, &st,
                                  err, sizeof err);
    printf("\n");
    fflush(stdout);
    if (k < 0) {
        fprintf(stderr, "kvbench generate: %s\n", err);
        goto done;
    }
    fprintf(stderr, "method %s, prompt %d tokens, generated %d, %d threads\n", meth->name, n, k, kb_threads());
    print_timings(&st);
    fprintf(stderr, "memory: fast %.2f MB (peak %.2f, aux %.2f), slow %.2f MB (peak %.2f), %ld fast K/V rows\n",
            st.mem.fast_bytes / 1048576.0, st.mem.fast_peak / 1048576.0, st.mem.fast_aux_bytes / 1048576.0,
            st.mem.slow_bytes / 1048576.0, st.mem.slow_peak / 1048576.0, st.mem.fast_tokens);
#ifdef KB_CUDA
    cuda_model_info info;
    size_t peak = 0;
    if (!strcmp(backend, "cuda") && cuda_model_info_get(m, &info) == 0 && kb_cuda_mem_stats(NULL, &peak, NULL, NULL) == 0)
        fprintf(stderr, "device: prefill %.1f ms (CUDA events), weights %.1f MB (bf16), allocator peak %.1f MB, "
                "in use at the prefill's peak %.1f MB\n", info.prefill_ms, info.weight_bytes / 1048576.0,
                peak / 1048576.0, info.used_bytes / 1048576.0);
#endif
    rc = 0;
done:
    free(ids);
    free(out);
#ifdef KB_CUDA
    cuda_model_release(m);
#endif
    model_free(m);
    return rc;
}
