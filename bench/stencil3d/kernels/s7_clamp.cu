// 7-point heat step with clamped (replicated) edges: every point has an output.
__global__ void heat7(const float *t, float *tn, int nx, int ny, int nz, float a, float b)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz)
        return;
    int xm = max(x - 1, 0), xp = min(x + 1, nx - 1);
    int ym = max(y - 1, 0), yp = min(y + 1, ny - 1);
    int zm = max(z - 1, 0), zp = min(z + 1, nz - 1);
    #define AT(X, Y, Z) t[((Z) * ny + (Y)) * nx + (X)]
    tn[(z * ny + y) * nx + x] = a * AT(x, y, z)
        + b * (AT(xm, y, z) + AT(xp, y, z) + AT(x, ym, z) + AT(x, yp, z) + AT(x, y, zm) + AT(x, y, zp));
    #undef AT
}
