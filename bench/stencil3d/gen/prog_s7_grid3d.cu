// 7-point Jacobi step, one thread per point on a 3-D grid of 3-D blocks.
// gpgpu-opt: launch configuration of the optimized 'jacobi7': blocks of 32x4 threads,
// each covering 32x4 threads of the naive launch (one thread per output).
__attribute__((unused)) static dim3 jacobi7_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(32, 4);
}

__attribute__((unused)) static dim3 jacobi7_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, (global_y + 3) / 4, (naive_grid.z * naive_block.z + 3) / 4);
}

// gpgpu_opt launch block(32, 4) grid((global_x + 31) / 32, (global_y + 3) / 4)
__global__ void jacobi7(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz,
                        float c0, float c1) {
    // gpgpu-opt: each thread computes 4 consecutive z; 2 of its reads per z are the previous z's, carried in
    // registers
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z0 = blockIdx.z * 4;
    const int z_first = max(z0, 1);
    if (x <= 0 || x >= nx - 1 || y <= 0 || y >= ny - 1 || z_first >= nz - 1)
        return;
    float in_here = in[(z_first * ny + y) * nx + x];
    float in_below = in[(z_first * ny + y) * nx + x - nx * ny];
    for (int z = z_first; z < min(z0 + 4, nz - 1); z++) {
        int i = (z * ny + y) * nx + x;
        const float in_above = in[i + nx * ny];
        out[i] = c0 * in_here + c1 * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx] + in_below + in_above);
        in_below = in_here;
        in_here = in_above;
    }
}

#include <cstdio>
#include <cstdlib>

void run_s7_grid3d(const float *in, float *out, int nx, int ny, int nz)
{
    dim3 block(32, 4, 4);
    dim3 grid((nx + block.x - 1) / block.x, (ny + block.y - 1) / block.y, (nz + block.z - 1) / block.z);
    jacobi7<<<jacobi7_grid(grid, block), jacobi7_block(grid, block)>>>(in, out, nx, ny, nz, 0.4f, 0.1f);
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
        run_s7_grid3d(d_in, d_out, nx, ny, nz);
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
