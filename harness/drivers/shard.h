/* kvbench run --shard K/N: a deterministic split of a run's cases into N disjoint shards of
 * about equal estimated cost, so that N machines (a SLURM array) can each run one shard into
 * their own results file and `kvbench merge` joins them. */
#ifndef KV_SHARD_H
#define KV_SHARD_H

typedef struct {
    int k, n;   /* this shard, 0 <= k < n; n == 0: not sharded (every case is ours) */
} shard_spec;

/* Parses "K/N" (0 <= K < N <= 100000) for the flag; 0, or -1 with a one-line error printed. */
int shard_parse(const char *flag, const char *s, shard_spec *out);

/* Assigns each of the n cases (unique keys, estimated costs >= 0) to one of n_shards
 * shards in owner[i]: the cases in order of decreasing cost (ties: key order) go one by
 * one to the shard with the least cost so far (ties: fewer cases, then the lowest shard). The result
 * depends only on the (key, cost) pairs, never on their order in the arrays. 0 or -1 (out
 * of memory). */
int shard_assign(const char *const *keys, const double *cost, int n, int n_shards, int *owner);

#endif
