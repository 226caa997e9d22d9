// wgmma_gemm.cuh - warp-specialized TMA + wgmma GEMM (sm_90a).
//   block tile 128 x BN, 3 warpgroups: WG0 = TMA producer (1 thread), WG1/WG2 = consumers (64 rows each).
//   smem operands: 128B-swizzled tiles written by TMA, BK = 128 bytes of K per stage.
//   A: K-major (row-major M x K).  B: K-major (N x K, "transposed") or, f16 only, MN-major (K x N row-major).
//   X3: tf32x3 - 4 operand tensors (A_hi, A_lo, B_hi, B_lo), 3 wgmma per k-step: lo*hi + hi*lo + hi*hi.
#pragma once
#include "common.cuh"
#include "wgmma_ops.cuh"

namespace wg {

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t ok = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
  } while (!ok);
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
// smem matrix descriptor, 128B swizzle
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
         ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

template <int BN, bool F16, int TB>
__device__ __forceinline__ void mma_op(float (&d)[BN / 2], uint64_t da, uint64_t db, int sd = 1) {
  if constexpr (!F16) {
    if constexpr (BN == 256) wgmma_tf32_n256(d, da, db, sd);
    else if constexpr (BN == 192) wgmma_tf32_n192(d, da, db, sd);
    else if constexpr (BN == 128) wgmma_tf32_n128(d, da, db, sd);
    else wgmma_tf32_n64(d, da, db, sd);
  } else {
    if constexpr (BN == 256) wgmma_f16_n256<TB>(d, da, db, sd);
    else if constexpr (BN == 192) wgmma_f16_n192<TB>(d, da, db, sd);
    else if constexpr (BN == 128) wgmma_f16_n128<TB>(d, da, db, sd);
    else wgmma_f16_n64<TB>(d, da, db, sd);
  }
}

template <int BN, int STAGES, bool X3, bool F16, bool B_MN, int PROMOTE = 0>
struct Cfg {
  static constexpr int BM = 128;
  static constexpr int NC = 2;                    // consumer warpgroups
  static constexpr int THREADS = 128 * (NC + 1);
  static constexpr int BKE = F16 ? 64 : 32;       // K elements per stage (128 bytes)
  static constexpr int KI = F16 ? 16 : 8;         // K per wgmma
  static constexpr int NOP = X3 ? 2 : 1;          // tensors per operand
  static constexpr int A_TILE = BM * 128;
  static constexpr int B_TILE = BN * 128;
  static constexpr int STAGE_BYTES = NOP * (A_TILE + B_TILE);
  static constexpr int SMEM = STAGES * STAGE_BYTES + 1024;
  static_assert(!(B_MN && !F16), "MN-major B only for f16");
  static_assert(!(X3 && F16), "x3 only for tf32");
  static_assert(!B_MN || (BN % 64 == 0), "BN multiple of 64");
};

