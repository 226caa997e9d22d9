// stencil3d.cu: heat diffusion on an nx x ny x nz grid with a 7-point stencil, edges clamped (a cell on the
// border reads itself for its missing neighbour), a 3-D grid of 3-D blocks, ITERS steps ping-ponging two
// buffers.
//
//   ./stencil3d [nx ny nz]      prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#define ITERS 8
#define BX 32
#define BY 4
#define BZ 2

__global__ void stencil7(const float *tIn, float *tOut, int nx, int ny, int nz, float cc, float cn)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz)
        return;
    int w = (x == 0) ? x : x - 1;
    int e = (x == nx - 1) ? x : x + 1;
    int n = (y == 0) ? y : y - 1;
    int s = (y == ny - 1) ? y : y + 1;
    int b = max(z - 1, 0);
    int t = min(z + 1, nz - 1);
    int c = x + nx * (y + ny * z);
    tOut[c] = cc * tIn[c]
            + cn * (tIn[w + nx * (y + ny * z)] + tIn[e + nx * (y + ny * z)]
                  + tIn[x + nx * (n + ny * z)] + tIn[x + nx * (s + ny * z)]
                  + tIn[x + nx * (y + ny * b)] + tIn[x + nx * (y + ny * t)]);
}

static void stencil_cpu(const float *in, float *out, int nx, int ny, int nz, float cc, float cn)
{
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                int w = x == 0 ? x : x - 1, e = x == nx - 1 ? x : x + 1;
                int n = y == 0 ? y : y - 1, s = y == ny - 1 ? y : y + 1;
                int b = z == 0 ? z : z - 1, t = z == nz - 1 ? z : z + 1;
                out[x + nx * (y + ny * z)] = cc * in[x + nx * (y + ny * z)]
                    + cn * (in[w + nx * (y + ny * z)] + in[e + nx * (y + ny * z)]
                          + in[x + nx * (n + ny * z)] + in[x + nx * (s + ny * z)]
                          + in[x + nx * (y + ny * b)] + in[x + nx * (y + ny * t)]);
            }
}

int main(int argc, char **argv)
{
    int nx = argc > 3 ? atoi(argv[1]) : 256;
    int ny = argc > 3 ? atoi(argv[2]) : 256;
    int nz = argc > 3 ? atoi(argv[3]) : 64;
    size_t size = (size_t)nx * ny * nz;
    float cc = 0.4f, cn = 0.1f;
    float *host = (float *)malloc(size * sizeof(float));
    float *ref = (float *)malloc(size * sizeof(float));
    float *tmp = (float *)malloc(size * sizeof(float));
    for (size_t i = 0; i < size; i++)
        host[i] = ref[i] = (float)(i % 64) / 8.0f;

    float *d_a, *d_b;
    cudaMalloc((void **)&d_a, size * sizeof(float));
    cudaMalloc((void **)&d_b, size * sizeof(float));
    cudaMemcpy(d_a, host, size * sizeof(float), cudaMemcpyHostToDevice);

    dim3 block(BX, BY, BZ);
    dim3 grid((nx + BX - 1) / BX, (ny + BY - 1) / BY, (nz + BZ - 1) / BZ);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, 0);
    for (int it = 0; it < ITERS; it++) {
        stencil7<<<grid, block>>>(d_a, d_b, nx, ny, nz, cc, cn);
        float *swap = d_a;
        d_a = d_b;
        d_b = swap;
    }
    cudaEventRecord(stop, 0);
    cudaEventSynchronize(stop);
    float ms;
    cudaEventElapsedTime(&ms, start, stop);
    cudaMemcpy(host, d_a, size * sizeof(float), cudaMemcpyDeviceToHost);

    for (int it = 0; it < ITERS; it++) {
        stencil_cpu(ref, tmp, nx, ny, nz, cc, cn);
        float *swap = ref;
        ref = tmp;
        tmp = swap;
    }
    int fail = 0;
    double checksum = 0.0;
    for (size_t i = 0; i < size; i++) {
        if (fabsf(host[i] - ref[i]) > 1e-4f * (1.0f + fabsf(ref[i])))
            fail++;
        checksum += host[i];
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(d_a);
    cudaFree(d_b);
    free(host);
    free(ref);
    free(tmp);
    return fail > 0;
}
