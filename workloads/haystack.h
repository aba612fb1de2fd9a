/* The NIAH/RULER haystack text: Paul Graham's essays (fetched by tools/fetch_haystack.sh
 * into $KVBENCH_CACHE/haystack/PaulGrahamEssays/) or any text file the user names. */
#ifndef KV_HAYSTACK_H
#define KV_HAYSTACK_H
#include <stddef.h>

/* "$KVBENCH_CACHE/haystack/PaulGrahamEssays" (KVBENCH_CACHE defaults to ~/.cache/kvbench).
 * Caller frees. */
char *haystack_default_dir(void);

/* path NULL: the default directory. A directory: its *.txt files concatenated byte for
 * byte in sorted (strcmp) file-name order, as fetch_haystack.sh checksums them. A file:
 * its bytes. Returns the NUL-terminated text (caller frees) and *len, or NULL with
 * "PATH: reason" in err. */
char *haystack_load(const char *path, size_t *len, char *err, size_t errlen);
#endif
