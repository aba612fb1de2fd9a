/* Python str semantics on UTF-8, for the text metrics: the official LongBench, InfiniteBench
 * and RULER scoring scripts are Python, and their str.lower(), str.split(), str.strip(), re's
 * \b and \d are Unicode-aware. The tables (pystr_tables.c) are generated from Python's own
 * str methods by tools/gen_unicode_tables.py --pystr; they are the metrics', not the
 * tokenizers' (model/unicode.c follows llama.cpp's classes, which differ: White_Space is
 * not str.isspace(), L/N is not str.isalnum()).
 * Code points: strict UTF-8; a byte that does not start a valid sequence (overlong, surrogate,
 * truncated, > U+10FFFF) is one code point 0xDC00 + byte (Python's surrogateescape), which
 * is no space, word, digit or cased letter, and is written back as the same byte. */
#ifndef KV_PYSTR_H
#define KV_PYSTR_H
#include <stddef.h>
#include <stdint.h>

typedef struct { uint32_t first, last; int32_t stride, delta; } py_lower_run;

/* Generated (pystr_tables.c). */
extern const uint32_t py_space_ranges[][2], py_word_ranges[][2], py_decimal_ranges[][2];
extern const uint32_t py_cased_ranges[][2], py_ignorable_ranges[][2];
extern const int py_space_ranges_n, py_word_ranges_n, py_decimal_ranges_n, py_cased_ranges_n, py_ignorable_ranges_n;
extern const py_lower_run py_lower_runs[];
extern const int py_lower_runs_n;
extern const uint32_t py_lower_multi[][3];
extern const int py_lower_multi_n;

int py_isspace(uint32_t cp);        /* str.isspace(): what split() and strip() remove */
int py_isword(uint32_t cp);         /* re's \w for str patterns: str.isalnum() or '_' */
int py_isdecimal(uint32_t cp);      /* re's \d for str patterns: str.isdecimal() (Nd) */

/* Decodes the code point at s (NUL-terminated); returns the bytes it takes (0 at the NUL). */
int py_decode(const char *s, uint32_t *cp);
/* Writes cp as UTF-8 to out[0..4) (an escaped byte 0xDC80..0xDCFF as that byte); returns the length. */
int py_encode(uint32_t cp, char *out);
/* Bytes of the whitespace code point at s, 0 if s[0] is not one. */
int py_space_len(const char *s);
/* Bytes of the decimal digit at s, 0 if s[0] is not one. */
int py_decimal_len(const char *s);

/* str.lower() of s: full mapping (U+0130 -> "i" U+0307) and the final-sigma rule. Caller
 * frees; NULL on OOM. */
char *py_lower(const char *s);
/* str.strip() (no argument) of s into a fresh string; NULL on OOM. */
char *py_strip(const char *s);
/* str.split() (no argument) in place: whitespace becomes NUL; *out gets the word pointers
 * (caller frees). Returns the count, -1 on OOM. */
int py_split(char *s, char ***out);
#endif
