// mma_gemm.cuh - mma.sync GEMM for 32-bit (tf32 / tf32x3) and 64-bit (f64) elements.
//   cp.async.cg 16-byte multi-stage pipeline (src-size 0 zero-fill at ragged edges), padded smem
//   (pitch chosen so every fragment load is bank-conflict free), fragments loaded with scalar LDS,
//   row-major B (K x N) consumed directly: the B fragment (k = t + 4v, n = g) is a column read of the
//   [k][n] smem tile, so no transpose is needed; BT = B stored N x K.
#pragma once
#include "common.cuh"

namespace ms {

enum Op { TF32 = 0, TF32X3 = 1, F64K4 = 2, F64K8 = 3, F64K16 = 4, F64_884 = 5 };

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_f64k4(double (&d)[4], const double (&a)[2], const double (&b)[1]) {
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3]) : "d"(a[0]), "d"(a[1]), "d"(b[0]));
}
__device__ __forceinline__ void mma_f64k8(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
               : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}
__device__ __forceinline__ void mma_f64k16(double (&d)[4], const double (&a)[8], const double (&b)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, {%0,%1,%2,%3};\n"
               : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
               : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                 "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}
__device__ __forceinline__ void mma_f64_884(double (&d)[2], const double (&a)[1], const double (&b)[1]) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
               : "+d"(d[0]), "+d"(d[1]) : "d"(a[0]), "d"(b[0]));
}

template <int OP> struct OpT {
  static constexpr bool F64 = OP >= F64K4;
  static constexpr int MT = (OP == F64_884) ? 8 : 16;
  static constexpr int KI = (OP == TF32 || OP == TF32X3 || OP == F64K8) ? 8 : (OP == F64K16 ? 16 : 4);
  static constexpr int NA = MT * KI / 32;
  static constexpr int NB = KI / 4;
  static constexpr int CR = MT * 8 / 32;
};

template <typename T, int OP, int BM, int BN, int BK, int WM, int WN, int STAGES, bool BT>
struct Cfg {
  using O = OpT<OP>;
  static constexpr int WARPS = (BM / WM) * (BN / WN);
  static constexpr int THREADS = WARPS * 32;
  static constexpr int PA = 4;                       // pad (elements) of K-contiguous tiles
  static constexpr int PB = (sizeof(T) == 4) ? 8 : 4; // pad of the [k][n] tile
  static constexpr int LDA = BK + PA;
  static constexpr int LDB = BT ? (BK + PA) : (BN + PB);
  static constexpr int A_ELEMS = BM * LDA;
  static constexpr int B_ELEMS = BT ? BN * LDA : BK * LDB;
  static constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
  static constexpr int SMEM = STAGES * STAGE_ELEMS * sizeof(T);
  static constexpr int CH = 16 / sizeof(T);          // elements per 16-byte cp.async
  static constexpr int MI = WM / O::MT, NJ = WN / 8;
  static_assert(BK % O::KI == 0, "BK");
  static_assert((LDA * sizeof(T)) % 16 == 0 && (LDB * sizeof(T)) % 16 == 0, "16B rows");
  static_assert((BM * BK / CH) % THREADS == 0, "A chunks");
  static_assert((BK * BN / CH) % THREADS == 0, "B chunks");
};

