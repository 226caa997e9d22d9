// 7-point Laplacian, a 2-D grid of threads, each marching its (x, y) column through z.
// gpgpu-opt: launch configuration of the optimized 'laplace7': blocks of 32x8 threads,
// each covering 32x8 threads of the naive launch (one thread per output).
__attribute__((unused)) static dim3 laplace7_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(32, 8);
}

__attribute__((unused)) static dim3 laplace7_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, (global_y + 7) / 8, 32);
}

// gpgpu_opt launch block(32, 8) grid((global_x + 31) / 32, (global_y + 7) / 8)
__global__ void laplace7(const float *__restrict__ u, float *__restrict__ v, int nx, int ny, int nz,
                         float h2inv) {
    // gpgpu-opt: the z loop split over the grid's z, each block at least 16 consecutive z; 2 of its reads per
    // z are the previous z's, carried in registers
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int plane = nx * ny;
    const int k_chunk = max(16, (nz - 2 + ((int) gridDim.z) - 1) / ((int) gridDim.z));
    const int k0 = 1 + blockIdx.z * k_chunk;
    if (i < 1 || i >= nx - 1 || j < 1 || j >= ny - 1 || k0 >= nz - 1)
        return;
    float u_here = u[k0 * plane + j * nx + i];
    float u_below = u[k0 * plane + j * nx + i - plane];
    for (int k = k0; k < min(k0 + k_chunk, nz - 1); k++) {
        int c = k * plane + j * nx + i;
        const float u_val = u[c - 1];
        const float u_val2 = u[c + 1];
        const float u_val3 = u[c - nx];
        const float u_val4 = u[c + nx];
        const float u_above = u[c + plane];
        v[c] = h2inv * (u_val + u_val2 + u_val3 + u_val4 + u_below + u_above - 6.0f * u_here);
        u_below = u_here;
        u_here = u_above;
    }
}

#include <cstdio>
#include <cstdlib>

void run_s7_zloop(const float *in, float *out, int nx, int ny, int nz)
{
    dim3 block(32, 8);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8);
    laplace7<<<laplace7_grid(grid, block), laplace7_block(grid, block)>>>(in, out, nx, ny, nz, 0.1f);
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
