// k_mma_f16.cu - mma.sync m16n8k16 f16 -> f32, ldmatrix (A: .x4, row-major B: .x4.trans), cp.async multi-stage.
#include "common.cuh"

namespace mh {
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
struct Cfg {
  static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
  static constexpr int LDA = BK + 8, LDB = BN + 8;   // +16 B: ldmatrix rows hit 8 distinct 16-B bank groups
  static constexpr int A_ELEMS = BM * LDA, B_ELEMS = BK * LDB, STAGE = A_ELEMS + B_ELEMS;
  static constexpr int SMEM = STAGES * STAGE * 2;
  static constexpr int MI = WM / 16, NJ = WN / 8;
  static_assert(NJ % 2 == 0, "NJ even");
};

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(Cfg<BM, BN, BK, WM, WN, STAGES>::THREADS, 1)
hgemm(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C, int M, int N, int K, float alpha, float beta) {
  using CF = Cfg<BM, BN, BK, WM, WN, STAGES>;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  __half* sm = reinterpret_cast<__half*>(smem_raw);
  const int tiles_m = cdiv(M, BM), tiles_n = cdiv(N, BN);
  int tm, tn;
  tile_coords(blockIdx.x, tiles_m, tiles_n, tm, tn);
  const int m0 = tm * BM, n0 = tn * BN, KT = cdiv(K, BK);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;

  auto load_stage = [&](int kt, int s) {
    __half* As = sm + s * CF::STAGE;
    __half* Bs = As + CF::A_ELEMS;
    const int k0 = kt * BK;
#pragma unroll
    for (int i = 0; i < BM * BK / 8 / CF::THREADS; ++i) {
      int c = tid + i * CF::THREADS, r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
      bool p = (m0 + r < M) && (k0 + kc < K);
      cp_async16(smem_u32(As + r * CF::LDA + kc), p ? A + (size_t)(m0 + r) * K + k0 + kc : A, p);
    }
#pragma unroll
    for (int i = 0; i < BK * BN / 8 / CF::THREADS; ++i) {
      int c = tid + i * CF::THREADS, r = c / (BN / 8), nc = (c % (BN / 8)) * 8;
      bool p = (k0 + r < K) && (n0 + nc < N);
      cp_async16(smem_u32(Bs + r * CF::LDB + nc), p ? B + (size_t)(k0 + r) * N + n0 + nc : B, p);
    }
  };

  float acc[CF::MI][CF::NJ][4];
#pragma unroll
  for (int i = 0; i < CF::MI; ++i)
#pragma unroll
    for (int j = 0; j < CF::NJ; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) { if (s < KT) load_stage(s, s); cp_async_commit(); }

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    { int nk = kt + STAGES - 1; if (nk < KT) load_stage(nk, nk % STAGES); cp_async_commit(); }
    const __half* As = sm + (kt % STAGES) * CF::STAGE;
    const __half* Bs = As + CF::A_ELEMS;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t a[CF::MI][4], b[CF::NJ][2];
#pragma unroll
      for (int i = 0; i < CF::MI; ++i)
        ldsm_x4(a[i], smem_u32(As + (wm0 + i * 16 + (lane % 16)) * CF::LDA + kk * 16 + (lane / 16) * 8));
#pragma unroll
      for (int j = 0; j < CF::NJ; j += 2) {
        uint32_t r[4];
        ldsm_x4_t(r, smem_u32(Bs + (kk * 16 + (lane % 16)) * CF::LDB + wn0 + j * 8 + (lane / 16) * 8));
        b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < CF::MI; ++i)
#pragma unroll
        for (int j = 0; j < CF::NJ; ++j) mma16816(acc[i][j], a[i], b[j][0], b[j][1]);
    }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int i = 0; i < CF::MI; ++i)
#pragma unroll
    for (int j = 0; j < CF::NJ; ++j) {
      const int r = m0 + wm0 + i * 16 + g, c = n0 + wn0 + j * 8 + 2 * t;
      epi_store2<float>(C, N, r, c, M, acc[i][j][0], acc[i][j][1], alpha, beta);
      epi_store2<float>(C, N, r + 8, c, M, acc[i][j][2], acc[i][j][3], alpha, beta);
    }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
void run(const GemmArgs& a, cudaStream_t s) {
  if (a.bt) { fprintf(stderr, "hgemm mma.sync: NN only\n"); exit(4); }
  if (a.K % 8 || a.N % 8) { fprintf(stderr, "hgemm needs K, N %% 8 == 0\n"); exit(4); }
  using CF = Cfg<BM, BN, BK, WM, WN, STAGES>;
  auto k = hgemm<BM, BN, BK, WM, WN, STAGES>;
  static bool init = false;
  if (!init) { CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, CF::SMEM)); init = true; }
  int grid = cdiv(a.M, BM) * cdiv(a.N, BN);
  k<<<grid, CF::THREADS, CF::SMEM, s>>>((const __half*)a.A, (const __half*)a.B, (float*)a.C, a.M, a.N, a.K, (float)a.alpha, (float)a.beta);
}
}  // namespace mh

void register_mma_f16(std::vector<Variant>& v) {
  v.push_back({"ms_f16_128x256x32_w64x64_s4", P_F16, 1, mh::run<128, 256, 32, 64, 64, 4>, "mma.sync m16n8k16, ldmatrix(.trans B), 8 warps, warp 64x64, BK32, 4 stages"});
  v.push_back({"ms_f16_128x128x32_w64x64_s4", P_F16, 1, mh::run<128, 128, 32, 64, 64, 4>, "mma.sync m16n8k16, ldmatrix(.trans B), 4 warps, warp 64x64, BK32, 4 stages"});
}
