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

#include <cstdio>
#include <cstdlib>
int main()
{
    const int nx = 512, ny = 512, nz = 512;
    float *t, *tn;
    cudaMalloc(&t, sizeof(float) * nx * ny * nz);
    cudaMalloc(&tn, sizeof(float) * nx * ny * nz);
    dim3 threads(32, 8, 2);
    dim3 blocks((nx + 31) / 32, (ny + 7) / 8, (nz + 1) / 2);
    heat7<<<blocks, threads>>>(t, tn, nx, ny, nz, 0.4f, 0.1f);
    cudaDeviceSynchronize();
    cudaFree(t);
    cudaFree(tn);
    return 0;
}
