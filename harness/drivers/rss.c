#include "rss.h"
#include <malloc.h>
#include <stdio.h>
#include <string.h>

int rss_reset_peak(void) {
    /* give freed heap back first, so the new peak starts from what is live, not from what
     * the allocator kept of earlier cases and results (glibc) */
    malloc_trim(0);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

int64_t rss_peak_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6) && sscanf(line + 6, "%lld", &kb) == 1) break;
    fclose(f);
    return kb >= 0 ? (int64_t)kb * 1024 : -1;
}

int64_t rss_peak_since(int reset_rc) { return reset_rc == 0 ? rss_peak_bytes() : -1; }
