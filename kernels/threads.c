/* A small persistent pthread pool behind kb_parallel_for.
 *
 * kb_threads() threads take part in a loop: the caller plus kb_threads()-1 workers.
 * Indices are handed out one at a time from an atomic counter, so which thread runs
 * index i varies from run to run; callers keep results deterministic by making
 * fn(ctx, i) write only what belongs to i (never reduce across indices inside fn).
 *
 * Hand-off: a decode step is a few hundred loops of tens of microseconds each, so a
 * futex sleep and wake per loop (the condition variable) cost about a fifth of the
 * step. Between loops a worker spins on the generation counter for up to SPIN_NS before
 * it sleeps on the condition variable, and the caller spins the same way on the count
 * of busy workers; the sleeping path is kept for long gaps, so an idle pool burns no CPU.
 * Every 256 pauses a spinner calls sched_yield: on a machine with more runnable threads
 * than cores (another job beside this one) the thread it waits for may be the one the
 * spinner keeps off the core, and a loop then waits a scheduler time slice. Measured
 * beside a 2-thread kvbench run on 2 cores: a 4-method NIAH 2K case took 19.0 s with 2
 * threads and 11.2 s with 1 before the yield, 11.6 s with either after it. With nothing
 * else runnable the call returns at once.
 * A sleeper is only woken if it said so (sleepers / caller_sleeps, read after the
 * counter changes, all seq_cst), which is what keeps a wake from being lost.
 *
 * A nested call (fn itself calls kb_parallel_for) or a call made while another thread
 * owns the pool runs serially on the calling thread. OpenBLAS is told to use one
 * thread: the parallelism lives here, and sgemm calls run inside our tasks. */
#include "core.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

void openblas_set_num_threads(int num_threads);   /* from OpenBLAS (cblas.h) */

enum { KB_MAX_THREADS = 256 };
#define SPIN_NS 200000L            /* 0.2 ms: longer than any gap inside a decode step */

