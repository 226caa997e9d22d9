/**
 * bench_utils.c: shared helpers for the whole-program test corpus.
 *
 * Included as a source file (#include "common/bench_utils.c") by every program,
 * the way benchmark suites share their utility functions.  Plain C only: no CUDA.
 */

#ifndef BENCH_UTILS_C
#define BENCH_UTILS_C

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <sys/time.h>

/* Profiling hooks, off unless the build asks for them. The list file is
   not part of the corpus: defining BENCH_PAPI is expected to fail. */
#ifdef BENCH_PAPI
#include "papi_counters.list"
#endif

#if defined(BENCH_TRACE) && BENCH_TRACE > 1
#define BENCH_TRACE_MSG(msg) fprintf(stderr, "[trace] %s:%d %s\n", __FILE__, __LINE__, msg)
#else
#define BENCH_TRACE_MSG(msg)
#endif

/* Threshold (in percent) used by most programs when comparing GPU and CPU results. */
#ifndef PERCENT_DIFF_ERROR_THRESHOLD
#define PERCENT_DIFF_ERROR_THRESHOLD 0.05
#endif

/* Seconds since the epoch, microsecond resolution. */
double rtclock()
{
    struct timezone Tzp;
    struct timeval Tp;
    int stat;
    stat = gettimeofday(&Tp, &Tzp);
    if (stat != 0)
        printf("Error return from gettimeofday: %d", stat);
    return (Tp.tv_sec + Tp.tv_usec * 1.0e-6);
}

float absVal(float a)
{
    if (a < 0)
    {
        return (a * -1);
    }
    else
    {
        return a;
    }
}

/* Relative difference in percent; values both close to zero count as equal. */
float percentDiff(double val1, double val2)
{
    if ((absVal(val1) < 0.01) && (absVal(val2) < 0.01))
    {
        return 0.0f;
    }
    else
    {
        return 100.0f * (absVal(absVal(val1 - val2) / absVal(val1 + 0.00000001f)));
    }
}

/* Count the elements of two arrays that differ by more than thresholdPercent.
   The first few mismatches are printed. */
int compareResults(float *cpu, float *gpu, int n, double thresholdPercent)
{
    int i, fail;
    fail = 0;
    for (i = 0; i < n; i++)
    {
        if (percentDiff(cpu[i], gpu[i]) > thresholdPercent)
        {
            if (fail < 5)
                fprintf(stderr, "mismatch at %d: cpu %f gpu %f\n", i, cpu[i], gpu[i]);
            fail++;
        }
    }
    printf("Non-Matching CPU-GPU Outputs Beyond Error Threshold of %g Percent: %d\n", thresholdPercent, fail);
    return fail;
}

/* Deterministic pseudo random numbers (a small LCG) so every run, and every
   build of a program, sees the same inputs. */
static unsigned int bench_seed = 12345u;

void bench_srand(unsigned int s)
{
    bench_seed = s;
}

float bench_randf()
{
    bench_seed = bench_seed * 1103515245u + 12345u;
    return (float)((bench_seed >> 8) & 0xFFFFFF) / 16777216.0f;
}

/* Fill n floats with values in [lo, hi). */
void init_random(float *a, int n, float lo, float hi)
{
    int i;
    for (i = 0; i < n; i++)
        a[i] = lo + (hi - lo) * bench_randf();
}

/* Fill a rows x cols row-major matrix with values in [0, 1). */
void init_random_matrix(float *a, int rows, int cols)
{
    int i, j;
    for (i = 0; i < rows; i++)
        for (j = 0; j < cols; j++)
            a[i * cols + j] = bench_randf();
}

/* A random permutation of 0..n-1 (Fisher-Yates). */
void init_permutation(int *p, int n)
{
    int i;
    for (i = 0; i < n; i++)
        p[i] = i;
    for (i = n - 1; i > 0; i--)
    {
        int j = (int)(bench_randf() * (i + 1));
        int t;
        if (j > i)
            j = i;
        t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

/* Read argv[idx] as a positive size, or keep the default. */
int arg_size(int argc, char **argv, int idx, int dflt)
{
    if (argc > idx)
    {
        int v = atoi(argv[idx]);
        if (v > 0)
            return v;
    }
    return dflt;
}

#endif /* BENCH_UTILS_C */
