/* SHA-256 (FIPS 180-4) of a byte string, for the prompt hash stored with each case: a
 * reader can check a printed prompt with `sha256sum`. */
#ifndef KV_SHA256_H
#define KV_SHA256_H
#include <stddef.h>

/* Writes the 64 lowercase hex digits and a NUL into hex[65]. */
void sha256_hex(const void *data, size_t n, char hex[65]);
#endif
