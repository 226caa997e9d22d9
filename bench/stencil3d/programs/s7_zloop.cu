// 7-point Laplacian, a 2-D grid of threads, each marching its (x, y) column through z.
__global__ void laplace7(const float *u, float *v, int nx, int ny, int nz, float h2inv)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < 1 || i >= nx - 1 || j < 1 || j >= ny - 1)
        return;
    int plane = nx * ny;
    for (int k = 1; k < nz - 1; ++k) {
        int c = k * plane + j * nx + i;
        v[c] = h2inv * (u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx] + u[c - plane] + u[c + plane] - 6.0f * u[c]);
    }
}

#include <cstdio>
#include <cstdlib>

void run_s7_zloop(const float *in, float *out, int nx, int ny, int nz)
{
    dim3 block(32, 8);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8);
    laplace7<<<grid, block>>>(in, out, nx, ny, nz, 0.1f);
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
        run_s7_zloop(d_in, d_out, nx, ny, nz);
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
