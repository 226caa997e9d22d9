// 3-D stencils at N^3 floats (default 512) on the GPU: each naive kernel (kernels/, programs/) against what
// gpgpu-opt made of it (gen/, written by gen.sh) and against a cudaMemcpy D2D copy of the same array, in one run.
// CUDA events, 3 warm-ups, median of 15, L2 flushed before each run, random inputs, outputs poisoned (NaN)
// before each checked run and compared bit for bit with the naive kernel's. "x copy" is the copy's time over
// the kernel's (both move the array in and the array out once at best).
// Build: nvcc -O3 -arch=sm_90 -std=c++17 -o bench bench.cu; run: ./bench [N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define main program_main
namespace n_grid3d {
#include "programs/s7_grid3d.cu"
}
namespace n_clamp {
#include "programs/s7_clamp.cu"
}
namespace n_coef {
#include "programs/s27_coef.cu"
}
namespace n_zloop7 {
#include "programs/s7_zloop.cu"
}
namespace n_zloop27 {
#undef IDX
#include "programs/s27_zloop.cu"
}
namespace o_grid3d {
#include "gen/prog_s7_grid3d.cu"
}
namespace o_clamp {
#include "gen/prog_s7_clamp.cu"
}
namespace o_coef {
#include "gen/prog_s27_coef.cu"
}
namespace o_zloop7 {
#include "gen/prog_s7_zloop.cu"
}
namespace o_zloop27 {
#undef IDX
#include "gen/prog_s27_zloop.cu"
}
namespace k_grid3d {
#include "gen/kern_s7_grid3d.cu"
}
namespace k_clamp {
#include "gen/kern_s7_clamp.cu"
}
namespace k_zloop7 {
#include "gen/kern_s7_zloop.cu"
}
namespace k_zloop27 {
#undef IDX
#include "gen/kern_s27_zloop.cu"
}
#undef main
#include "variants.cuh"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s line %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

