/* Where a result came from: git commit of the source tree, host name and CPU model. */
#ifndef KV_PROVENANCE_H
#define KV_PROVENANCE_H

typedef struct {
    char git_commit[64];   /* `git rev-parse HEAD` of the tree the binary sits in, then
                              "+dirty.<hash of the diff>" when tracked files differ from it;
                              "unknown" without git. $KVBENCH_GIT_COMMIT replaces it (a test
                              hook standing for another commit). Part of every run key. */
    char host[256];
    char cpu[256];         /* "model name" of /proc/cpuinfo, or "unknown" */
} provenance;

void provenance_get(provenance *p);

#endif
