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

void run_s7_clamp(const float *in, float *out, int nx, int ny, int nz)
{
    dim3 block(32, 8, 2);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8, (nz + 1) / 2);
    heat7<<<grid, block>>>(in, out, nx, ny, nz, 0.4f, 0.1f);
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
