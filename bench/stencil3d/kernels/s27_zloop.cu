// 27-point weighted stencil, written out, a 2-D grid marching z.
#define IDX(i, j, k) (((k) * ny + (j)) * nx + (i))
__global__ void box27(const float *a, float *b, int nx, int ny, int nz, float w0, float w1, float w2, float w3)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
        for (int k = 1; k < nz - 1; ++k) {
            float s = w0 * a[IDX(i, j, k)]
                + w1 * (a[IDX(i - 1, j, k)] + a[IDX(i + 1, j, k)] + a[IDX(i, j - 1, k)] + a[IDX(i, j + 1, k)]
                        + a[IDX(i, j, k - 1)] + a[IDX(i, j, k + 1)])
                + w2 * (a[IDX(i - 1, j - 1, k)] + a[IDX(i + 1, j - 1, k)] + a[IDX(i - 1, j + 1, k)] + a[IDX(i + 1, j + 1, k)]
                        + a[IDX(i - 1, j, k - 1)] + a[IDX(i + 1, j, k - 1)] + a[IDX(i, j - 1, k - 1)] + a[IDX(i, j + 1, k - 1)]
                        + a[IDX(i - 1, j, k + 1)] + a[IDX(i + 1, j, k + 1)] + a[IDX(i, j - 1, k + 1)] + a[IDX(i, j + 1, k + 1)])
                + w3 * (a[IDX(i - 1, j - 1, k - 1)] + a[IDX(i + 1, j - 1, k - 1)] + a[IDX(i - 1, j + 1, k - 1)] + a[IDX(i + 1, j + 1, k - 1)]
                        + a[IDX(i - 1, j - 1, k + 1)] + a[IDX(i + 1, j - 1, k + 1)] + a[IDX(i - 1, j + 1, k + 1)] + a[IDX(i + 1, j + 1, k + 1)]);
            b[IDX(i, j, k)] = s;
        }
    }
}
