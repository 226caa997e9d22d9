/* stencil7.cu -- a 7-point 3-D Jacobi sweep on an nx x ny x nz grid (x fastest): the interior points get
 * c0 * centre + c1 * (the six face neighbours); the boundary is left alone.
 * 3-D launch, one thread per point: x, y and z from the block and thread indices. */
__global__ void stencil7(const float *in, float *out, int nx, int ny, int nz, float c0, float c1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1 && z > 0 && z < nz - 1) {
        int plane = nx * ny;
        int i = z * plane + y * nx + x;
        out[i] = c0 * in[i]
               + c1 * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx] + in[i - plane] + in[i + plane]);
    }
}
