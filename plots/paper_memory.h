/* The SeKV paper's reported GPU memory (arXiv 2606.31145, "Runtime and memory": Llama-3-8B,
 * totals including weights; seeds/003 and reference/paper-claims.md C13): every point the
 * paper gives. -53.3% at 128K is SeKV's 34.9 GB against FullKV's 74.8 GB. */
#ifndef KV_PAPER_MEMORY_H
#define KV_PAPER_MEMORY_H
typedef struct {
    const char *method;
    int ctx;        /* tokens (8K = 8192, 128K = 131072) */
    double gb;      /* GPU memory, GB as the paper prints it */
} paper_mem_point;

static const paper_mem_point paper_memory[] = {
    {"fullkv", 8192, 36.0},
    {"fullkv", 131072, 74.8},
    {"sekv", 8192, 31.2},
    {"sekv", 131072, 34.9},
};
#define PAPER_MEMORY_N (int)(sizeof paper_memory / sizeof paper_memory[0])
/* The backbone those points are for; the figure draws them beside runs of its shapes. */
#define PAPER_MEMORY_MODEL "llama3-8b"
#endif
