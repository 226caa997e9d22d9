// 7-point Jacobi step, one thread per point on a 3-D grid of 3-D blocks.
__global__ void jacobi7(const float *in, float *out, int nx, int ny, int nz, float c0, float c1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1 && z > 0 && z < nz - 1) {
        int i = (z * ny + y) * nx + x;
        out[i] = c0 * in[i] + c1 * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]
                                    + in[i - nx * ny] + in[i + nx * ny]);
    }
}
