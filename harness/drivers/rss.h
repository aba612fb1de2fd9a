/* The process's measured peak resident set (Linux): what the byte accounting of the
 * methods leaves out (weights, activations, allocator slack) shows up here. */
#ifndef KV_RSS_H
#define KV_RSS_H
#include <stdint.h>

/* Resets the peak (VmHWM) to the current resident set by writing "5" to
 * /proc/self/clear_refs. 0, or -1 where that is not possible (then peaks cannot be
 * attributed to a stretch of work and rss_peak_since reports -1). */
int rss_reset_peak(void);
/* VmHWM of /proc/self/status in bytes, or -1 when unreadable. */
int64_t rss_peak_bytes(void);
/* The peak since rss_reset_peak() returned `reset_rc`: the VmHWM when the reset worked,
 * else -1 (not measured). */
int64_t rss_peak_since(int reset_rc);

#endif
