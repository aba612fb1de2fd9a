/* The text workloads of `kvbench run --model` (see model_workload.h). */
#include "model_workload.h"
#include "../../workloads/gsm8k.h"
#include "../../workloads/haystack.h"
#include "../../workloads/infinitebench.h"
#include "../../workloads/longbench.h"
#include "../../workloads/niah.h"
#include "../../workloads/ruler.h"
#include "../../workloads/ruler_qa.h"
#include "../../kernels/host.h"
#include <errno.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const FORMS = "niah, ruler, ruler:TASK[,TASK..], longbench:DIR, infinitebench:DIR, gsm8k:FILE";

int mw_parse(const char *spec, mw_spec *out, char *err, size_t errlen) {
    static const struct {
        const char *name;
        mw_kind kind;
        int arg;   /* 0 none, 1 optional, 2 required */
    } kinds[] = {{"niah", MW_NIAH, 0},
                 {"ruler", MW_RULER, 1},
                 {"longbench", MW_LONGBENCH, 2},
                 {"infinitebench", MW_INFINITEBENCH, 2},
                 {"gsm8k", MW_GSM8K, 2}};
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strlen(kinds[i].name) != len || strncmp(spec, kinds[i].name, len)) continue;
        const char *arg = colon ? colon + 1 : "";
        if (kinds[i].arg == 0 && colon) {
            snprintf(err, errlen, "--workload '%s': %s takes no ':' argument (valid: %s)", spec, kinds[i].name, FORMS);
            return -1;
        }
        if (kinds[i].arg == 2 && !*arg) {
            snprintf(err, errlen, "--workload '%s': %s needs a %s after ':' (valid: %s)", spec, kinds[i].name,
                     kinds[i].kind == MW_GSM8K ? "test JSONL file" : "data directory", FORMS);
            return -1;
        }
        if (strlen(arg) >= sizeof out->arg) {
            snprintf(err, errlen, "--workload '%.40s...': argument too long", spec);
            return -1;
        }
        out->kind = kinds[i].kind;
        out->name = kinds[i].name;
        snprintf(out->arg, sizeof out->arg, "%s", !strcmp(arg, "all") && out->kind == MW_RULER ? "" : arg);
        if (out->kind == MW_RULER && *out->arg) {   /* every task must exist before anything loads */
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", out->arg);
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (ruler_task_index(t) < 0) {
                    char valid[512] = "";
                    for (int k = 0; k < RULER_N_TASKS; k++) {
                        size_t n = strlen(valid);
                        snprintf(valid + n, sizeof valid - n, "%s%s", k ? ", " : "", ruler_task_name(k));
                    }
                    snprintf(err, errlen, "--workload '%s': unknown RULER task '%s' (valid: %s)", spec, t, valid);
                    return -1;
                }
        }
        return 0;
    }
    snprintf(err, errlen, "--workload '%s': unknown workload (valid: %s, or synthetic-niah, synthetic-multikey, "
             "synthetic-multivalue without --model)", spec, FORMS);
    return -1;
}

int mw_ctx_is_length(mw_kind k) { return k == MW_NIAH || k == MW_RULER; }

int mw_max_new(const mw_spec *s) {
    int mx = 0;
    switch (s->kind) {
    case MW_NIAH: mx = NIAH_MAX_NEW; break;
    case MW_RULER:
        for (int i = 0; i < RULER_N_TASKS; i++) mx = ruler_task_max_new(i) > mx ? ruler_task_max_new(i) : mx;
        break;
    case MW_LONGBENCH:
        for (int i = 0; i < LB_N_TASKS; i++) mx = lb_task_max_new(i) > mx ? lb_task_max_new(i) : mx;
        break;
    case MW_INFINITEBENCH:
        for (int i = 0; i < IB_N_TASKS; i++) mx = ib_task_max_new(i) > mx ? ib_task_max_new(i) : mx;
        break;
    case MW_GSM8K: mx = GSM_MAX_NEW; break;
    }
    return s->max_new > 0 && s->max_new < mx ? s->max_new : mx;
}

