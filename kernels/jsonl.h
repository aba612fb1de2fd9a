/* A small strict JSON parser (RFC 8259: objects, arrays, strings with \u escapes and
 * surrogate pairs, numbers, true/false/null; input must be UTF-8) and a JSONL reader
 * that reports a bad line as "FILE:LINE: what is wrong at column N", skips it and goes
 * on. */
#ifndef KV_JSONL_H
#define KV_JSONL_H
#include <stddef.h>
#include <stdio.h>

typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value {
    json_type type;
    double num;                 /* JSON_NUMBER */
    char *str;                  /* JSON_STRING: decoded UTF-8, NUL-terminated (may hold \0) */
    size_t len;                 /* JSON_STRING: bytes */
    struct json_value *items;   /* JSON_ARRAY elements / JSON_OBJECT values */
    char **keys;                /* JSON_OBJECT keys (decoded) */
    int n;                      /* element / member count */
} json_value;

/* Parses exactly one JSON value (surrounding whitespace allowed). 0, or -1 with
 * "what is wrong at column N" (1-based byte column) in err. */
int json_parse(const char *text, size_t len, json_value *out, char *err, size_t errlen);
void json_free(json_value *v);

/* Object member by key (the last one if repeated), or NULL. */
const json_value *json_get(const json_value *obj, const char *key);
const char *json_type_name(json_type t);       /* "null", "string", ... ("false"/"true": "boolean") */

/* Field access for loaders. The string member key of obj: 0 and *out (borrowed), or -1
 * with "field 'KEY' is missing" / "field 'KEY' must be a string (got number)" /
 * "field 'KEY' contains a NUL character" in err. */
int json_field_string(const json_value *obj, const char *key, const char **out, char *err, size_t errlen);
/* A member that is an array of strings (numbers too with allow_numbers, written as
 * integers when integral; a lone string/number counts as one element with allow_single).
 * *out: a malloc'd array of malloc'd copies (json_strings_free), *n its length. 0 or -1. */
int json_field_strings(const json_value *obj, const char *key, int allow_single, int allow_numbers, char ***out,
                       int *n, char *err, size_t errlen);
void json_strings_free(char **v, int n);

/* Called for each parsed line. Return 0 to accept it; -1 to skip it, with the reason in
 * err (reported as "FILE:LINE: reason"). A positive return stops reading (returned). */
typedef int (*jsonl_fn)(void *ctx, const json_value *v, int line, char *err, size_t errlen);

typedef struct {
    int lines;          /* non-blank lines seen */
    int accepted;
    int skipped;        /* malformed, or refused by the callback */
} jsonl_stats;

/* The longest line jsonl_read parses; a longer one is skipped with a message (read
 * through, never held). The largest records of the supported datasets are a few MB. */
#define JSONL_MAX_RECORD (64 << 20)

/* Reads PATH line by line; blank lines are ignored. Each bad line prints one message to
 * log (stderr if NULL) and is counted in st->skipped. Returns 0, the callback's positive
 * return, or -1 (file unreadable / out of memory) with "PATH: reason" in err. */
int jsonl_read(const char *path, jsonl_fn fn, void *ctx, jsonl_stats *st, FILE *log, char *err,
               size_t errlen);
#endif
