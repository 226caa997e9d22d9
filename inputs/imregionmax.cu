/* imregionmax.cu -- regional maxima with a 3x3 window on a pre-padded image, shorthand dialect:
 * C(y,x) = 1 if A(y+1,x+1) >= max of the 3x3 window A(y..y+2, x..x+2), else 0.
 * 2-D thread space, one thread per output pixel: idx in 0..WIDTH_C-1, idy in 0..HEIGHT_C-1
 * (globalDimX = WIDTH_C, globalDimY = HEIGHT_C). */

#define WIDTH_A (WIDTH_C+2)
#define WIDTH_C 4096
#define HEIGHT_C 4096
#define globalDimX WIDTH_C
#define globalDimY HEIGHT_C
#define A(y,x) A[(y)*WIDTH_A+(x)]
#define C(y,x) C[(y)*WIDTH_C+(x)]

__global__ void imregionmax(float *A, float *C)
{
    float center = A(idy+1, idx+1);
    float m = -3.0e38f;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            float a = A(idy+i, idx+j);
            m = fmaxf(m, a);
        }
    C(idy, idx) = (center >= m) ? 1.0f : 0.0f;
}
