// y = a * x + y over a matrix of ROWS rows of n floats, one thread per element.
#pragma once

__global__ void saxpy_rows(float *y, const float *x, float a, int n)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (col < n && row < ROWS)
        y[row * n + col] = a * x[row * n + col] + y[row * n + col];
}
