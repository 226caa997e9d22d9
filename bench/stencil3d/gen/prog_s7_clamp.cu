// 7-point heat step with clamped (replicated) edges: every point has an output.
// gpgpu-opt: launch configuration of the optimized 'heat7': blocks of 32x8 threads,
// each covering 32x8 threads of the naive launch (one thread per output).
__attribute__((unused)) static dim3 heat7_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(32, 8);
}

__attribute__((unused)) static dim3 heat7_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, (global_y + 7) / 8, (naive_grid.z * naive_block.z + 3) / 4);
}

// gpgpu_opt launch block(32, 8) grid((global_x + 31) / 32, (global_y + 7) / 8)
__global__ void heat7(const float *__restrict__ t, float *__restrict__ tn, int nx, int ny, int nz, float a,
                      float b) {
    // gpgpu-opt: each thread computes 4 consecutive z; 2 of its reads per z are the previous z's, carried in
    // registers
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z0 = blockIdx.z * 4;
    if (x >= nx || y >= ny || z0 >= nz)
        return;
    int xm = max(x - 1, 0);
    int xp = min(x + 1, nx - 1);
    int ym = max(y - 1, 0);
    int yp = min(y + 1, ny - 1);
    float t_here = t[(z0 * ny + y) * nx + x];
    float t_below = t[(max(z0 - 1, 0) * ny + y) * nx + x];
    for (int z = z0; z < min(z0 + 4, nz); z++) {
        int zp = min(z + 1, nz - 1);
        const float t_above = t[(zp * ny + y) * nx + x];
        tn[(z * ny + y) * nx + x] = a * t_here + b * (t[(z * ny + y) * nx + xm] + t[(z * ny + y) * nx + xp] + t[(z * ny + ym) * nx + x] + t[(z * ny + yp) * nx + x] + t_below + t_above);
        t_below = t_here;
        t_here = t_above;
    }
}

#include <cstdio>
#include <cstdlib>

void run_s7_clamp(const float *in, float *out, int nx, int ny, int nz)
{
    dim3 block(32, 8, 2);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8, (nz + 1) / 2);
    heat7<<<heat7_grid(grid, block), heat7_block(grid, block)>>>(in, out, nx, ny, nz, 0.4f, 0.1f);
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
        run_s7_clamp(d_in, d_out, nx, ny, nz);
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