template <typename T, int OP, int BM, int BN, int BK, int WM, int WN, int STAGES, bool BT, int MINB>
__global__ void __launch_bounds__(Cfg<T, OP, BM, BN, BK, WM, WN, STAGES, BT>::THREADS, MINB)
mma_gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K, T alpha, T beta) {
  using CF = Cfg<T, OP, BM, BN, BK, WM, WN, STAGES, BT>;
  using O = typename CF::O;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  T* sm = reinterpret_cast<T*>(smem_raw);

  const int tiles_m = cdiv(M, BM), tiles_n = cdiv(N, BN);
  int tm, tn;
  tile_coords(blockIdx.x, tiles_m, tiles_n, tm, tn);
  const int m0 = tm * BM, n0 = tn * BN;
  const int KT = cdiv(K, BK);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;

  auto load_stage = [&](int kt, int s) {
    T* As = sm + s * CF::STAGE_ELEMS;
    T* Bs = As + CF::A_ELEMS;
    const int k0 = kt * BK;
    constexpr int ACH = BK / CF::CH;  // chunks per A row
#pragma unroll
    for (int i = 0; i < BM * BK / CF::CH / CF::THREADS; ++i) {
      int c = tid + i * CF::THREADS;
      int r = c / ACH, kc = (c % ACH) * CF::CH;
      int gr = m0 + r, gk = k0 + kc;
      bool p = (gr < M) && (gk < K);
      const T* src = p ? (A + (size_t)gr * K + gk) : A;
      cp_async16(smem_u32(As + r * CF::LDA + kc), src, p);
    }
    if constexpr (BT) {
#pragma unroll
      for (int i = 0; i < BN * BK / CF::CH / CF::THREADS; ++i) {
        int c = tid + i * CF::THREADS;
        int r = c / ACH, kc = (c % ACH) * CF::CH;
        int gn = n0 + r, gk = k0 + kc;
        bool p = (gn < N) && (gk < K);
        const T* src = p ? (B + (size_t)gn * K + gk) : B;
        cp_async16(smem_u32(Bs + r * CF::LDB + kc), src, p);
      }
    } else {
      constexpr int BCH = BN / CF::CH;
#pragma unroll
      for (int i = 0; i < BN * BK / CF::CH / CF::THREADS; ++i) {
        int c = tid + i * CF::THREADS;
        int r = c / BCH, nc = (c % BCH) * CF::CH;
        int gk = k0 + r, gn = n0 + nc;
        bool p = (gk < K) && (gn < N);
        const T* src = p ? (B + (size_t)gk * N + gn) : B;
        cp_async16(smem_u32(Bs + r * CF::LDB + nc), src, p);
      }
    }
  };

  T acc[CF::MI][CF::NJ][O::CR];
#pragma unroll
  for (int i = 0; i < CF::MI; ++i)
#pragma unroll
    for (int j = 0; j < CF::NJ; ++j)
#pragma unroll
      for (int r = 0; r < O::CR; ++r) acc[i][j][r] = T(0);

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_stage(s, s);
    cp_async_commit();
  }

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      int nk = kt + STAGES - 1;
      if (nk < KT) load_stage(nk, nk % STAGES);
      cp_async_commit();
    }
    const T* As = sm + (kt % STAGES) * CF::STAGE_ELEMS;
    const T* Bs = As + CF::A_ELEMS;
