/* What the report and the plots ask of the methods' papers (kv_method.paper), through the
 * registry rather than by a method's name: which methods a paper's claims are judged for,
 * which of them keep a zoom log, and the primary row the iso-memory views compare at. */
#ifndef KV_PAPER_ROWS_H
#define KV_PAPER_ROWS_H
#include <stddef.h>
#include "../methods/method.h"

/* The methods whose paper holds a claim of `kind` (kv_claim_kind; -1: any claim), in
 * registry order, into out[0..cap); returns their count. */
int pr_methods(int kind, const char **out, int cap);
/* The same as "a, b or c" into buf ("" when none); returns their count. */
int pr_names(int kind, char *buf, size_t len);
/* The first method that is the first row of a paper with claims (NULL: none). */
const kv_method *pr_primary(void);

#endif
