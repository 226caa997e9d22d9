// The bodies bench/fill_rule.py times naive against widened by 2 and by 4 at 16K to 8M elements: streaming
// bodies of one to sixteen arrays, bodies with one to four long-latency operations per element, and a chain of
// eight (Rodinia cfd's step factor). The rule they set: launch_dispatch.min_threads_widened.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void scale(int n, float a, float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
__global__ void saxpy(int n, float a, float *x, float *y, float *z)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = a * x[i] + y[i];
}
__global__ void soa5(int n, float *old_v, float *v, float *sf, float *flux)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float f = sf[i] / 3.0f;
        v[i + 0*n] = old_v[i + 0*n] + f*flux[i + 0*n];
        v[i + 1*n] = old_v[i + 1*n] + f*flux[i + 1*n];
        v[i + 2*n] = old_v[i + 2*n] + f*flux[i + 2*n];
        v[i + 3*n] = old_v[i + 3*n] + f*flux[i + 3*n];
        v[i + 4*n] = old_v[i + 4*n] + f*flux[i + 4*n];
    }
}
__global__ void chain(int n, float *v, float *areas, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float d = v[i + 0*n];
        float mx = v[i + 1*n] / d, my = v[i + 2*n] / d, mz = v[i + 3*n] / d;
        float e = v[i + 4*n];
        float s2 = mx*mx + my*my + mz*mz;
        float p = 0.4f * (e - 0.5f * d * s2);
        float c = sqrtf(1.4f * p / d);
        out[i] = 0.5f / (sqrtf(areas[i]) * (sqrtf(s2) + c));
    }
}
__global__ void extract(long n, float *d_I)
{
    int ei = blockIdx.x * blockDim.x + threadIdx.x;
    if (ei < n) d_I[ei] = exp(d_I[ei] / 255);
}
__global__ void compress(long n, float *d_I)
{
    int ei = blockIdx.x * blockDim.x + threadIdx.x;
    if (ei < n) d_I[ei] = log(d_I[ei]) * 255;
}
__global__ void chain2(int n, float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sqrtf(x[i]) / (x[i] + 1.0f);
}
__global__ void chain4(int n, float *x, float *y, float *z)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = sqrtf(x[i] / y[i]) + sqrtf(y[i]) / x[i];
}
__global__ void dscale(int n, double a, double *x, double *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
__global__ void time_step(int j, int nelr, float *old_variables, float *variables, float *step_factors, float *fluxes)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nelr) {
        float factor = step_factors[i] / float(3 + 1 - j);
        variables[i + 0*nelr] = old_variables[i + 0*nelr] + factor*fluxes[i + 0*nelr];
        variables[i + 4*nelr] = old_variables[i + 4*nelr] + factor*fluxes[i + 4*nelr];
        variables[i + 1*nelr] = old_variables[i + 1*nelr] + factor*fluxes[i + 1*nelr];
        variables[i + 2*nelr] = old_variables[i + 2*nelr] + factor*fluxes[i + 2*nelr];
        variables[i + 3*nelr] = old_variables[i + 3*nelr] + factor*fluxes[i + 3*nelr];
    }
}
int main()
{
    int n = 1 << 22;
    float *x, *y, *z, *w;
    double *dx, *dy;
    cudaMalloc(&x, 5 * n * sizeof(float));
    cudaMalloc(&y, 5 * n * sizeof(float));
    cudaMalloc(&z, 5 * n * sizeof(float));
    cudaMalloc(&w, 5 * n * sizeof(float));
    cudaMalloc(&dx, n * sizeof(double));
    cudaMalloc(&dy, n * sizeof(double));
    scale<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y, z);
    soa5<<<(n + 255) / 256, 256>>>(n, x, y, z, w);
    chain<<<(n + 255) / 256, 256>>>(n, x, y, z);
    extract<<<(n + 255) / 256, 256>>>(n, x);
    compress<<<(n + 255) / 256, 256>>>(n, y);
    chain2<<<(n + 255) / 256, 256>>>(n, x, y);
    chain4<<<(n + 255) / 256, 256>>>(n, x, y, z);
    dscale<<<(n + 255) / 256, 256>>>(n, 2.0, dx, dy);
    time_step<<<(n + 255) / 256, 256>>>(1, n, x, y, z, w);
    cudaDeviceSynchronize();
    return 0;
}
