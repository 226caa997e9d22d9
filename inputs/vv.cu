/* vv.cu -- outer-product accumulate C += A B^T, i.e. C(y,x) += A[y]*B[x], shorthand dialect.
 * 2-D thread space, one thread per C element: idx in 0..WIDTH_C-1, idy in 0..HEIGHT_C-1
 * (globalDimX = WIDTH_C, globalDimY = HEIGHT_C).  idx/idy are predefined by the compiler. */

#define WIDTH_C 4096
#define HEIGHT_C 4096
#define globalDimX WIDTH_C
#define globalDimY HEIGHT_C
#define C(y,x) C[(y)*WIDTH_C+(x)]

__global__ void vv(float *A, float *B, float *C)
{
    C(idy, idx) += A[idy] * B[idx];
}