template <int BN, int STAGES, bool X3, bool F16, bool B_MN, int PROMOTE>
__global__ void __launch_bounds__(384, 1)
wg_gemm(const __grid_constant__ CUtensorMap tA, const __grid_constant__ CUtensorMap tAlo,
        const __grid_constant__ CUtensorMap tB, const __grid_constant__ CUtensorMap tBlo,
        float* __restrict__ C, int M, int N, int K, float alpha, float beta) {
  using CF = Cfg<BN, STAGES, X3, F16, B_MN, PROMOTE>;
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[STAGES], empty_bar[STAGES];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;

  const int tiles_m = cdiv(M, CF::BM), tiles_n = cdiv(N, BN);
  int tm, tn;
  tile_coords(blockIdx.x, tiles_m, tiles_n, tm, tn);
  const int m0 = tm * CF::BM, n0 = tn * BN;
  const int KT = cdiv(K, CF::BKE);
  const int wgi = threadIdx.x / 128, tid = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_u32(&full_bar[s]), 1);
      mbar_init(smem_u32(&empty_bar[s]), CF::NC * 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wgi == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
    if (tid == 0) {
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar_wait(smem_u32(&empty_bar[s]), ((kt / STAGES) - 1) & 1);
        const uint32_t fb = smem_u32(&full_bar[s]);
        const uint32_t st = base + s * CF::STAGE_BYTES;
        mbar_expect_tx(fb, CF::STAGE_BYTES);
        const int k0 = kt * CF::BKE;
        tma_load_2d(st, &tA, k0, m0, fb);
        if constexpr (X3) tma_load_2d(st + CF::A_TILE, &tAlo, k0, m0, fb);
        const uint32_t sb = st + CF::NOP * CF::A_TILE;
        if constexpr (!B_MN) {
          tma_load_2d(sb, &tB, k0, n0, fb);
          if constexpr (X3) tma_load_2d(sb + CF::B_TILE, &tBlo, k0, n0, fb);
        } else {
#pragma unroll
          for (int i = 0; i < BN / 64; ++i) tma_load_2d(sb + i * 8192, &tB, n0 + 64 * i, k0, fb);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int cw = wgi - 1;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

    // issue all wgmma of k-tile kt into d (fresh: first wgmma overwrites d, scale-d = 0)
    auto issue = [&](int kt, float (&d)[BN / 2], bool fresh) {
      const int s = kt % STAGES;
      mbar_wait(smem_u32(&full_bar[s]), (kt / STAGES) & 1);
      const uint32_t st = base + s * CF::STAGE_BYTES;
      const uint32_t a_hi = st + cw * 64 * 128;
      const uint32_t a_lo = a_hi + CF::A_TILE;
      const uint32_t b_hi = st + CF::NOP * CF::A_TILE;
      const uint32_t b_lo = b_hi + CF::B_TILE;
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < CF::BKE / CF::KI; ++kk) {
        const uint32_t offA = kk * 32;
        const int sd0 = (fresh && kk == 0) ? 0 : 1;
        if constexpr (!B_MN) {
          const uint32_t offB = kk * 32;
          if constexpr (X3) {
            mma_op<BN, F16, 0>(d, make_desc(a_lo + offA, 16, 1024), make_desc(b_hi + offB, 16, 1024), sd0);
            mma_op<BN, F16, 0>(d, make_desc(a_hi + offA, 16, 1024), make_desc(b_lo + offB, 16, 1024));
            mma_op<BN, F16, 0>(d, make_desc(a_hi + offA, 16, 1024), make_desc(b_hi + offB, 16, 1024));
          } else {
            mma_op<BN, F16, 0>(d, make_desc(a_hi + offA, 16, 1024), make_desc(b_hi + offB, 16, 1024), sd0);
          }
        } else {
          const uint32_t offB = kk * 16 * 128;  // 16 k-rows of 128 B
          mma_op<BN, F16, 1>(d, make_desc(a_hi + offA, 16, 1024), make_desc(b_hi + offB, 64 * 128, 1024), sd0);
        }
      }
      wg_commit();
    };
    auto fence_regs = [&](float (&d)[BN / 2]) {
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
    };

    if constexpr (!PROMOTE) {
      // accumulate everything in the tensor-core accumulator; keep one wgmma group in flight
      for (int kt = 0; kt < KT; ++kt) {
        issue(kt, acc, false);
        wg_wait<1>();
        if (kt > 0) mbar_arrive(smem_u32(&empty_bar[(kt - 1) % STAGES]));
      }
      wg_wait<0>();
      fence_regs(acc);
    } else if constexpr (PROMOTE == 2) {
      // each k-tile into a fresh partial, wait for it, acc += partial (FP32 FADD, RN). The other consumer
      // warpgroup keeps the tensor cores busy meanwhile (DeepGEMM-style promotion).
      float t0[BN / 2];
      for (int kt = 0; kt < KT; ++kt) {
        issue(kt, t0, true);
        wg_wait<0>();
        fence_regs(t0);
        mbar_arrive(smem_u32(&empty_bar[kt % STAGES]));
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] += t0[i];
      }
    } else {
      // each k-tile into a fresh partial (ping-pong t0/t1), then acc += partial with FP32 FADD (RN):
      // bounds the tensor core's truncating accumulation to BK elements.
      float t0[BN / 2], t1[BN / 2];
      for (int kt = 0; kt < KT; ++kt) {
        if ((kt & 1) == 0) {
          issue(kt, t0, true);
          wg_wait<1>();
          if (kt > 0) {
            fence_regs(t1);
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] += t1[i];
            mbar_arrive(smem_u32(&empty_bar[(kt - 1) % STAGES]));
          }
        } else {
          issue(kt, t1, true);
          wg_wait<1>();
          fence_regs(t0);
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) acc[i] += t0[i];
          mbar_arrive(smem_u32(&empty_bar[(kt - 1) % STAGES]));
        }
      }
      wg_wait<0>();
      if (KT > 0) {
        if (((KT - 1) & 1) == 0) { fence_regs(t0);
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) acc[i] += t0[i];
        } else { fence_regs(t1);
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) acc[i] += t1[i];
        }
      }
    }

    // epilogue: accumulator fragment of m64nBN: d[4j + 2h + e] = (row 16w + g + 8h, col 8j + 2t + e)
    const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int r0 = m0 + cw * 64 + w * 16 + g;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = n0 + 8 * j + 2 * t;
      epi_store2<float>(C, N, r0, col, M, acc[4 * j + 0], acc[4 * j + 1], alpha, beta);
      epi_store2<float>(C, N, r0 + 8, col, M, acc[4 * j + 2], acc[4 * j + 3], alpha, beta);
    }
  }
}

template <int BN, int STAGES, bool X3, bool F16, bool B_MN, int PROMOTE = 0>
void launch(const CUtensorMap& tA, const CUtensorMap& tAlo, const CUtensorMap& tB, const CUtensorMap& tBlo,
            float* C, int M, int N, int K, float alpha, float beta, cudaStream_t s) {
  using CF = Cfg<BN, STAGES, X3, F16, B_MN, PROMOTE>;
  auto kern = wg_gemm<BN, STAGES, X3, F16, B_MN, PROMOTE>;
  static bool init = false;
  if (!init) { CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, CF::SMEM)); init = true; }
  int grid = cdiv(M, CF::BM) * cdiv(N, BN);
  kern<<<grid, CF::THREADS, CF::SMEM, s>>>(tA, tAlo, tB, tBlo, C, M, N, K, alpha, beta);
}

}  // namespace wg