static float *flush_buf;
template <class F> static float timeit(F launch)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int w = 0; w < 3; w++) launch();
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<float> ts;
    for (int r = 0; r < 15; r++) {
        CK(cudaMemset(flush_buf, r, 256 << 20));
        CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
        CK(cudaGetLastError());
        float ms; CK(cudaEventElapsedTime(&ms, a, b)); ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 512;
    bool profile = argc > 2 && !strcmp(argv[2], "profile");
    int nx = n, ny = n, nz = n;
    size_t N = (size_t)nx * ny * nz, bytes = N * 4;
    std::vector<float> h(N), a(N), b(N);
    srand(11);
    for (auto &v : h) v = rand() / (float)RAND_MAX - 0.5f;
    float *in, *out, *ref;
    CK(cudaMalloc(&in, bytes)); CK(cudaMalloc(&out, bytes)); CK(cudaMalloc(&ref, bytes));
    CK(cudaMalloc(&flush_buf, 256 << 20));
    CK(cudaMemcpy(in, h.data(), bytes, cudaMemcpyHostToDevice));
    if (profile) {   // one launch of each kernel ncu is asked about
        dim3 b2(32, 8), g2((nx + 31) / 32, (ny + 7) / 8), gq(g2.x / 4 + 1, g2.y, (nz - 2 + 15) / 16);
        n_zloop7::run_s7_zloop(in, out, nx, ny, nz);
        o_zloop7::run_s7_zloop(in, out, nx, ny, nz);
        j7_queue4<<<dim3((nx / 4 + 31) / 32, g2.y, gq.z), b2>>>(in, out, nx, ny, nz, 0.4f, 0.1f, 16);
        o_zloop27::run_s27_zloop(in, out, nx, ny, nz);
        CK(cudaDeviceSynchronize());
        return 0;
    }
    float tcopy = timeit([&] { CK(cudaMemcpy(out, in, bytes, cudaMemcpyDeviceToDevice)); });
    printf("%dx%dx%d floats\n%-44s %8.3f ms %6.2f TB/s  1.000x copy\n", nx, ny, nz, "cudaMemcpy D2D", tcopy,
           2.0 * bytes / tcopy / 1e9);
    auto row = [&](const char *name, float t, const char *check) {
        printf("%-44s %8.3f ms %6.2f TB/s  %5.3fx copy  %s\n", name, t, 2.0 * bytes / t / 1e9, tcopy / t, check);
    };
    // naive: time it, keep its output in `ref`; each optimized form: poison, run once, compare, time
    float tnaive = 0;
    auto naive = [&](const char *name, auto launch) {
        CK(cudaMemset(ref, 0xff, bytes));
        launch(ref); CK(cudaDeviceSynchronize()); CK(cudaGetLastError());
        tnaive = timeit([&] { launch(out); });
        row(name, tnaive, "");
        CK(cudaMemcpy(a.data(), ref, bytes, cudaMemcpyDeviceToHost));
    };
    auto optimized = [&](const char *name, auto launch) {
        CK(cudaMemset(out, 0xff, bytes));
        launch(out); CK(cudaDeviceSynchronize()); CK(cudaGetLastError());
        CK(cudaMemcpy(b.data(), out, bytes, cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (size_t k = 0; k < N; k++) bad += memcmp(&a[k], &b[k], 4) != 0;
        float t = timeit([&] { launch(out); });
        char check[64];
        snprintf(check, 64, "%s, %.3fx naive", bad ? "MISMATCH" : "same bits", tnaive / t);
        row(name, t, check);
    };
    dim3 b2(32, 8), g2((nx + 31) / 32, (ny + 7) / 8);
    dim3 g4((nx / 4 + 31) / 32, g2.y, (nz - 2 + 15) / 16);
    naive("(a) 7-pt 3-D grid (32,4,4), naive", [&](float *o) { n_grid3d::run_s7_grid3d(in, o, nx, ny, nz); });
    optimized("    program: z march", [&](float *o) { o_grid3d::run_s7_grid3d(in, o, nx, ny, nz); });
    optimized("    kernel only: z march", [&](float *o) {
        dim3 b(32, 4, 4), g((nx + 31) / 32, (ny + 3) / 4, (nz + 3) / 4);
        k_grid3d::jacobi7<<<k_grid3d::jacobi7_grid(g, b), k_grid3d::jacobi7_block(g, b)>>>(in, o, nx, ny, nz, 0.4f, 0.1f);
    });
    naive("(c) 7-pt clamped (32,8,2), naive", [&](float *o) { n_clamp::run_s7_clamp(in, o, nx, ny, nz); });
    optimized("    program: z march", [&](float *o) { o_clamp::run_s7_clamp(in, o, nx, ny, nz); });
    optimized("    kernel only: z march", [&](float *o) {
        dim3 b(32, 8, 2), g((nx + 31) / 32, (ny + 7) / 8, (nz + 1) / 2);
        k_clamp::heat7<<<k_clamp::heat7_grid(g, b), k_clamp::heat7_block(g, b)>>>(in, o, nx, ny, nz, 0.4f, 0.1f);
    });
    naive("(b) 7-pt z loop (32,8), naive", [&](float *o) { n_zloop7::run_s7_zloop(in, o, nx, ny, nz); });
    optimized("    program: column march", [&](float *o) { o_zloop7::run_s7_zloop(in, o, nx, ny, nz); });
    optimized("    kernel only: column march", [&](float *o) {
        k_zloop7::laplace7<<<k_zloop7::laplace7_grid(g2, b2), k_zloop7::laplace7_block(g2, b2)>>>(in, o, nx, ny, nz, 0.1f);
    });
    naive("(a) 7-pt (jacobi) as naive again", [&](float *o) { n_grid3d::run_s7_grid3d(in, o, nx, ny, nz); });
    optimized("    hand: z loop in chunks of 16, no queue", [&](float *o) {
        j7_chunk<<<dim3(g2.x, g2.y, (nz - 2 + 15) / 16), b2>>>(in, o, nx, ny, nz, 0.4f, 0.1f);
    });
    optimized("    hand: queue, 4 x per thread (float4)", [&](float *o) {
        j7_queue4<<<g4, b2>>>(in, o, nx, ny, nz, 0.4f, 0.1f, 16);
    });
    optimized("    hand: queue, 4 x per thread, chunks 64", [&](float *o) {
        j7_queue4<<<dim3(g4.x, g4.y, (nz - 2 + 63) / 64), b2>>>(in, o, nx, ny, nz, 0.4f, 0.1f, 64);
    });
    naive("(d) 27-pt loops (16,8,4), naive", [&](float *o) { n_coef::run_s27_coef(in, o, nx, ny, nz); });
    optimized("    program (left as written)", [&](float *o) { o_coef::run_s27_coef(in, o, nx, ny, nz); });
    naive("(d) 27-pt z loop (32,8), naive", [&](float *o) { n_zloop27::run_s27_zloop(in, o, nx, ny, nz); });
    optimized("    program: column march", [&](float *o) { o_zloop27::run_s27_zloop(in, o, nx, ny, nz); });
    optimized("    kernel only: column march", [&](float *o) {
        k_zloop27::box27<<<k_zloop27::box27_grid(g2, b2), k_zloop27::box27_block(g2, b2)>>>(in, o, nx, ny, nz, 0.3f,
                                                                                         0.05f, 0.02f, 0.01f);
    });
    optimized("    hand: queue, 4 x per thread (float4)", [&](float *o) {
        b27_queue4<<<g4, b2>>>(in, o, nx, ny, nz, 0.3f, 0.05f, 0.02f, 0.01f, 16);
    });
    return 0;
}