/* FNV-1a 64 of the text: the haystack's identity in the run key. */
static uint64_t fnv64(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

void mw_niah_ident(const mw_spec *s, char *buf, size_t n) {
    char needle[32] = "classic", prefix[32] = "none";
    if (s->needle || s->question || s->answers) {
        uint64_t h = 1469598103934665603ull;       /* FNV-1a over the three texts, NUL-separated */
        const char *t[3] = {s->needle ? s->needle : NIAH_NEEDLE, s->question ? s->question : NIAH_QUESTION,
                            s->answers ? s->answers : NIAH_ANSWERS};
        for (int k = 0; k < 3; k++)
            for (const char *p = t[k];; p++) {
                h = (h ^ (unsigned char)*p) * 1099511628211ull;
                if (!*p) break;
            }
        snprintf(needle, sizeof needle, "%016llx", (unsigned long long)h);
    }
    if (s->answer_prefix && *s->answer_prefix)
        snprintf(prefix, sizeof prefix, "%s", !strcmp(s->answer_prefix, NIAH_ANSWER_PREFIX) ? "kvcache-factory" :
                 "custom");
    snprintf(buf, n, "split:%s/needles:%d/samples:%d/needle:%s/prefix:%s", s->split ? "dev" : "test",
             s->needles > 0 ? s->needles : 1, s->samples > 0 ? s->samples : 1, needle, prefix);
    if (!strcmp(prefix, "custom")) {             /* the prefix text itself, hashed */
        uint64_t h = 1469598103934665603ull;
        for (const char *p = s->answer_prefix; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
        size_t k = strlen(buf);
        snprintf(buf + k, n > k ? n - k : 0, ":%016llx", (unsigned long long)h);
    }
}

/* The niah_opts of the spec (tokenizer and haystack aside). */
static void niah_opts_of(const mw_spec *s, niah_opts *o) {
    niah_defaults(o);
    o->question_after = s->question_after;
    if (s->max_new > 0) o->max_new_tokens = s->max_new;
    o->needle = s->needle;
    o->question = s->question;
    o->answers = s->answers;
    o->answer_prefix = s->answer_prefix;
    o->needles = s->needles > 0 ? s->needles : 1;
    o->split = s->split ? NIAH_DEV : NIAH_TEST;
}

int mw_niah_check(const mw_spec *s, char *err, size_t errlen) {
    niah_opts o;
    niah_opts_of(s, &o);
    if (s->samples < 0 || s->samples > NIAH_MAX_SAMPLES) {
        snprintf(err, errlen, "--samples %d: expected 1..%d", s->samples, NIAH_MAX_SAMPLES);
        return -1;
    }
    return niah_check(&o, err, errlen);
}

/* Lengths outer, then depths, then samples (each sample's haystack start is its own builder). */
static int load_niah(const mw_spec *s, const kv_tokenizer *tok, const char *hay, size_t hay_len, tc_list *out,
                     char *err, size_t errlen) {
    niah_opts o;
    niah_opts_of(s, &o);
    o.tok = tok;
    o.haystack = hay;
    o.haystack_len = hay_len;
    int longest = 0, ns = s->samples > 0 ? s->samples : 1, rc = 0;
    for (int i = 0; i < s->n_ctx; i++) longest = s->ctxs[i] > longest ? s->ctxs[i] : longest;
    niah_builder *b[NIAH_MAX_SAMPLES] = {0};
    for (int k = 0; k < ns && !rc; k++) {
        o.sample = k;
        if (!(b[k] = niah_open(&o, longest, err, errlen))) rc = -1;
    }
    for (int i = 0; i < s->n_ctx && !rc; i++)
        for (int j = 0; j < s->n_depths && !rc; j++)
            for (int k = 0; k < ns && !rc; k++) {
                tc_case c;
                if (niah_build(b[k], s->ctxs[i], s->depths[j], &c, err, errlen)) rc = -1;
                else if (tc_list_push(out, &c)) { snprintf(err, errlen, "niah: out of memory"); rc = -1; }
            }
    for (int k = 0; k < ns; k++) niah_close(b[k]);
    while (rc == 0 && s->limit > 0 && out->n > s->limit) tc_case_free(&out->v[--out->n]);
    return rc;
}

void mw_ruler_tasks(const mw_spec *s, int run[], int *qa_skipped) {
    *qa_skipped = 0;
    for (int t = 0; t < RULER_N_TASKS; t++) {
        run[t] = 0;
        if (*s->arg) {   /* only the listed tasks, in the order of the task table */
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", s->arg);
            for (char *save = NULL, *w = strtok_r(buf, ",", &save); w && !run[t]; w = strtok_r(NULL, ",", &save))
                run[t] = ruler_task_index(w) == t;
        } else if (ruler_task_qa(t) && !s->qa_data) {
            *qa_skipped = 1;
        } else {
            run[t] = 1;
        }
    }
}

int mw_tasks_check(const mw_spec *s, char *err, size_t errlen) {
    if (!s->tasks) return 0;
    return s->kind == MW_LONGBENCH ? lb_check_tasks(s->tasks, err, errlen)
         : s->kind == MW_INFINITEBENCH ? ib_check_tasks(s->tasks, err, errlen) : 0;
}

int mw_qa_check(const mw_spec *s, char *err, size_t errlen) {
    int run[RULER_N_TASKS], skipped;
    mw_ruler_tasks(s, run, &skipped);
    for (int t = 0; t < RULER_N_TASKS; t++) {
        int qa = run[t] ? ruler_task_qa(t) : 0;
        if (!qa) continue;
        if (!s->qa_data) {
            snprintf(err, errlen, "ruler:%s needs --qa-data DIR holding %s (%s)", ruler_task_name(t), ruler_qa_file(qa == 1),
                     qa == 1 ? "SQuAD 2.0 dev, dev-v2.0.json" : "HotpotQA dev distractor, hotpot_dev_distractor_v1.json");
            return -1;
        }
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", s->qa_data, ruler_qa_file(qa == 1));
        char why[160];
        FILE *f = kb_fopen_regular(path, KB_CAP_DEFAULT, why, sizeof why);   /* a FIFO would block fopen */
        if (!f) {
            snprintf(err, errlen, "--qa-data %s: ruler:%s reads %s, which %s (%s: save %s under this name)",
                     s->qa_data, ruler_task_name(t), path, errno == ENOENT ? "cannot be opened" : why,
                     qa == 1 ? "SQuAD 2.0 dev" : "HotpotQA dev distractor",
                     qa == 1 ? "dev-v2.0.json" : "hotpot_dev_distractor_v1.json");
            return -1;
        }
        fclose(f);
    }
    return 0;
}

/* FNV-1a 64 of a file's bytes (the qa data's identity in the run key); 0 if unreadable. */
static uint64_t file_fnv(const char *path) {
    char why[160];
    FILE *f = kb_fopen_regular(path, KB_CAP_DEFAULT, why, sizeof why);
    if (!f) return 0;
    uint64_t h = 1469598103934665603ull;
    int c;
    while ((c = getc(f)) != EOF) h = (h ^ (unsigned char)c) * 1099511628211ull;
    fclose(f);
    return h;
}

static int load_ruler(const mw_spec *s, const kv_tokenizer *tok, const char *hay, size_t hay_len, tc_list *out,
                      char *ident, size_t identlen, char *err, size_t errlen) {
    ruler_opts o;
    ruler_defaults(&o);
    o.tok = tok;
    o.essays = hay;
    o.essays_len = hay_len;
    o.seed = s->seed;
    o.split = s->split;
    o.question_after = s->question_after;
    int samples = s->limit > 0 ? s->limit : 1, run[RULER_N_TASKS], skipped, rc = 0;
    mw_ruler_tasks(s, run, &skipped);
    ruler_qa_data *qd[2] = {NULL, NULL};
    for (int t = 0; t < RULER_N_TASKS && !rc; t++) {
        int qa = run[t] ? ruler_task_qa(t) : 0;
        if (!qa || qd[qa - 1]) continue;
        if (!(qd[qa - 1] = ruler_qa_load(s->qa_data, qa == 1, err, errlen))) rc = -1;
        else {
            size_t k = strlen(ident);
            snprintf(ident + k, identlen - k, "%s%s=%016llx", k ? ";" : "", qa == 1 ? "squad" : "hotpotqa",
                     (unsigned long long)file_fnv(qd[qa - 1]->path));
        }
    }
    o.squad = qd[0];
    o.hotpot = qd[1];
    if (!rc && skipped && s->log_notes)
        fprintf(stderr, "kvbench run: ruler: qa_1 and qa_2 need --qa-data DIR (SQuAD squad.json, HotpotQA "
                        "hotpotqa.json); running the %d synthetic tasks\n", RULER_N_SYNTHETIC);
    for (int t = 0; t < RULER_N_TASKS && !rc; t++) {
        if (!run[t]) continue;
        for (int i = 0; i < s->n_ctx && !rc; i++)
            if (ruler_generate(&o, t, s->ctxs[i], samples, out, err, errlen)) rc = -1;
    }
    ruler_qa_free(qd[0]);
    ruler_qa_free(qd[1]);
    return rc;
}

/* Text of the haystack if the workload uses one; *hay NULL otherwise. */
static int need_haystack(const mw_spec *s) {
    if (s->kind == MW_NIAH) return 1;
    if (s->kind != MW_RULER) return 0;
    for (int t = 0; t < RULER_N_TASKS; t++) {
        if (!ruler_task_needs_essays(t)) continue;
        if (!*s->arg) return 1;
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", s->arg);
        for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save))
            if (ruler_task_index(w) == t) return 1;
    }
    return 0;
}

