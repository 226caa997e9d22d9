/**
 * rank1_update.cu: a rank-1 update with a bias added to every row
 *   C[i][j] = alpha * u[i] * v[j] + C[i][j] + bias[j]
 *
 * One 2-D kernel, one thread per element of C (x = column j, y = row i). v[j] and bias[j] are the same for
 * every row: the merge pass lets one thread update several rows and read them once.
 * The sizes are kernel parameters, from the NI/NJ macros or the command line: ./rank1_update 8192 8192
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#ifndef NI
#define NI 2048
#endif
#ifndef NJ
#define NJ 2048
#endif

#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

#define DATA_TYPE float

__global__ void rank1_kernel(int ni, int nj, DATA_TYPE alpha, DATA_TYPE *u, DATA_TYPE *v, DATA_TYPE *bias,
                             DATA_TYPE *C)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < ni) && (j < nj)) {
        C[i * nj + j] = alpha * u[i] * v[j] + C[i * nj + j] + bias[j];
    }
}

void rank1_cpu(int ni, int nj, DATA_TYPE alpha, DATA_TYPE *u, DATA_TYPE *v, DATA_TYPE *bias, DATA_TYPE *C)
{
    for (int i = 0; i < ni; i++)
        for (int j = 0; j < nj; j++)
            C[i * nj + j] = alpha * u[i] * v[j] + C[i * nj + j] + bias[j];
}

int main(int argc, char *argv[])
{
    int ni = arg_size(argc, argv, 1, NI), nj = arg_size(argc, argv, 2, NJ);
    DATA_TYPE alpha = 1.5f;
    DATA_TYPE *u = (DATA_TYPE *)malloc(ni * sizeof(DATA_TYPE));
    DATA_TYPE *v = (DATA_TYPE *)malloc(nj * sizeof(DATA_TYPE));
    DATA_TYPE *bias = (DATA_TYPE *)malloc(nj * sizeof(DATA_TYPE));
    DATA_TYPE *C = (DATA_TYPE *)malloc(ni * nj * sizeof(DATA_TYPE));
    DATA_TYPE *C_gpu = (DATA_TYPE *)malloc(ni * nj * sizeof(DATA_TYPE));
    for (int i = 0; i < ni; i++)
        u[i] = (DATA_TYPE)(i % 7) / 7.0f;
    for (int j = 0; j < nj; j++) {
        v[j] = (DATA_TYPE)(j % 5) / 5.0f;
        bias[j] = (DATA_TYPE)(j % 3);
    }
    for (int k = 0; k < ni * nj; k++)
        C[k] = (DATA_TYPE)(k % 11) / 11.0f;

    DATA_TYPE *u_gpu, *v_gpu, *bias_gpu, *C_dev;
    cudaMalloc((void **)&u_gpu, ni * sizeof(DATA_TYPE));
    cudaMalloc((void **)&v_gpu, nj * sizeof(DATA_TYPE));
    cudaMalloc((void **)&bias_gpu, nj * sizeof(DATA_TYPE));
    cudaMalloc((void **)&C_dev, ni * nj * sizeof(DATA_TYPE));
    cudaMemcpy(u_gpu, u, ni * sizeof(DATA_TYPE), cudaMemcpyHostToDevice);
    cudaMemcpy(v_gpu, v, nj * sizeof(DATA_TYPE), cudaMemcpyHostToDevice);
    cudaMemcpy(bias_gpu, bias, nj * sizeof(DATA_TYPE), cudaMemcpyHostToDevice);
    cudaMemcpy(C_dev, C, ni * nj * sizeof(DATA_TYPE), cudaMemcpyHostToDevice);

    dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
    dim3 grid((size_t)ceil(((float)nj) / ((float)block.x)), (size_t)ceil(((float)ni) / ((float)block.y)));
    double t_start = rtclock();
    rank1_kernel<<<grid, block>>>(ni, nj, alpha, u_gpu, v_gpu, bias_gpu, C_dev);
    cudaDeviceSynchronize();
    double t_end = rtclock();
    fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);
    cudaMemcpy(C_gpu, C_dev, ni * nj * sizeof(DATA_TYPE), cudaMemcpyDeviceToHost);

    t_start = rtclock();
    rank1_cpu(ni, nj, alpha, u, v, bias, C);
    t_end = rtclock();
    fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);
    int fail = compareResults(C, C_gpu, ni * nj, 0.05);

    free(u); free(v); free(bias); free(C); free(C_gpu);
    cudaFree(u_gpu); cudaFree(v_gpu); cudaFree(bias_gpu); cudaFree(C_dev);
    return fail > 0;
}