static struct {
    pthread_mutex_t own;           /* held by the thread running a parallel loop */
    pthread_mutex_t mu;            /* pairs with the condition variables */
    pthread_cond_t wake, done;
    pthread_t tid[KB_MAX_THREADS];
    int nworkers;                  /* workers currently alive */
    atomic_int stop;
    atomic_ulong generation;       /* bumped once per loop */
    atomic_int busy;               /* workers still inside the current loop */
    atomic_int sleepers;           /* workers in (or entering) the wake wait */
    atomic_int caller_sleeps;      /* the caller is in (or entering) the done wait */
    void (*fn)(void *, int);
    void *ctx;
    int n;
    atomic_int next;
} pool = {
    .own = PTHREAD_MUTEX_INITIALIZER,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Spin for at most SPIN_NS until *v moves off old (or the pool stops) / until *v is 0;
 * 1 if it happened, 0 if the caller should sleep instead. */
static int spin_ulong_changes(atomic_ulong *v, unsigned long old) {
    long t0 = now_ns();
    for (int i = 1;; i++) {
        if (atomic_load(v) != old || atomic_load(&pool.stop)) return 1;
        cpu_relax();
        if (!(i & 255)) {
            if (now_ns() - t0 > SPIN_NS) return 0;
            sched_yield();
        }
    }
}
static int spin_int_zero(atomic_int *v) {
    long t0 = now_ns();
    for (int i = 1;; i++) {
        if (atomic_load(v) == 0) return 1;
        cpu_relax();
        if (!(i & 255)) {
            if (now_ns() - t0 > SPIN_NS) return 0;
            sched_yield();
        }
    }
}

static int want_threads;           /* 0 until set or first read */
static _Thread_local int in_loop;  /* this thread is running a task */

static int default_threads(void) {
    const char *env = getenv("KVBENCH_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == 0 && v >= 1 && v <= KB_MAX_THREADS) return (int)v;
        fprintf(stderr, "KVBENCH_THREADS='%s' is not a thread count in 1..%d; using online CPUs\n",
                env, KB_MAX_THREADS);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    return cpus > KB_MAX_THREADS ? KB_MAX_THREADS : (int)cpus;
}

static void run_indices(void) {
    int i;
    while ((i = atomic_fetch_add(&pool.next, 1)) < pool.n) pool.fn(pool.ctx, i);
}

static void *worker_main(void *arg) {
    (void)arg;
    in_loop = 1;                   /* anything a task calls from here is nested */
    unsigned long seen = 0;
    for (;;) {
        if (!spin_ulong_changes(&pool.generation, seen)) {
            pthread_mutex_lock(&pool.mu);
            atomic_fetch_add(&pool.sleepers, 1);
            while (!atomic_load(&pool.stop) && atomic_load(&pool.generation) == seen)
                pthread_cond_wait(&pool.wake, &pool.mu);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.mu);
        }
        if (atomic_load(&pool.stop)) break;
        seen = atomic_load(&pool.generation);
        run_indices();
        if (atomic_fetch_sub(&pool.busy, 1) == 1 && atomic_load(&pool.caller_sleeps)) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    return NULL;
}

/* Called with pool.own held. */
static void stop_workers(void) {
    pthread_mutex_lock(&pool.mu);
    atomic_store(&pool.stop, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.nworkers; i++) pthread_join(pool.tid[i], NULL);
    pool.nworkers = 0;
    atomic_store(&pool.stop, 0);
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single_thread(void) { openblas_set_num_threads(1); }

/* Called with pool.own held: make the worker count kb_threads() - 1. */
static void start_workers(void) {
    int want = kb_threads() - 1;
    if (pool.nworkers == want) return;
    if (pool.nworkers) stop_workers();
    atomic_store(&pool.generation, 0);
    for (int i = 0; i < want; i++) {
        if (pthread_create(&pool.tid[i], NULL, worker_main, NULL) != 0) {
            fprintf(stderr, "kb_parallel_for: could not start worker thread %d; using %d\n", i + 1, i + 1);
            break;
        }
        pool.nworkers++;
    }
}

/* Takes effect at the next kb_parallel_for (the workers are restarted then). */
void kb_set_threads(int n) {
    int v = n >= 1 ? (n > KB_MAX_THREADS ? KB_MAX_THREADS : n) : default_threads();
    __atomic_store_n(&want_threads, v, __ATOMIC_SEQ_CST);
    pthread_once(&blas_once, blas_single_thread);
}

int kb_threads(void) {
    if (!want_threads) {
        int n = default_threads();
        int zero = 0;
        /* first reader wins; a racing reader computes the same value */
        __atomic_compare_exchange_n(&want_threads, &zero, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    return __atomic_load_n(&want_threads, __ATOMIC_SEQ_CST);
}

static void run_serial(int n, void (*fn)(void *, int), void *ctx) {
    int outer = in_loop;
    in_loop = 1;
    for (int i = 0; i < n; i++) fn(ctx, i);
    in_loop = outer;
}

void kb_parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx) {
    if (n <= 0) return;
    pthread_once(&blas_once, blas_single_thread);
    if (n == 1 || in_loop || kb_threads() == 1 || pthread_mutex_trylock(&pool.own) != 0) {
        run_serial(n, fn, ctx);
        return;
    }
    start_workers();
    if (pool.nworkers == 0) {
        pthread_mutex_unlock(&pool.own);
        run_serial(n, fn, ctx);
        return;
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    atomic_store(&pool.next, 0);
    atomic_store(&pool.busy, pool.nworkers);
    atomic_fetch_add(&pool.generation, 1);   /* publishes fn, ctx, n to the spinners */
    if (atomic_load(&pool.sleepers)) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.mu);
    }

    in_loop = 1;
    run_indices();
    in_loop = 0;

    if (!spin_int_zero(&pool.busy)) {
        pthread_mutex_lock(&pool.mu);
        atomic_store(&pool.caller_sleeps, 1);
        while (atomic_load(&pool.busy) > 0) pthread_cond_wait(&pool.done, &pool.mu);
        atomic_store(&pool.caller_sleeps, 0);
        pthread_mutex_unlock(&pool.mu);
    }
    pthread_mutex_unlock(&pool.own);
}
