/* tmv.cu -- transposed matrix-vector product C = A^T B (A is HEIGHT_A x WIDTH_A), shorthand dialect.
 * 1-D thread space, one thread per column of A: idx in 0..WIDTH_A-1 (globalDimX = WIDTH_A),
 * globalDimY = 1.  idx is predefined by the compiler. */

#define WIDTH_A 4096
#define HEIGHT_A 4096
#define globalDimX WIDTH_A
#define globalDimY 1
#define A(y,x) A[(y)*WIDTH_A+(x)]

__global__ void tmv(float *A, float *B, float *C)
{
    float sum = 0;
    for (int i = 0; i < HEIGHT_A; i = i + 1) {
        float a = A(i, idx);
        float b = B[i];
        sum += a * b;
    }
    C[idx] = sum;
}
