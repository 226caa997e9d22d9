/* vv.cu -- outer-product accumulate C += A B^T, i.e. C(y,x) += A[y]*B[x], shorthand dialect.
 * 2-D thread space, one thread per C element: idx in 0..WIDTH_C-1, idy in 0..HEIGHT_C-1
 * (globalDimX = WIDTH_C, globalDimY = HEIGHT_C).  idx/idy are predefined by the compiler. */

#define WIDTH_C 4096
#define HEIGHT_C 4096
#define C(y,x) C[(y)*WIDTH_C+(x)]

__global__ void vv(float *A, float *B, float *C) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const int idy = blockIdx.y * blockDim.y + threadIdx.y;
    const float A_val = A[idy];
    const float B_val = B[idx];
    C[idy * 4096 + idx] += A_val * B_val;
}
