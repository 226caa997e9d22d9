// k_naive.cu - the naive one-thread-per-output FP32 loop the compiler starts from.
#include "common.cuh"
template <bool BT>
__global__ void naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K, float alpha, float beta) {
  int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float sum = 0.f;
    for (int k = 0; k < K; ++k) sum += A[(size_t)row * K + k] * (BT ? B[(size_t)col * K + k] : B[(size_t)k * N + col]);
    size_t i = (size_t)row * N + col;
    C[i] = (beta != 0.f) ? alpha * sum + beta * C[i] : alpha * sum;
  }
}
static void run_naive(const GemmArgs& a, cudaStream_t s) {
  dim3 b(32, 8), g(cdiv(a.N, 32), cdiv(a.M, 8));
  if (a.bt) naive<true><<<g, b, 0, s>>>((const float*)a.A, (const float*)a.B, (float*)a.C, a.M, a.N, a.K, (float)a.alpha, (float)a.beta);
  else naive<false><<<g, b, 0, s>>>((const float*)a.A, (const float*)a.B, (float*)a.C, a.M, a.N, a.K, (float)a.alpha, (float)a.beta);
}
void register_naive(std::vector<Variant>& v) {
  v.push_back({"naive_f32", P_F32, 3, run_naive, "one thread per output, FP32 FMA loop over k"});
}