int mw_load(const mw_spec *s, const kv_tokenizer *tok, tc_list *out, char *ident, size_t identlen, char *err,
            size_t errlen) {
    memset(out, 0, sizeof *out);
    *ident = 0;
    char *hay = NULL;
    size_t hay_len = 0;
    if (need_haystack(s)) {
        hay = haystack_load(s->haystack, &hay_len, err, errlen);
        if (!hay) return -1;
        snprintf(ident, identlen, "haystack=%016llx", (unsigned long long)fnv64(hay, hay_len));
    }
    int rc = -1;
    switch (s->kind) {
    case MW_NIAH: rc = load_niah(s, tok, hay, hay_len, out, err, errlen); break;
    case MW_RULER: rc = load_ruler(s, tok, hay ? hay : "", hay_len, out, ident, identlen, err, errlen); break;
    case MW_LONGBENCH: {
        lb_opts o;
        lb_defaults(&o);
        o.tok = tok;
        o.max_tokens = s->truncate;
        o.question_after = s->question_after;
        o.limit = s->limit;
        rc = lb_load_dir(&o, s->arg, s->tasks, out, err, errlen);
        break;
    }
    case MW_INFINITEBENCH: {
        ib_opts o;
        ib_defaults(&o);
        o.tok = tok;
        o.max_tokens = s->truncate;
        o.question_after = s->question_after;
        o.limit = s->limit;
        rc = ib_load_dir(&o, s->arg, s->tasks, out, err, errlen);
        break;
    }
    case MW_GSM8K: {
        gsm_opts o;
        gsm_defaults(&o);
        o.tok = tok;
        if (s->shots >= 0) o.n_shots = s->shots;
        o.shots_path = s->shots_file;
        o.question_after = s->question_after;
        o.limit = s->limit;
        rc = gsm_load(&o, s->arg, out, err, errlen);
        if (rc == 0) snprintf(ident, identlen, "shots=%d", o.n_shots);
        break;
    }
    }
    if (rc == 0 && (s->kind == MW_LONGBENCH || s->kind == MW_INFINITEBENCH || s->kind == MW_GSM8K)) {
        char real[PATH_MAX];
        size_t used = strlen(ident);
        snprintf(ident + used, identlen - used, "%sdata=%s", used ? ";" : "",
                 realpath(s->arg, real) ? real : s->arg);
    }
    if (rc == 0 && out->n == 0) {
        snprintf(err, errlen, "--workload %s%s%s: no cases to run", s->name, *s->arg ? ":" : "", s->arg);
        rc = -1;
    }
    if (rc) tc_list_free(out);
    free(hay);
    return rc;
}
