/* Dataset prompt templates with middle truncation (see tc_build_from_template). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../kernels/strbuf.h"
#include "textcase.h"
#include "tokspan.h"

/* tpl[0..n) with each "{name}" of the given fields replaced (str.format-style, no escapes). */
static void fill(strbuf *b, const char *tpl, size_t n, const char *const *names, const char *const *values, int k) {
    for (size_t i = 0; i < n;) {
        int hit = -1;
        size_t L = 0;
        if (tpl[i] == '{')
            for (int f = 0; f < k && hit < 0; f++) {
                L = strlen(names[f]);
                if (i + L + 2 <= n && !strncmp(tpl + i + 1, names[f], L) && tpl[i + 1 + L] == '}') hit = f;
            }
        if (hit >= 0) { sb_puts(b, values[hit]); i += L + 2; }
        else sb_putc(b, tpl[i++]);
    }
}

int tc_build_from_template(tc_case *c, const kv_tokenizer *t, int use_chat, const char *tpl, const char *context,
                           const char *const *names, const char *const *values, int n, int max_tokens,
                           const char *answer_prefix, char *err, size_t errlen) {
    const char *at = strstr(tpl, "{context}");
    if (!at) { snprintf(err, errlen, "template has no {context}"); return -1; }
    strbuf body = {0};
    fill(&body, tpl, (size_t)(at - tpl), names, values, n);
    size_t pre = body.n;
    sb_puts(&body, context);
    size_t split = body.n;
    fill(&body, at + 9, strlen(at + 9), names, values, n);
    if (body.oom) { sb_free(&body); snprintf(err, errlen, "out of memory"); return -1; }
    size_t lo = body.n, hi = body.n;
    int ntok = 0;
    char *text = body.p;
    if (max_tokens > 0) {
        text = tokspan_truncate_middle(t, body.p, max_tokens, &lo, &hi, &ntok, err, errlen);
        if (!text) { sb_free(&body); return -1; }
    }
    size_t cut = hi - lo;                        /* where the context ends after the cut */
    size_t nsplit = hi <= split ? split - cut : lo >= split ? split : lo;
    size_t ctx_from = lo >= pre ? pre : lo;      /* the instruction before the context, if kept */
    char *bc = strndup(text, nsplit);
    char *ctx = strndup(text + ctx_from, nsplit > ctx_from ? nsplit - ctx_from : 0);
    int rc = -1;
    if (!bc || !ctx) snprintf(err, errlen, "out of memory");
    else if (tc_set_prompt(c, t, use_chat, bc, text + nsplit, answer_prefix)) snprintf(err, errlen, "out of memory");
    else {
        free(c->context);
        c->context = ctx;
        ctx = NULL;
        c->truncated = hi > lo;
        rc = 0;
    }
    free(bc);
    free(ctx);
    if (text != body.p) free(text);
    sb_free(&body);
    return rc;
}
