/* Where a result came from: git commit of the source tree, the code's identity (sources
 * and plugins), host name and CPU model. */
#ifndef KV_PROVENANCE_H
#define KV_PROVENANCE_H

typedef struct {
    char git_commit[64];   /* `git rev-parse HEAD` of the tree the binary was built in, at
                              build time, then "+dirty" when tracked files differed from it;
                              "unknown" built outside git. $KVBENCH_GIT_COMMIT replaces it (a test hook standing for
                              another commit). Provenance for the reader. */
    char code[2048];       /* the code's identity, part of every run key: git_commit, then
                              "+src.<sha256>" over every source compiled into the binary,
                              tracked or not (made at build time, so an edit of an untracked
                              file is other code), then "+plugin.<file>.<sha256>" for each
                              loaded plugin. $KVBENCH_SOURCE_HASH replaces the source hash
                              (a test hook standing for other sources). */
    char host[256];
    char cpu[256];         /* "model name" of /proc/cpuinfo, or "unknown" */
} provenance;

void provenance_get(provenance *p);

#endif
