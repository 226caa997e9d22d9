// template_affine.cu: y = alpha * x + beta with one template kernel, instantiated by its launch sites for
// float (256-thread blocks) and double (128-thread blocks), the way templated samples are written.
//
//   ./template_affine [n]        prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(call)                                                                         \
    do {                                                                                    \
        cudaError_t err_ = (call);                                                          \
        if (err_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            exit(EXIT_FAILURE);                                                             \
        }                                                                                   \
    } while (0)

template <typename T, int BLOCK>
__global__ void affine(T *y, const T *x, T alpha, T beta, int n)
{
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        y[i] = alpha * x[i] + beta;
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : (1 << 24);
    std::vector<float> xf(n), yf(n);
    std::vector<double> xd(n), yd(n);
    for (int i = 0; i < n; ++i) {
        xf[i] = (float)((i * 37) % 1000) / 1000.0f;
        xd[i] = (double)((i * 91) % 997) / 997.0;
    }

    float *dxf, *dyf;
    double *dxd, *dyd;
    CHECK(cudaMalloc(&dxf, n * sizeof(float)));
    CHECK(cudaMalloc(&dyf, n * sizeof(float)));
    CHECK(cudaMalloc(&dxd, n * sizeof(double)));
    CHECK(cudaMalloc(&dyd, n * sizeof(double)));
    CHECK(cudaMemcpy(dxf, xf.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dxd, xd.data(), n * sizeof(double), cudaMemcpyHostToDevice));

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    affine<float, 256><<<(n + 255) / 256, 256>>>(dyf, dxf, 2.0f, 0.5f, n);
    affine<double, 128><<<(n + 127) / 128, 128>>>(dyd, dxd, -1.5, 3.0, n);
    cudaEventRecord(stop);
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaGetLastError());
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);

    CHECK(cudaMemcpy(yf.data(), dyf, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(yd.data(), dyd, n * sizeof(double), cudaMemcpyDeviceToHost));
    int fail = 0;
    double checksum = 0.0;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(yf[i] - (2.0f * xf[i] + 0.5f)) > 1e-5f)
            ++fail;
        if (std::fabs(yd[i] - (-1.5 * xd[i] + 3.0)) > 1e-12)
            ++fail;
        checksum += yf[i] + yd[i];
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(dxf);
    cudaFree(dyf);
    cudaFree(dxd);
    cudaFree(dyd);
    return fail > 0;
}
