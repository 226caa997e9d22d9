/* bench_util.h -- small host-side helpers shared by the whole-program
 * benchmark inputs (mm.cu, strsm.cu).  Plain C/C++; host code only. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda_runtime.h>

/* Abort with a message if a CUDA runtime call fails. */
#define CUDA_CHECK(call)                                                    \
    do {                                                                    \
        cudaError_t err_ = (call);                                          \
        if (err_ != cudaSuccess) {                                          \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call,          \
                    __FILE__, __LINE__, cudaGetErrorString(err_));          \
            exit(EXIT_FAILURE);                                             \
        }                                                                   \
    } while (0)

/* Check for errors from the most recent kernel launch. */
#define CUDA_CHECK_LAUNCH()                                                 \
    do {                                                                    \
        CUDA_CHECK(cudaGetLastError());                                     \
        CUDA_CHECK(cudaDeviceSynchronize());                                \
    } while (0)

/* Fill a host array with pseudo-random floats in [lo, hi). */
static inline void fill_random(float *a, size_t count, float lo, float hi,
                               unsigned int seed)
{
    size_t i;
    srand(seed);
    for (i = 0; i < count; i++)
        a[i] = lo + (hi - lo) * ((float)rand() / ((float)RAND_MAX + 1.0f));
}

/* Parse argv[idx] as a positive int, or return def. */
static inline int arg_int(int argc, char **argv, int idx, int def)
{
    if (argc > idx) {
        int v = atoi(argv[idx]);
        if (v > 0)
            return v;
    }
    return def;
}

/* Relative/absolute tolerance comparison of one value against a reference.
 * Returns 1 if close enough, 0 otherwise (and prints the mismatch). */
static inline int check_close(const char *what, size_t where, float got,
                              double ref, double tol)
{
    double err = fabs((double)got - ref);
    double scale = fabs(ref) > 1.0 ? fabs(ref) : 1.0;
    if (err > tol * scale) {
        fprintf(stderr, "MISMATCH %s[%zu]: got %g, expected %g (err %g)\n",
                what, where, (double)got, ref, err);
        return 0;
    }
    return 1;
}

/* Simple wall-clock timer around a stream using CUDA events. */
typedef struct {
    cudaEvent_t start, stop;
} gpu_timer;

static inline void timer_start(gpu_timer *t)
{
    CUDA_CHECK(cudaEventCreate(&t->start));
    CUDA_CHECK(cudaEventCreate(&t->stop));
    CUDA_CHECK(cudaEventRecord(t->start, 0));
}

static inline float timer_stop_ms(gpu_timer *t)
{
    float ms = 0.0f;
    CUDA_CHECK(cudaEventRecord(t->stop, 0));
    CUDA_CHECK(cudaEventSynchronize(t->stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms, t->start, t->stop));
    CUDA_CHECK(cudaEventDestroy(t->start));
    CUDA_CHECK(cudaEventDestroy(t->stop));
    return ms;
}

#endif /* BENCH_UTIL_H */
