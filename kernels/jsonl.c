/* Strict JSON parsing and JSONL reading (see jsonl.h). Recursive descent with a depth
 * limit; every error names what was expected and the byte column. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "jsonl.h"
#include "host.h"
#include "strbuf.h"
#include "utf8.h"

enum { JSON_MAX_DEPTH = 200 };

typedef struct {
    const char *s;
    size_t n, i;
    int depth;
    char *err;
    size_t errlen;
    int failed;
} parser;

static int fail(parser *p, size_t at, const char *what) {
    if (!p->failed) snprintf(p->err, p->errlen, "%s at column %zu", what, at + 1);
    p->failed = 1;
    return -1;
}

static void skip_ws(parser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static void put_utf8(strbuf *b, uint32_t cp) {
    char t[4];
    int k;
    if (cp < 0x80) { t[0] = (char)cp; k = 1; }
    else if (cp < 0x800) { t[0] = (char)(0xC0 | cp >> 6); t[1] = (char)(0x80 | (cp & 0x3F)); k = 2; }
    else if (cp < 0x10000) { t[0] = (char)(0xE0 | cp >> 12); t[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); t[2] = (char)(0x80 | (cp & 0x3F)); k = 3; }
    else { t[0] = (char)(0xF0 | cp >> 18); t[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); t[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); t[3] = (char)(0x80 | (cp & 0x3F)); k = 4; }
    sb_putn(b, t, (size_t)k);
}

static int hex4(parser *p, uint32_t *out) {
    if (p->i + 4 > p->n) return fail(p, p->n, "unexpected end of input in \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i + k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail(p, p->i + k, "expected 4 hex digits after \\u");
        v = v * 16 + (uint32_t)d;
    }
    p->i += 4;
    *out = v;
    return 0;
}

/* At the opening quote. */
static int parse_string(parser *p, char **out, size_t *len) {
    strbuf b = {0};
    size_t start = p->i++;
    for (;;) {
        if (p->i >= p->n) { sb_free(&b); return fail(p, start, "unterminated string starting"); }
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') { p->i++; break; }
        if (c < 0x20) { sb_free(&b); return fail(p, p->i, "control character in string"); }
        if (c == '\\') {
            if (p->i + 1 >= p->n) { sb_free(&b); return fail(p, p->n, "unexpected end of input in escape"); }
            char e = p->s[p->i + 1];
            p->i += 2;
            const char *map = strchr("\"\\/bfnrt", e);
            if (e && map) { sb_putc(&b, "\"\\/\b\f\n\r\t"[map - "\"\\/bfnrt"]); continue; }
            if (e != 'u') { sb_free(&b); return fail(p, p->i - 1, "invalid escape"); }
            uint32_t cp;
            size_t at = p->i - 2;
            if (hex4(p, &cp)) { sb_free(&b); return -1; }
            if (cp >= 0xDC00 && cp <= 0xDFFF) { sb_free(&b); return fail(p, at, "unpaired low surrogate"); }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (p->i + 2 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') { sb_free(&b); return fail(p, at, "unpaired high surrogate"); }
                p->i += 2;
                if (hex4(p, &lo)) { sb_free(&b); return -1; }
                if (lo < 0xDC00 || lo > 0xDFFF) { sb_free(&b); return fail(p, at, "unpaired high surrogate"); }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(&b, cp);
            continue;
        }
        int L = utf8_len((const unsigned char *)p->s + p->i, p->n - p->i);
        if (!L) { sb_free(&b); return fail(p, p->i, "invalid UTF-8"); }
        sb_putn(&b, p->s + p->i, (size_t)L);
        p->i += (size_t)L;
    }
    *len = b.n;
    *out = sb_take(&b);
    if (!*out) return fail(p, start, "out of memory");
    return 0;
}

static int parse_number(parser *p, double *out) {
    size_t s = p->i, i = p->i;
    const char *t = p->s;
    if (i < p->n && t[i] == '-') i++;
    if (i >= p->n || t[i] < '0' || t[i] > '9') return fail(p, i, "invalid number");
    if (t[i] == '0') i++;
    else while (i < p->n && t[i] >= '0' && t[i] <= '9') i++;
    if (i < p->n && t[i] == '.') {
        i++;
        if (i >= p->n || t[i] < '0' || t[i] > '9') return fail(p, i, "expected a digit after '.'");
        while (i < p->n && t[i] >= '0' && t[i] <= '9') i++;
    }
    if (i < p->n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < p->n && (t[i] == '+' || t[i] == '-')) i++;
        if (i >= p->n || t[i] < '0' || t[i] > '9') return fail(p, i, "expected a digit in the exponent");
        while (i < p->n && t[i] >= '0' && t[i] <= '9') i++;
    }
    char buf[64], *tmp = i - s < sizeof buf ? buf : malloc(i - s + 1);
    if (!tmp) return fail(p, s, "out of memory");
    memcpy(tmp, t + s, i - s);
    tmp[i - s] = 0;
    *out = strtod(tmp, NULL);
    if (tmp != buf) free(tmp);
    p->i = i;
    return 0;
}

