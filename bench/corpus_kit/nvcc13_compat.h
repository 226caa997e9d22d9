/* Force-included (nvcc -include) when bench/corpus.py and bench/corpus_gpu.py build a suite's programs, the
 * naive and the optimized build alike: CUDA 13 removed runtime calls that older suites still make. Only
 * plain renames live here; a removed feature (texture references, cudaDeviceProp fields) stays an error. */
#ifndef GPGPU_OPT_NVCC13_COMPAT_H
#define GPGPU_OPT_NVCC13_COMPAT_H
#define cudaThreadSynchronize cudaDeviceSynchronize
#define cudaThreadExit cudaDeviceReset
#endif
