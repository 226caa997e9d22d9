// 27-point weighted stencil, written out, a 2-D grid marching z.
#define IDX(i, j, k) (((k) * ny + (j)) * nx + (i))
__global__ void box27(const float *a, float *b, int nx, int ny, int nz, float w0, float w1, float w2, float w3)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
        for (int k = 1; k < nz - 1; ++k) {
            float s = w0 * a[IDX(i, j, k)]
                + w1 * (a[IDX(i - 1, j, k)] + a[IDX(i + 1, j, k)] + a[IDX(i, j - 1, k)] + a[IDX(i, j + 1, k)]
                        + a[IDX(i, j, k - 1)] + a[IDX(i, j, k + 1)])
                + w2 * (a[IDX(i - 1, j - 1, k)] + a[IDX(i + 1, j - 1, k)] + a[IDX(i - 1, j + 1, k)] + a[IDX(i + 1, j + 1, k)]
                        + a[IDX(i - 1, j, k - 1)] + a[IDX(i + 1, j, k - 1)] + a[IDX(i, j - 1, k - 1)] + a[IDX(i, j + 1, k - 1)]
                        + a[IDX(i - 1, j, k + 1)] + a[IDX(i + 1, j, k + 1)] + a[IDX(i, j - 1, k + 1)] + a[IDX(i, j + 1, k + 1)])
                + w3 * (a[IDX(i - 1, j - 1, k - 1)] + a[IDX(i + 1, j - 1, k - 1)] + a[IDX(i - 1, j + 1, k - 1)] + a[IDX(i + 1, j + 1, k - 1)]
                        + a[IDX(i - 1, j - 1, k + 1)] + a[IDX(i + 1, j - 1, k + 1)] + a[IDX(i - 1, j + 1, k + 1)] + a[IDX(i + 1, j + 1, k + 1)]);
            b[IDX(i, j, k)] = s;
        }
    }
}

#include <cstdio>
#include <cstdlib>

void run_s27_zloop(const float *in, float *out, int nx, int ny, int nz)
{
    dim3 block(32, 8);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8);
    box27<<<grid, block>>>(in, out, nx, ny, nz, 0.3f, 0.05f, 0.02f, 0.01f);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 512;
    int nx = n, ny = n, nz = n;
    size_t bytes = (size_t)nx * ny * nz * sizeof(float);
    float *d_in, *d_out;
    cudaMalloc(&d_in, bytes);
    cudaMalloc(&d_out, bytes);
    cudaMemset(d_in, 0, bytes);
    for (int it = 0; it < 10; it++) {
        run_s27_zloop(d_in, d_out, nx, ny, nz);
        float *t = d_in;
        d_in = d_out;
        d_out = t;
    }
    cudaDeviceSynchronize();
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
    cudaFree(d_in);
    cudaFree(d_out);
    return 0;
}
