// Hand-written forms beside the compiler's, to tell what the next lowering must do (bench.cu times them).
#pragma once

// the naive z loop split over the grid's z in chunks of 16, no register queue: what the split alone gives
__global__ void j7_chunk(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz, float c0,
                         float c1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z0 = 1 + blockIdx.z * 16;
    if (!(x > 0 && x < nx - 1 && y > 0 && y < ny - 1))
        return;
    for (int z = z0; z < min(z0 + 16, nz - 1); ++z) {
        int i = (z * ny + y) * nx + x;
        out[i] = c0 * in[i] + c1 * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx] + in[i - nx * ny] + in[i + nx * ny]);
    }
}

// register queue along z with four consecutive x per thread: float4 rows, the x neighbours as scalars
// (nx a multiple of 4; the interior's first and last columns written element by element)
__global__ void j7_queue4(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz, float c0,
                          float c1, int zc)
{
    int x = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z0 = 1 + blockIdx.z * zc;
    int z1 = min(z0 + zc, nz - 1);
    if (x >= nx || y < 1 || y >= ny - 1 || z0 >= z1)
        return;
    int plane = nx * ny;
    int i = (z0 * ny + y) * nx + x;
    float4 below = *(const float4 *)&in[i - plane], here = *(const float4 *)&in[i];
    for (int z = z0; z < z1; ++z, i += plane) {
        float4 above = *(const float4 *)&in[i + plane];
        float4 n = *(const float4 *)&in[i - nx], s = *(const float4 *)&in[i + nx];
        float w = x > 0 ? in[i - 1] : 0.0f, e = x + 4 < nx ? in[i + 4] : 0.0f;
        float4 r;
        r.x = c0 * here.x + c1 * (w + here.y + n.x + s.x + below.x + above.x);
        r.y = c0 * here.y + c1 * (here.x + here.z + n.y + s.y + below.y + above.y);
        r.z = c0 * here.z + c1 * (here.y + here.w + n.z + s.z + below.z + above.z);
        r.w = c0 * here.w + c1 * (here.z + e + n.w + s.w + below.w + above.w);
        if (x > 0 && x + 4 < nx)
            *(float4 *)&out[i] = r;
        else {
            if (x > 0) out[i] = r.x;
            out[i + 1] = r.y;
            out[i + 2] = r.z;
            if (x + 4 < nx) out[i + 3] = r.w;
        }
        below = here;
        here = above;
    }
}

// the same for the 27-point stencil: per plane three rows of a float4 and its two neighbours
#define W27(A)                                                                                                   \
    (w0 * A(0, 0, 0)                                                                                            \
     + w1 * (A(-1, 0, 0) + A(1, 0, 0) + A(0, -1, 0) + A(0, 1, 0) + A(0, 0, -1) + A(0, 0, 1))                    \
     + w2 * (A(-1, -1, 0) + A(1, -1, 0) + A(-1, 1, 0) + A(1, 1, 0) + A(-1, 0, -1) + A(1, 0, -1) + A(0, -1, -1)  \
             + A(0, 1, -1) + A(-1, 0, 1) + A(1, 0, 1) + A(0, -1, 1) + A(0, 1, 1))                               \
     + w3 * (A(-1, -1, -1) + A(1, -1, -1) + A(-1, 1, -1) + A(1, 1, -1) + A(-1, -1, 1) + A(1, -1, 1) + A(-1, 1, 1) \
             + A(1, 1, 1)))
__global__ void b27_queue4(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz, float w0,
                           float w1, float w2, float w3, int zc)
{
    int x = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z0 = 1 + blockIdx.z * zc;
    int z1 = min(z0 + zc, nz - 1);
    if (x >= nx || y < 1 || y >= ny - 1 || z0 >= z1)
        return;
    int plane = nx * ny;
    float q[3][3][6];   // [plane][row][x - 1 .. x + 4]
    auto load = [&](float (&p)[3][6], int at) {
        for (int r = 0; r < 3; r++) {
            int j = at + (r - 1) * nx;
            float4 v = *(const float4 *)&in[j];
            p[r][0] = x > 0 ? in[j - 1] : 0.0f;
            p[r][1] = v.x; p[r][2] = v.y; p[r][3] = v.z; p[r][4] = v.w;
            p[r][5] = x + 4 < nx ? in[j + 4] : 0.0f;
        }
    };
    int i = (z0 * ny + y) * nx + x;
    load(q[0], i - plane);
    load(q[1], i);
    for (int z = z0; z < z1; ++z, i += plane) {
        load(q[2], i + plane);
        float r[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
#define Q(dx, dy, dz) q[(dz) + 1][(dy) + 1][k + 1 + (dx)]
            r[k] = W27(Q);
#undef Q
        }
        for (int k = 0; k < 4; k++)
            if (x + k > 0 && x + k < nx - 1) out[i + k] = r[k];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 6; b++) { q[0][a][b] = q[1][a][b]; q[1][a][b] = q[2][a][b]; }
    }
}
