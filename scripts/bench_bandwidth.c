/* Sustained read bandwidth of this machine, the floor of a bandwidth-bound stage (the code
 * predictor reads all its weights at every step).
 *
 *   cc -O3 -march=native -pthread scripts/bench_bandwidth.c -o /tmp/bench_bandwidth
 *   /tmp/bench_bandwidth [MiB ...]        (default: 1024 = far beyond the caches, and 84 = the
 *                                           0.6b Q8_0 code predictor's weights)
 *
 * For each buffer size and for 1 and 2 threads: each thread sums 64-bit words of its own half
 * (or whole) of a buffer it first wrote, over and over; the best and the median of 9 passes in
 * GB/s (10^9 bytes/s). The sum is printed so the reads cannot be optimized away.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PASSES = 9, MAX_THREADS = 2 };

typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
    pthread_barrier_t *start, *end;
    int passes;
    double t0[16], t1[16]; /* each pass's start and end on this thread */
} Job;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* 8 independent sums so the loop is limited by the loads, not by one add chain */
static uint64_t read_all(const uint64_t *p, size_t n) {
    uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += p[i + j];
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

static void *worker(void *arg) {
    Job *j = arg;
    for (int r = 0; r < j->passes; r++) {
        pthread_barrier_wait(j->start);
        j->t0[r] = now();
        j->sum += read_all(j->p, j->n);
        j->t1[r] = now();
        pthread_barrier_wait(j->end);
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run(size_t bytes, int threads) {
    uint64_t *buf = aligned_alloc(4096, bytes);
    if (!buf) {
        fprintf(stderr, "cannot allocate %zu bytes\n", bytes);
        exit(1);
    }
    for (size_t i = 0; i < bytes / 8; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
    pthread_barrier_t start, end;
    pthread_barrier_init(&start, NULL, threads + 1);
    pthread_barrier_init(&end, NULL, threads + 1);
    const int passes = PASSES + 1; /* the first one warms up */
    Job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    size_t per = bytes / 8 / threads;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (Job){.p = buf + t * per, .n = per, .start = &start, .end = &end, .passes = passes};
        pthread_create(&tid[t], NULL, worker, &jobs[t]);
    }
    for (int r = 0; r < passes; r++) {
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&end);
    }
    uint64_t sum = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        sum += jobs[t].sum;
    }
    /* a pass lasts from its first thread's start to its last thread's end (timed by the workers:
       the main thread may be descheduled between the barriers) */
    double gbs[PASSES + 1];
    for (int r = 0; r < passes; r++) {
        double t0 = jobs[0].t0[r], t1 = jobs[0].t1[r];
        for (int t = 1; t < threads; t++) {
            if (jobs[t].t0[r] < t0) t0 = jobs[t].t0[r];
            if (jobs[t].t1[r] > t1) t1 = jobs[t].t1[r];
        }
        gbs[r] = (double)(per * 8 * threads) / (t1 - t0) / 1e9;
    }
    qsort(gbs + 1, PASSES, sizeof(double), cmp);
    printf("%6zu MiB  %d thread%s  best %6.1f GB/s  median %6.1f GB/s  (checksum %04llx)\n", bytes >> 20, threads,
           threads > 1 ? "s" : " ", gbs[PASSES], gbs[1 + PASSES / 2], (unsigned long long)(sum >> 48));
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&end);
    free(buf);
}

int main(int argc, char **argv) {
    size_t sizes[16] = {1024, 84};
    int n = 2;
    if (argc > 1) {
        n = 0;
        for (int i = 1; i < argc && n < 16; i++) sizes[n++] = (size_t)strtoull(argv[i], NULL, 10);
    }
    for (int i = 0; i < n; i++)
        for (int t = 1; t <= MAX_THREADS; t++) run(sizes[i] << 20, t);
    return 0;
}
