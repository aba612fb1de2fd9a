/* run --shard K/N: shard_assign against a reference written here another way (insertion
 * sort by cost then key, loads in long double, the least-loaded shard found by a full
 * scan), on fresh random case lists with repeated costs; every case in exactly one shard;
 * the same owners whatever order the cases come in; the makespan within the greedy
 * bound (mean load + the largest case); zero costs split round-robin; shard_parse takes
 * K/N and refuses the rest. */
#include "check.h"
#include "../harness/drivers/shard.h"

/* The reference: the same rule, written independently. */
static void ref_assign(char **keys, const double *cost, int n, int ns, int *owner) {
    int *ord = malloc((size_t)n * sizeof *ord);
    for (int i = 0; i < n; i++) ord[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            int a = ord[j - 1], b = ord[j];
            double ca = cost[a] > 0 ? cost[a] : 0, cb = cost[b] > 0 ? cost[b] : 0;
            int later = ca < cb || (ca == cb && strcmp(keys[a], keys[b]) > 0);
            if (!later) break;
            ord[j - 1] = b, ord[j] = a;
        }
    long double *load = calloc((size_t)ns, sizeof *load);
    int *cnt = calloc((size_t)ns, sizeof *cnt);
    for (int j = 0; j < n; j++) {
        int best = -1;
        for (int s = 0; s < ns; s++)
            if (best < 0 || load[s] < load[best] || (load[s] == load[best] && cnt[s] < cnt[best])) best = s;
        owner[ord[j]] = best;
        load[best] += cost[ord[j]] > 0 ? cost[ord[j]] : 0;
        cnt[best]++;
    }
    free(ord), free(load), free(cnt);
}

int main(void) {
    test_seed();
    for (int trial = 0; trial < 200; trial++) {
        int n = test_int(1, 300), ns = test_int(1, trial % 3 ? 8 : 120);
        char **keys = malloc((size_t)n * sizeof *keys);
        const char **kp = malloc((size_t)n * sizeof *kp);
        double *cost = malloc((size_t)n * sizeof *cost);
        int *own = malloc((size_t)n * sizeof *own), *ref = malloc((size_t)n * sizeof *ref),
            *perm = malloc((size_t)n * sizeof *perm), *own2 = malloc((size_t)n * sizeof *own2);
        int lengths[] = {512, 1024, 2048, 4096, 8192};
        for (int i = 0; i < n; i++) {
            keys[i] = malloc(48);
            snprintf(keys[i], 48, "task%d/case-%d-%d", test_int(0, 3), i, test_int(0, 99999));
            kp[i] = keys[i];
            int L = lengths[test_int(0, 4)];
            cost[i] = trial % 4 == 0 ? L * (1 + L / 4096.0) : test_unif() * 1e4;   /* repeated and distinct costs */
            own[i] = ref[i] = -7;
        }
        CHECK(shard_assign(kp, cost, n, ns, own) == 0, "shard_assign failed");
        ref_assign(keys, cost, n, ns, ref);
        int same = 1, in_range = 1;
        double *load = calloc((size_t)ns, sizeof *load), total = 0, biggest = 0;
        for (int i = 0; i < n; i++) {
            same &= own[i] == ref[i];
            in_range &= own[i] >= 0 && own[i] < ns;
            if (own[i] >= 0 && own[i] < ns) load[own[i]] += cost[i];
            total += cost[i];
            if (cost[i] > biggest) biggest = cost[i];
        }
        CHECK(in_range, "trial %d: an owner outside 0..%d", trial, ns - 1);
        CHECK(same, "trial %d (n %d, shards %d): owners differ from the reference", trial, n, ns);
        double worst = 0;
        for (int s = 0; s < ns; s++) worst = load[s] > worst ? load[s] : worst;
        CHECK(worst <= total / ns + biggest + 1e-9 * total, "trial %d: makespan %.1f over mean %.1f + largest %.1f",
              trial, worst, total / ns, biggest);
        /* the same (key, cost) pairs in another order: every case keeps its shard */
        for (int i = 0; i < n; i++) perm[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = test_int(0, i), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        const char **kp2 = malloc((size_t)n * sizeof *kp2);
        double *cost2 = malloc((size_t)n * sizeof *cost2);
        for (int i = 0; i < n; i++) kp2[i] = kp[perm[i]], cost2[i] = cost[perm[i]];
        CHECK(shard_assign(kp2, cost2, n, ns, own2) == 0, "shard_assign failed");
        int stable = 1;
        for (int i = 0; i < n; i++) stable &= own2[i] == own[perm[i]];
        CHECK(stable, "trial %d: the owners depend on the order of the cases", trial);
        for (int i = 0; i < n; i++) free(keys[i]);
        free(keys), free(kp), free(cost), free(own), free(ref), free(perm), free(own2), free(load), free(kp2), free(cost2);
    }
    /* zero costs: round-robin, counts within one */
    {
        enum { N = 10, S = 4 };
        const char *k[N] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
        double c[N] = {0};
        int o[N], cnt[S] = {0};
        CHECK(shard_assign(k, c, N, S, o) == 0, "zero costs");
        for (int i = 0; i < N; i++) cnt[o[i]]++;
        CHECK(cnt[0] == 3 && cnt[1] == 3 && cnt[2] == 2 && cnt[3] == 2, "zero costs: %d %d %d %d", cnt[0], cnt[1],
              cnt[2], cnt[3]);
    }
    /* parsing */
    shard_spec sp = {-1, -1};
    CHECK(shard_parse("--shard", "3/4", &sp) == 0 && sp.k == 3 && sp.n == 4, "3/4 -> %d/%d", sp.k, sp.n);
    CHECK(shard_parse("--shard", "0/1", &sp) == 0 && sp.k == 0 && sp.n == 1, "0/1");
    const char *bad[] = {"4/4", "-1/4", "1/0", "1/", "/4", "a/b", "1/4x", "14", "", "1//4", "+1/4", "1/100001"};
    fprintf(stderr, "expected errors follow:\n");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(shard_parse("--shard", bad[i], &sp) == -1, "'%s' accepted", bad[i]);
    return check_done("test_shard");
}
