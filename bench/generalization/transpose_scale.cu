/* transpose_scale.cu -- out = alpha * in^T: in is rows x cols, out is cols x rows, both row-major.
 * 2-D launch: x = the column of in, y = its row. */
__global__ void transpose_scale(const float *in, float *out, int rows, int cols, float alpha)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols)
        out[c * rows + r] = alpha * in[r * cols + c];
}
