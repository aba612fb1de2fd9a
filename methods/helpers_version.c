/* The helper structs a method compiles into its own code, pinned to KV_HELPERS_VERSION
 * (kernels/method_types.h): the registry refuses a plugin built against another version,
 * so a change to one of these layouts must raise it. The sizes and offsets below (LP64)
 * are version 1's; a change that alters one stops the build here until the version grows
 * and the new figures replace these. kb_backend is not among them: a method only reads it
 * through kb_get(), and its members are only ever appended. */
#include "cacheset.h"
#include <stddef.h>

_Static_assert(KV_HELPERS_VERSION == 1, "pin the new version's sizes and offsets below");
#define PINNED(what, n) _Static_assert((what) == (n), #what " changed: raise KV_HELPERS_VERSION and pin it anew")
PINNED(sizeof(kv_store), 56);
PINNED(offsetof(kv_store, pos), 32);
PINNED(offsetof(kv_store, dev), 40);
PINNED(sizeof(kv_slot), 80);
PINNED(offsetof(kv_slot, score), 56);
PINNED(offsetof(kv_slot, events), 72);
PINNED(sizeof(kv_cacheset), 80);
PINNED(offsetof(kv_cacheset, budget), 28);
PINNED(offsetof(kv_cacheset, slot), 40);
PINNED(offsetof(kv_cacheset, rows), 48);
PINNED(sizeof(kb_prefill_args), 104);
PINNED(offsetof(kb_prefill_args, win_ld), 96);
PINNED(sizeof(kb_decode_args), 80);
PINNED(offsetof(kb_decode_args, kv_type), 72);
