// 7-point Laplacian, a 2-D grid of threads, each marching its (x, y) column through z.
__global__ void laplace7(const float *u, float *v, int nx, int ny, int nz, float h2inv)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < 1 || i >= nx - 1 || j < 1 || j >= ny - 1)
        return;
    int plane = nx * ny;
    for (int k = 1; k < nz - 1; ++k) {
        int c = k * plane + j * nx + i;
        v[c] = h2inv * (u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx] + u[c - plane] + u[c + plane] - 6.0f * u[c]);
    }
}
