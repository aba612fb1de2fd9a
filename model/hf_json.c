/* JSON files of a Hugging Face directory (see hf_internal.h). */
#include "hf_internal.h"
#include "../kernels/host.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hf_fail(char *err, size_t errlen, const char *dir, const char *name, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (name[0]) snprintf(err, errlen, "%s/%s: %s", dir, name, msg);
    else snprintf(err, errlen, "%s: %s", dir, msg);
    return -1;
}

int hf_read_json(const char *dir, const char *name, int optional, json_value *v, char **text, size_t *len,
                 char *err, size_t errlen) {
    char path[1024], why[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n;
    char *buf = kb_read_file_capped(path, KB_CAP_JSON, &n, why, sizeof why);
    if (!buf) {
        if (optional && errno == ENOENT) return 1;
        return hf_fail(err, errlen, dir, name, "%s", why);
    }
    char jerr[200];
    if (json_parse(buf, n, v, jerr, sizeof jerr)) {
        free(buf);
        return hf_fail(err, errlen, dir, name, "not valid JSON: %s", jerr);
    }
    if (v->type != JSON_OBJECT) {
        json_free(v);
        free(buf);
        return hf_fail(err, errlen, dir, name, "not a JSON object");
    }
    if (text) *text = buf, *len = n;
    else free(buf);
    return 0;
}

int hf_num(const json_value *obj, const char *key, double *out) {
    const json_value *v = json_get(obj, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER) return -1;
    *out = v->num;
    return 1;
}

const char *hf_str(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_STRING ? v->str : NULL;
}
