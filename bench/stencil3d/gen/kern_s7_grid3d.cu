// 7-point Jacobi step, one thread per point on a 3-D grid of 3-D blocks.
#include <cstdio>
#include <cstdlib>
// gpgpu-opt: launch configuration of the optimized 'jacobi7': blocks of 32x8 threads,
// each covering 32x8 threads of the naive launch (one thread per output).
// The file does not launch 'jacobi7', and the optimized kernel gives the naive results only for the naive
// launches checked here: the helpers refuse any other on stderr and exit with EXIT_FAILURE.
__attribute__((unused)) static void jacobi7_check_launch(dim3 naive_grid, dim3 naive_block)
{
    if (!(naive_block.x == 16 && naive_block.y == 16)) {
        fprintf(stderr, "gpgpu-opt: the optimized 'jacobi7' cannot serve the naive launch of grid (%u, %u) and block (%u, %u), %ux%u threads: it needs naive blocks of 16x16 threads (its meaning depends on the block)\n",
                naive_grid.x, naive_grid.y, naive_block.x, naive_block.y,
                naive_grid.x * naive_block.x, naive_grid.y * naive_block.y);
        exit(EXIT_FAILURE);
    }
}

__attribute__((unused)) static dim3 jacobi7_block(dim3 naive_grid, dim3 naive_block)
{
    jacobi7_check_launch(naive_grid, naive_block);
    return dim3(32, 8);
}

__attribute__((unused)) static dim3 jacobi7_grid(dim3 naive_grid, dim3 naive_block)
{
    jacobi7_check_launch(naive_grid, naive_block);
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, (global_y + 7) / 8, (naive_grid.z * naive_block.z + 3) / 4);
}

// gpgpu_opt launch block(32, 8) grid((global_x + 31) / 32, (global_y + 7) / 8)
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
