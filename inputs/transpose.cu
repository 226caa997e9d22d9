/* transpose.cu -- naive matrix transpose: out (cols x rows) = in^T, in is rows x cols row-major.
 * 2-D launch over the OUTPUT: x in 0..rows-1 (output column), y in 0..cols-1 (output row);
 * writes are coalesced, reads are strided by cols. */

__global__ void transpose(const float *in, float *out, int rows, int cols)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < rows && y < cols)
        out[y * rows + x] = in[x * cols + y];
}
