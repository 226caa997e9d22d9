/* csr_spmv.cu -- y = A x for a sparse A in CSR form (row_ptr, col_idx, vals). 1-D launch, one thread per row. */
__global__ void csr_spmv(const int *row_ptr, const int *col_idx, const float *vals, const float *x, float *y,
                         int rows)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        float dot = 0.0f;
        for (int k = row_ptr[row]; k < row_ptr[row + 1]; k++)
            dot += vals[k] * x[col_idx[k]];
        y[row] = dot;
    }
}
