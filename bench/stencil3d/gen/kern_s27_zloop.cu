// 27-point weighted stencil, written out, a 2-D grid marching z.
#define IDX(i, j, k) (((k) * ny + (j)) * nx + (i))
// gpgpu-opt: launch configuration of the optimized 'box27': blocks of 32x8 threads,
// each covering 32x8 threads of the naive launch (one thread per output).
__attribute__((unused)) static dim3 box27_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(32, 8);
}

__attribute__((unused)) static dim3 box27_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, (global_y + 7) / 8, 32);
}

// gpgpu_opt launch block(32, 8) grid((global_x + 31) / 32, (global_y + 7) / 8)
__global__ void box27(const float *__restrict__ a, float *__restrict__ b, int nx, int ny, int nz, float w0,
                      float w1, float w2, float w3) {
    // gpgpu-opt: the z loop split over the grid's z, each block at least 16 consecutive z; 18 of its reads
    // per z are the previous z's, carried in registers
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int k_chunk = max(16, (nz - 2 + ((int) gridDim.z) - 1) / ((int) gridDim.z));
    const int k0 = 1 + blockIdx.z * k_chunk;
    if (i <= 0 || i >= nx - 1 || j <= 0 || j >= ny - 1 || k0 >= nz - 1)
        return;
    float a1_here = a[(k0 * ny + j) * nx + i];
    float a1_below = a[((k0 - 1) * ny + j) * nx + i];
    float a2_here = a[(k0 * ny + j) * nx + (i - 1)];
    float a2_below = a[((k0 - 1) * ny + j) * nx + (i - 1)];
    float a3_here = a[(k0 * ny + j) * nx + (i + 1)];
    float a3_below = a[((k0 - 1) * ny + j) * nx + (i + 1)];
    float a4_here = a[(k0 * ny + (j - 1)) * nx + i];
    float a4_below = a[((k0 - 1) * ny + (j - 1)) * nx + i];
    float a5_here = a[(k0 * ny + (j + 1)) * nx + i];
    float a5_below = a[((k0 - 1) * ny + (j + 1)) * nx + i];
    float a6_here = a[(k0 * ny + (j - 1)) * nx + (i - 1)];
    float a6_below = a[((k0 - 1) * ny + (j - 1)) * nx + (i - 1)];
    float a7_here = a[(k0 * ny + (j - 1)) * nx + (i + 1)];
    float a7_below = a[((k0 - 1) * ny + (j - 1)) * nx + (i + 1)];
    float a8_here = a[(k0 * ny + (j + 1)) * nx + (i - 1)];
    float a8_below = a[((k0 - 1) * ny + (j + 1)) * nx + (i - 1)];
    float a9_here = a[(k0 * ny + (j + 1)) * nx + (i + 1)];
    float a9_below = a[((k0 - 1) * ny + (j + 1)) * nx + (i + 1)];
    for (int k = k0; k < min(k0 + k_chunk, nz - 1); k++) {
        const float a1_above = a[((k + 1) * ny + j) * nx + i];
        const float a2_above = a[((k + 1) * ny + j) * nx + (i - 1)];
        const float a3_above = a[((k + 1) * ny + j) * nx + (i + 1)];
        const float a4_above = a[((k + 1) * ny + (j - 1)) * nx + i];
        const float a5_above = a[((k + 1) * ny + (j + 1)) * nx + i];
        const float a6_above = a[((k + 1) * ny + (j - 1)) * nx + (i - 1)];
        const float a7_above = a[((k + 1) * ny + (j - 1)) * nx + (i + 1)];
        const float a8_above = a[((k + 1) * ny + (j + 1)) * nx + (i - 1)];
        const float a9_above = a[((k + 1) * ny + (j + 1)) * nx + (i + 1)];
        float s = w0 * a1_here + w1 * (a2_here + a3_here + a4_here + a5_here + a1_below + a1_above) + w2 * (a6_here + a7_here + a8_here + a9_here + a2_below + a3_below + a4_below + a5_below + a2_above + a3_above + a4_above + a5_above) + w3 * (a6_below + a7_below + a8_below + a9_below + a6_above + a7_above + a8_above + a9_above);
        b[(k * ny + j) * nx + i] = s;
        a1_below = a1_here;
        a1_here = a1_above;
        a2_below = a2_here;
        a2_here = a2_above;
        a3_below = a3_here;
        a3_here = a3_above;
        a4_below = a4_here;
        a4_here = a4_above;
        a5_below = a5_here;
        a5_here = a5_above;
        a6_below = a6_here;
        a6_here = a6_above;
        a7_below = a7_here;
        a7_here = a7_above;
        a8_below = a8_here;
        a8_here = a8_above;
        a9_below = a9_here;
        a9_here = a9_above;
    }
}
