/* stencil27.cu -- a 27-point 3-D box average on an nx x ny x nz grid (x fastest), interior points only.
 * 2-D launch over (x, y); each thread marches up the z column. */
__global__ void stencil27(const float *in, float *out, int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || x >= nx - 1 || y < 1 || y >= ny - 1)
        return;
    for (int z = 1; z < nz - 1; z++) {
        float sum = 0.0f;
        for (int dz = -1; dz <= 1; dz++)
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++)
                    sum += in[((z + dz) * ny + (y + dy)) * nx + (x + dx)];
        out[(z * ny + y) * nx + x] = sum * (1.0f / 27.0f);
    }
}