static int parse_value(parser *p, json_value *v);

static int push_item(parser *p, json_value *v, int *cap, size_t at) {
    if (v->n == *cap) {
        int nc = *cap ? 2 * *cap : 4;
        json_value *ni = realloc(v->items, (size_t)nc * sizeof *ni);
        if (!ni) return fail(p, at, "out of memory");
        v->items = ni;
        if (v->type == JSON_OBJECT) {
            char **nk = realloc(v->keys, (size_t)nc * sizeof *nk);
            if (!nk) return fail(p, at, "out of memory");
            v->keys = nk;
        }
        *cap = nc;
    }
    return 0;
}

static int parse_container(parser *p, json_value *v, int object) {
    char close = object ? '}' : ']';
    int cap = 0;
    v->type = object ? JSON_OBJECT : JSON_ARRAY;
    if (++p->depth > JSON_MAX_DEPTH) return fail(p, p->i, "nesting too deep");
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; return 0; }
    for (;;) {
        skip_ws(p);
        if (push_item(p, v, &cap, p->i)) return -1;
        char *key = NULL;
        if (object) {
            size_t kl;
            if (p->i >= p->n) return fail(p, p->n, "unexpected end of input, expected a key");
            if (p->s[p->i] != '"') return fail(p, p->i, "expected a string key");
            if (parse_string(p, &key, &kl)) return -1;
            skip_ws(p);
            if (p->i >= p->n) { free(key); return fail(p, p->n, "unexpected end of input, expected ':'"); }
            if (p->s[p->i] != ':') { free(key); return fail(p, p->i, "expected ':'"); }
            p->i++;
            v->keys[v->n] = key;
        }
        memset(&v->items[v->n], 0, sizeof v->items[0]);
        v->n++;                                   /* counted now so json_free sees it */
        if (parse_value(p, &v->items[v->n - 1])) return -1;
        skip_ws(p);
        if (p->i >= p->n) return fail(p, p->n, object ? "unexpected end of input, expected ',' or '}'" : "unexpected end of input, expected ',' or ']'");
        char c = p->s[p->i];
        if (c == ',') { p->i++; continue; }
        if (c == close) { p->i++; break; }
        return fail(p, p->i, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    p->depth--;
    return 0;
}

static int parse_literal(parser *p, const char *word, json_type t, json_value *v) {
    size_t L = strlen(word);
    if (p->i + L > p->n || memcmp(p->s + p->i, word, L)) return fail(p, p->i, "invalid literal");
    p->i += L;
    v->type = t;
    return 0;
}

static int parse_value(parser *p, json_value *v) {
    memset(v, 0, sizeof *v);
    skip_ws(p);
    if (p->i >= p->n) return fail(p, p->n, "unexpected end of input, expected a value");
    char c = p->s[p->i];
    switch (c) {
    case '{': return parse_container(p, v, 1);
    case '[': return parse_container(p, v, 0);
    case '"': v->type = JSON_STRING; return parse_string(p, &v->str, &v->len);
    case 't': return parse_literal(p, "true", JSON_TRUE, v);
    case 'f': return parse_literal(p, "false", JSON_FALSE, v);
    case 'n': return parse_literal(p, "null", JSON_NULL, v);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) { v->type = JSON_NUMBER; return parse_number(p, &v->num); }
        return fail(p, p->i, "expected a value");
    }
}

int json_parse(const char *text, size_t len, json_value *out, char *err, size_t errlen) {
    parser p = {text, len, 0, 0, err, errlen, 0};
    if (errlen) err[0] = 0;
    if (parse_value(&p, out) == 0) {
        skip_ws(&p);
        if (p.i == p.n) return 0;
        fail(&p, p.i, "unexpected text after the value");
    }
    json_free(out);
    return -1;
}

