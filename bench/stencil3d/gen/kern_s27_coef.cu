// 27-point stencil with three coefficients (face, edge, corner), one thread per interior point.
__global__ void stencil27(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz,
                          float cc, float cf, float ce, float cv)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1 && z > 0 && z < nz - 1) {
        float faces = 0.0f, edges = 0.0f, corners = 0.0f;
        for (int dz = -1; dz <= 1; dz++)
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int d = (dx != 0) + (dy != 0) + (dz != 0);
                    float v = in[((z + dz) * ny + (y + dy)) * nx + (x + dx)];
                    if (d == 1) faces += v;
                    else if (d == 2) edges += v;
                    else if (d == 3) corners += v;
                }
        out[(z * ny + y) * nx + x] = cc * in[(z * ny + y) * nx + x] + cf * faces + ce * edges + cv * corners;
    }
}
