/* Chat prompts for one user turn, in the format the model's chat template uses
 * (recognised by its markers; no Jinja): ChatML (SmolLM2, Qwen2), Llama-3 headers,
 * Llama-2/Mistral [INST]. BOS is not included: the caller adds it if tok_add_bos. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"
#include "tok_pretok.h"

enum { CHAT_CHATML, CHAT_LLAMA3, CHAT_INST };

static int chat_format(const kv_tokenizer *t) {
    const char *tpl = t->chat_template;
    if (tpl && strstr(tpl, "<|im_start|>")) return CHAT_CHATML;
    if (tpl && strstr(tpl, "<|start_header_id|>")) return CHAT_LLAMA3;
    if (tpl && strstr(tpl, "[INST]")) return CHAT_INST;
    if (t->kind == TOK_SPM) return CHAT_INST;              /* no template: by family */
    return t->pre == PRE_LLAMA3 ? CHAT_LLAMA3 : CHAT_CHATML;
}

/* The system turn a ChatML template injects when the conversation has none: the literal
 * text between "<|im_start|>system" + newline and "<|im_end|>" (SmolLM2: "You are a
 * helpful AI assistant named SmolLM, trained by Hugging Face"; Qwen2: "You are a helpful
 * assistant."). Written into buf; 0 if the template has none. */
static int chatml_default_system(const kv_tokenizer *t, char *buf, size_t cap) {
    const char *tpl = t->chat_template;
    if (!tpl) {                                 /* no template: the family's default */
        const char *d = t->pre == PRE_SMOLLM ? "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
                      : t->pre == PRE_QWEN2  ? "You are a helpful assistant." : NULL;
        if (!d) return 0;
        snprintf(buf, cap, "%s", d);
        return 1;
    }
    for (const char *p = strstr(tpl, "<|im_start|>system"); p; p = strstr(p + 1, "<|im_start|>system")) {
        const char *q = p + strlen("<|im_start|>system");
        if (*q == '\n') q++;
        else if (q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        const char *e = strstr(q, "<|im_end|>");
        size_t n = e ? (size_t)(e - q) : 0;
        if (!n || n >= cap || memchr(q, '\'', n) || memchr(q, '{', n) || memchr(q, '"', n)) continue;
        memcpy(buf, q, n);                      /* a literal, not template code */
        buf[n] = 0;
        return 1;
    }
    return 0;
}

typedef struct { char *p; size_t n, cap; int oom; } sbuf;

static void put(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->oom || k < 0) { b->oom = 1; return; }
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t cap = 2 * (b->n + (size_t)k + 1);
        char *np = realloc(b->p, cap);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

char *tok_chat_prompt(const kv_tokenizer *t, const char *system, const char *user) {
    sbuf b = {0};
    char def[512];
    if (!user) user = "";
    switch (chat_format(t)) {
    case CHAT_CHATML:
        if (!system && chatml_default_system(t, def, sizeof def)) system = def;
        if (system) put(&b, "<|im_start|>system\n%s<|im_end|>\n", system);
        put(&b, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", user);
        break;
    case CHAT_LLAMA3:
        if (system) put(&b, "<|start_header_id|>system<|end_header_id|>\n\n%s<|eot_id|>", system);
        put(&b, "<|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n", user);
        break;
    default:
        if (system) put(&b, "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", system, user);
        else put(&b, "[INST] %s [/INST]", user);
        break;
    }
    if (b.oom) { free(b.p); return NULL; }
    return b.p;
}
