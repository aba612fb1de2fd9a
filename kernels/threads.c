/* A small persistent pthread pool behind kb_parallel_for.
 *
 * kb_threads() threads take part in a loop: the caller plus kb_threads()-1 workers
 * that sleep on a condition variable between loops. Indices are handed out one at a
 * time from an atomic counter, so which thread runs index i varies from run to run;
 * callers keep results deterministic by making fn(ctx, i) write only what belongs to
 * i (never reduce across indices inside fn).
 *
 * A nested call (fn itself calls kb_parallel_for) or a call made while another thread
 * owns the pool runs serially on the calling thread. OpenBLAS is told to use one
 * thread: the parallelism lives here, and sgemm calls run inside our tasks. */
#include "core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void openblas_set_num_threads(int num_threads);   /* from OpenBLAS (cblas.h) */

enum { KB_MAX_THREADS = 256 };

static struct {
    pthread_mutex_t own;           /* held by the thread running a parallel loop */
    pthread_mutex_t mu;            /* guards the fields below */
    pthread_cond_t wake, done;
    pthread_t tid[KB_MAX_THREADS];
    int nworkers;                  /* workers currently alive */
    int stop;
    unsigned long generation;      /* bumped once per loop */
    int busy;                      /* workers still inside the current loop */
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
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (!pool.stop && pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.mu);
        if (pool.stop) break;
        seen = pool.generation;
        pthread_mutex_unlock(&pool.mu);
        run_indices();
        pthread_mutex_lock(&pool.mu);
        if (--pool.busy == 0) pthread_cond_signal(&pool.done);
    }
    pthread_mutex_unlock(&pool.mu);
    return NULL;
}

/* Called with pool.own held. */
static void stop_workers(void) {
    pthread_mutex_lock(&pool.mu);
    pool.stop = 1;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.nworkers; i++) pthread_join(pool.tid[i], NULL);
    pool.nworkers = 0;
    pool.stop = 0;
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single_thread(void) { openblas_set_num_threads(1); }

/* Called with pool.own held: make the worker count kb_threads() - 1. */
static void start_workers(void) {
    int want = kb_threads() - 1;
    if (pool.nworkers == want) return;
    if (pool.nworkers) stop_workers();
    pool.generation = 0;
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
    pthread_mutex_lock(&pool.mu);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    atomic_store(&pool.next, 0);
    pool.busy = pool.nworkers;
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);

    in_loop = 1;
    run_indices();
    in_loop = 0;

    pthread_mutex_lock(&pool.mu);
    while (pool.busy > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.own);
}
