/* Methods from outside the tree: shared objects loaded at start-up, on every command.
 *
 * A plugin exports one function, KV_PLUGIN_SYMBOL (method.h), that returns its method
 * tables; each is checked (ABI version and size, required members, a free name) and
 * registered after the built-in methods. The file's sha256 joins the run identity
 * (provenance.code), so results of another build of the plugin are never resumed into. */
#ifndef KV_PLUGIN_H
#define KV_PLUGIN_H
#include <stddef.h>

/* Takes every "--plugin FILE" (and "--plugin=FILE") out of argv (argc adjusted) and loads
 * those files, after the ones named in $KVBENCH_PLUGINS (colon-separated). 0, or -1 with
 * one line naming the file and what is wrong in err. */
int kv_plugins_load(int *argc, char **argv, char *err, size_t errlen);

/* The plugins loaded, in load order: their path and sha256 (64 hex digits). */
int kv_plugin_count(void);
const char *kv_plugin_path(int i);
const char *kv_plugin_sha256(int i);

#endif
