/* The method door's registry and the helpers methods share. The door itself, the types
 * every layer reads (kv_setup, kv_prefill, kv_method, ...), is kernels/method_types.h,
 * on the ground floor so the model engine can drive a method without including methods/;
 * a method includes this header and gets both. A new method: docs/write-a-method.md. */
#ifndef KV_METHOD_H
#define KV_METHOD_H
#include "../kernels/method_types.h"

/* "append" / "hold"; kv_decode_parse returns 0 and sets *out, or -1 for anything else. */
const char *kv_decode_name(int rule);
int kv_decode_parse(const char *s, int *out);

/* Copies `in` (of in->size bytes) into the complete table *out with every optional member
 * it lacks set to its default. 0, or -1 with a one-line reason (wrong abi or size, a
 * required member missing, a bad name). The one place defaults are applied. */
int kv_method_resolve(const kv_method *in, kv_method *out, char *err, size_t errlen);

/* Registry (registry.c): the built-in methods, then those registered at run time
 * (plugins), each resolved. */
int kv_method_count(void);
const kv_method *kv_method_at(int i);
const kv_method *kv_method_find(const char *name);   /* case-insensitive; NULL if unknown */
/* The reference method (the first that keeps_all), NULL if none. */
const kv_method *kv_method_reference(void);
/* Adds a method at run time; `origin` (a plugin's path) names it in errors. 0, or -1
 * with a one-line reason (resolve refused it, or its name is taken). */
int kv_method_register(const kv_method *m, const char *origin, char *err, size_t errlen);
/* Where a registered method came from: NULL for a built-in one, else the origin given. */
const char *kv_method_origin(const kv_method *m);
/* The method groups --methods takes beside single names, in registry order:
 *   all      every registered method;
 *   paper    the reference (keeps_all), then each method that has a paper (kv_method.paper with
 *            a title) and that paper's baselines: the rows of the paper's tables;
 *   kvpress  the reference and the methods NVIDIA/kvpress also has (registry.c lists them).
 * Writes up to cap methods to out and returns how many the group has, or -1 when name is not
 * a group. KV_METHOD_GROUPS names them for messages. */
#define KV_METHOD_GROUPS "all, paper, kvpress"
int kv_method_group(const char *name, const kv_method **out, int cap);
/* The command NAME some registered method brings (kv_method.commands), NULL if none. */
const kv_command *kv_command_find(const char *name);

/* Helpers shared by methods (method_util.c). */
/* 1 if init's reason err is about the configuration, not the case: anything but
 * "infeasible..." or running out of memory for this case. */
int kv_init_refused(const char *err);
/* all |= one: the statistics both ask for (flags or'ed, row counts the larger). Drivers union
 * their pairs' needs with it, so a new kv_needs member is unioned in one place. */
void kv_needs_union(kv_needs *all, const kv_needs *one);
/* Budget in tokens per layer per kv head: max(1, floor(frac*n)) or the absolute count. */
int kv_budget(const kv_setup *s);
/* 0 when s->kv_type is a known element type, else -1 with "NAME: ..." in err. */
int kv_check_type(const kv_setup *s, const char *name, char *err, size_t errlen);
/* Look up key in "k=v,k=v" params, falling back to the method's declared default.
 * Returns 0 and stores the value, or -1 (err filled) when the value does not parse
 * or a key in params is not one of the method's parameters. */
int kv_param_int(const kv_method *m, const char *params, const char *key, int *out, char *err, size_t errlen);
int kv_param_double(const kv_method *m, const char *params, const char *key, double *out, char *err, size_t errlen);
int kv_param_check(const kv_method *m, const char *params, char *err, size_t errlen);
/* The value text of key as the method will read it: from params if given there, else the
 * declared default (which the test hook KVBENCH_TEST_DEFAULTS may replace). 0, or -1 if
 * key is not one of the method's parameters. */
int kv_param_text(const kv_method *m, const char *params, const char *key, char *buf, size_t buflen,
                  char *err, size_t errlen);

#endif