#pragma unroll
    for (int kk = 0; kk < BK / O::KI; ++kk) {
      const int kb = kk * O::KI;
      if constexpr (!O::F64) {
        uint32_t ah[CF::MI][4], al[CF::MI][4], bh[CF::NJ][2], bl[CF::NJ][2];
#pragma unroll
        for (int i = 0; i < CF::MI; ++i)
#pragma unroll
          for (int v = 0; v < 4; ++v) {
            float x = As[(wm0 + i * 16 + g + 8 * (v & 1)) * CF::LDA + kb + t + 4 * (v >> 1)];
            if constexpr (OP == TF32X3) split_tf32(x, ah[i][v], al[i][v]);
            else ah[i][v] = __float_as_uint(x);
          }
#pragma unroll
        for (int j = 0; j < CF::NJ; ++j)
#pragma unroll
          for (int v = 0; v < 2; ++v) {
            const int n = wn0 + j * 8 + g, k = kb + t + 4 * v;
            float x = BT ? Bs[n * CF::LDB + k] : Bs[k * CF::LDB + n];
            if constexpr (OP == TF32X3) split_tf32(x, bh[j][v], bl[j][v]);
            else bh[j][v] = __float_as_uint(x);
          }
#pragma unroll
        for (int i = 0; i < CF::MI; ++i)
#pragma unroll
          for (int j = 0; j < CF::NJ; ++j) {
            if constexpr (OP == TF32X3) {
              mma_tf32(acc[i][j], al[i], bh[j]);
              mma_tf32(acc[i][j], ah[i], bl[j]);
            }
            mma_tf32(acc[i][j], ah[i], bh[j]);
          }
      } else {
        double a[CF::MI][O::NA], b[CF::NJ][O::NB];
#pragma unroll
        for (int i = 0; i < CF::MI; ++i)
#pragma unroll
          for (int v = 0; v < O::NA; ++v) {
            int r, k;
            if constexpr (O::MT == 16) { r = wm0 + i * 16 + g + 8 * (v & 1); k = kb + t + 4 * (v >> 1); }
            else { r = wm0 + i * 8 + g; k = kb + t; }
            a[i][v] = As[r * CF::LDA + k];
          }
#pragma unroll
        for (int j = 0; j < CF::NJ; ++j)
#pragma unroll
          for (int v = 0; v < O::NB; ++v) {
            const int n = wn0 + j * 8 + g, k = kb + t + 4 * v;
            b[j][v] = BT ? Bs[n * CF::LDB + k] : Bs[k * CF::LDB + n];
          }
#pragma unroll
        for (int i = 0; i < CF::MI; ++i)
#pragma unroll
          for (int j = 0; j < CF::NJ; ++j) {
            if constexpr (OP == F64K4) mma_f64k4(acc[i][j], a[i], b[j]);
            else if constexpr (OP == F64K8) mma_f64k8(acc[i][j], a[i], b[j]);
            else if constexpr (OP == F64K16) mma_f64k16(acc[i][j], a[i], b[j]);
            else mma_f64_884(acc[i][j], a[i], b[j]);
          }
      }
    }
  }
  cp_async_wait<0>();

  // epilogue. m16n8 C fragment: c0 (g,2t) c1 (g,2t+1) c2 (g+8,2t) c3 (g+8,2t+1); m8n8: c0 (g,2t) c1 (g,2t+1)
#pragma unroll
  for (int i = 0; i < CF::MI; ++i)
#pragma unroll
    for (int j = 0; j < CF::NJ; ++j) {
      const int r = m0 + wm0 + i * O::MT + g, c = n0 + wn0 + j * 8 + 2 * t;
      epi_store2<T>(C, N, r, c, M, acc[i][j][0], acc[i][j][1], alpha, beta);
      if constexpr (O::CR == 4) epi_store2<T>(C, N, r + 8, c, M, acc[i][j][2], acc[i][j][3], alpha, beta);
    }
}

template <typename T, int OP, int BM, int BN, int BK, int WM, int WN, int STAGES, int MINB>
void run(const GemmArgs& a, cudaStream_t s) {
  constexpr int CH = 16 / sizeof(T);
  if (a.K % CH || a.N % CH) { fprintf(stderr, "mma.sync path needs K, N multiples of %d (16-byte cp.async)\n", CH); exit(4); }
  int grid = cdiv(a.M, BM) * cdiv(a.N, BN);
  if (a.bt) {
    using CF = Cfg<T, OP, BM, BN, BK, WM, WN, STAGES, true>;
    auto k = mma_gemm<T, OP, BM, BN, BK, WM, WN, STAGES, true, MINB>;
    static bool init = false;
    if (!init) { CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, CF::SMEM)); init = true; }
    k<<<grid, CF::THREADS, CF::SMEM, s>>>((const T*)a.A, (const T*)a.B, (T*)a.C, a.M, a.N, a.K, (T)a.alpha, (T)a.beta);
  } else {
    using CF = Cfg<T, OP, BM, BN, BK, WM, WN, STAGES, false>;
    auto k = mma_gemm<T, OP, BM, BN, BK, WM, WN, STAGES, false, MINB>;
    static bool init = false;
    if (!init) { CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, CF::SMEM)); init = true; }
    k<<<grid, CF::THREADS, CF::SMEM, s>>>((const T*)a.A, (const T*)a.B, (T*)a.C, a.M, a.N, a.K, (T)a.alpha, (T)a.beta);
  }
}

}  // namespace ms