void json_free(json_value *v) {
    if (!v) return;
    for (int i = 0; i < v->n; i++) {
        if (v->items) json_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (int i = obj->n - 1; i >= 0; i--)
        if (!strcmp(obj->keys[i], key)) return &obj->items[i];
    return NULL;
}

const char *json_type_name(json_type t) {
    static const char *const names[] = {"null", "boolean", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < 7 ? names[t] : "?";
}

int json_field_string(const json_value *obj, const char *key, const char **out, char *err, size_t errlen) {
    const json_value *v = json_get(obj, key);
    if (!v) { snprintf(err, errlen, "field '%s' is missing", key); return -1; }
    if (v->type != JSON_STRING) { snprintf(err, errlen, "field '%s' must be a string (got %s)", key, json_type_name(v->type)); return -1; }
    if (strlen(v->str) != v->len) { snprintf(err, errlen, "field '%s' contains a NUL character", key); return -1; }
    *out = v->str;
    return 0;
}

void json_strings_free(char **v, int n) {
    if (!v) return;
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* A number as text: an integer within long long's range without a fraction ("42"),
 * else the shortest %g form that reads back to the same double ("5e+23", "0.1"), as
 * Python's str() writes them. The range check comes first: converting an out-of-range
 * double to long long is undefined behaviour. */
static void number_text(double x, char *buf, size_t n) {
    if (x >= -9223372036854775808.0 && x < 9223372036854775808.0 && x == floor(x)) {
        snprintf(buf, n, "%lld", (long long)x);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return;
    }
}

/* One element as a string copy, or NULL with err. */
static char *element_string(const json_value *e, const char *key, int allow_numbers, char *err, size_t errlen) {
    char num[64];
    if (e->type == JSON_STRING) {
        if (strlen(e->str) != e->len) { snprintf(err, errlen, "field '%s' contains a NUL character", key); return NULL; }
        return strdup(e->str);
    }
    if (e->type == JSON_NUMBER && allow_numbers) {
        number_text(e->num, num, sizeof num);
        return strdup(num);
    }
    snprintf(err, errlen, "field '%s' must hold strings (got %s)", key, json_type_name(e->type));
    return NULL;
}

int json_field_strings(const json_value *obj, const char *key, int allow_single, int allow_numbers, char ***out,
                       int *n, char *err, size_t errlen) {
    const json_value *v = json_get(obj, key);
    if (!v) { snprintf(err, errlen, "field '%s' is missing", key); return -1; }
    const json_value *el = v->type == JSON_ARRAY ? v->items : v;
    int count = v->type == JSON_ARRAY ? v->n : 1;
    if (v->type != JSON_ARRAY && !(allow_single && (v->type == JSON_STRING || (allow_numbers && v->type == JSON_NUMBER)))) {
        snprintf(err, errlen, "field '%s' must be an array of strings (got %s)", key, json_type_name(v->type));
        return -1;
    }
    char **r = calloc((size_t)(count > 0 ? count : 1), sizeof *r);
    if (!r) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int i = 0; i < count; i++)
        if (!(r[i] = element_string(&el[i], key, allow_numbers, err, errlen))) {
            if (!err[0]) snprintf(err, errlen, "out of memory");
            json_strings_free(r, i);
            return -1;
        }
    *out = r;
    *n = count;
    return 0;
}

/* One line into *b (without its newline), at most max bytes kept: the rest of a longer
 * line is read and dropped, its full length in *total. 1 with *newline set when the line
 * ended with '\n', 0 at end of file with nothing read. */
static int read_line(FILE *f, strbuf *b, size_t max, size_t *total, int *newline) {
    int c, any = 0;
    b->n = 0;
    if (b->p) b->p[0] = 0;
    *total = 0;
    *newline = 0;
    while ((c = getc_unlocked(f)) != EOF) {
        any = 1;
        if (c == '\n') { *newline = 1; break; }
        if (++*total <= max) sb_putc(b, (char)c);
    }
    return any;
}

int jsonl_read(const char *path, jsonl_fn fn, void *ctx, jsonl_stats *st, FILE *log, char *err,
               size_t errlen) {
    memset(st, 0, sizeof *st);
    if (!log) log = stderr;
    char why[160];
    FILE *f = kb_fopen_regular(path, SIZE_MAX, why, sizeof why);   /* read by lines, each capped */
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, why);
        return -1;
    }
    char msg[512];
    strbuf lb = {0};
    size_t total;
    int lineno = 0, rc = 0, newline;
    while (read_line(f, &lb, JSONL_MAX_RECORD, &total, &newline)) {
        lineno++;
        if (lb.oom) {
            snprintf(err, errlen, "%s:%d: out of memory reading a line of %zu bytes", path, lineno, total);
            rc = -1;
            break;
        }
        const char *line = lb.p ? lb.p : "";
        size_t n = lb.n;
        size_t k = 0;
        while (k < n && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r')) k++;
        if (k == n && total == n) continue;                 /* blank line */
        st->lines++;
        if (total > n) {
            fprintf(log, "%s:%d: record of %zu bytes is over the limit of %d MiB per line; skipped\n", path, lineno,
                    total, JSONL_MAX_RECORD >> 20);
            st->skipped++;
            continue;
        }
        json_value v;
        if (json_parse(line, n, &v, msg, sizeof msg)) {
            fprintf(log, "%s:%d: %s%s\n", path, lineno, msg, newline ? "" : " (truncated last line?)");
            st->skipped++;
            continue;
        }
        msg[0] = 0;
        int r = fn(ctx, &v, lineno, msg, sizeof msg);
        json_free(&v);
        if (r < 0) {
            fprintf(log, "%s:%d: %s\n", path, lineno, msg[0] ? msg : "record refused");
            st->skipped++;
        } else if (r > 0) {
            rc = r;
            break;
        } else {
            st->accepted++;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "%s: read error", path);
        rc = -1;
    }
    sb_free(&lb);
    fclose(f);
    return rc;
}
