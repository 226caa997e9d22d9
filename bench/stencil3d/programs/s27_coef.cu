// 27-point stencil with three coefficients (face, edge, corner), one thread per interior point.
__global__ void stencil27(const float *in, float *out, int nx, int ny, int nz,
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

#include <cstdio>
#include <cstdlib>

void run_s27_coef(const float *in, float *out, int nx, int ny, int nz)
{
    dim3 block(16, 8, 4);
    dim3 grid((nx + 15) / 16, (ny + 7) / 8, (nz + 3) / 4);
    stencil27<<<grid, block>>>(in, out, nx, ny, nz, 0.3f, 0.05f, 0.02f, 0.01f);
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
        run_s27_coef(d_in, d_out, nx, ny, nz);
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
