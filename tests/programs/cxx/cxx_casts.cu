// cxx_casts.cu: a kernel written in modern C++: a namespace, constexpr sizes, auto, static_cast, nullptr (an
// optional bias), a reference parameter in host code and std::vector. Each row of the matrix is scaled by its
// row number plus one, and the bias of its column is added when one is given.
//
//   ./cxx_casts [rows cols]     prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

namespace kernels {

constexpr int kBlockX = 32;
constexpr int kBlockY = 8;

__global__ void scale_rows(float *out, const float *in, const float *bias, int rows, int cols)
{
    const auto col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    const auto row = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
    if (row < rows && col < cols) {
        auto v = in[row * cols + col] * static_cast<float>(row + 1);
        if (bias != nullptr)
            v += bias[col];
        out[row * cols + col] = v;
    }
}

}  // namespace kernels

static void fill(std::vector<float> &v, int seed)
{
    for (size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<float>((i * seed) % 97) / 97.0f;
}

int main(int argc, char **argv)
{
    const int rows = argc > 2 ? std::atoi(argv[1]) : 4096;
    const int cols = argc > 2 ? std::atoi(argv[2]) : 4096;
    const size_t count = static_cast<size_t>(rows) * cols;
    std::vector<float> in(count), bias(cols), out(count);
    fill(in, 7);
    fill(bias, 3);

    float *d_in = nullptr, *d_out = nullptr, *d_bias = nullptr;
    cudaMalloc(&d_in, count * sizeof(float));
    cudaMalloc(&d_out, count * sizeof(float));
    cudaMalloc(&d_bias, cols * sizeof(float));
    cudaMemcpy(d_in, in.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_bias, bias.data(), cols * sizeof(float), cudaMemcpyHostToDevice);

    const dim3 block(kernels::kBlockX, kernels::kBlockY);
    const dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    kernels::scale_rows<<<grid, block>>>(d_out, d_in, d_bias, rows, cols);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    cudaMemcpy(out.data(), d_out, count * sizeof(float), cudaMemcpyDeviceToHost);

    int fail = 0;
    double checksum = 0.0;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
            const auto expect = in[static_cast<size_t>(r) * cols + c] * static_cast<float>(r + 1) + bias[c];
            const auto got = out[static_cast<size_t>(r) * cols + c];
            if (std::fabs(got - expect) > 1e-4f * (1.0f + std::fabs(expect)))
                ++fail;
            checksum += got;
        }
    std::printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    std::printf("checksum: %.6e\n", checksum);
    std::printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_bias);
    return fail > 0;
}
