// kernels.cuh: the kernels of kernels_header/main.cu, kept in a header the way many programs split them.
#ifndef KERNELS_CUH
#define KERNELS_CUH

#define MV_BLOCK 128

// y = A * x, one thread per row of the row-major rows x cols matrix A
__global__ void matvec(const float *A, const float *x, float *y, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        float sum = 0.0f;
        for (int j = 0; j < cols; j++)
            sum += A[row * cols + j] * x[j];
        y[row] = sum;
    }
}

// z = y + w, one thread per element
__global__ void vec_add(const float *y, const float *w, float *z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        z[i] = y[i] + w[i];
}

#endif
