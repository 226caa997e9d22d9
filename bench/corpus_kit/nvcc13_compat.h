/* Force-included (nvcc -include) when bench/corpus.py and bench/corpus_gpu.py build a suite's programs, the
 * naive and the optimized build alike: CUDA 13 removed runtime calls and cudaDeviceProp fields that older
 * suites still use. Calls are renamed to their successors; the removed fields, which these programs only
 * print, read another int field instead (the printed device facts are then wrong, the results are not).
 * A removed feature (texture references) stays an error. */
#ifndef GPGPU_OPT_NVCC13_COMPAT_H
#define GPGPU_OPT_NVCC13_COMPAT_H
#define cudaThreadSynchronize cudaDeviceSynchronize
#define cudaThreadExit cudaDeviceReset
#define clockRate major
#define memoryClockRate minor
#define deviceOverlap asyncEngineCount
#define kernelExecTimeoutEnabled integrated
#endif
