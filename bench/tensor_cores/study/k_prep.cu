// k_prep.cu - pre-pass kernels (split into tf32 hi/lo, transpose) + TMA descriptor helper.
#include "common.cuh"
#include <cudaTypedefs.h>

// ---------------------------------------------------------------------------
// split rows: dst[r][k] for k < Kp (zero for k >= K)
__global__ void k_split_rows(const float* __restrict__ src, float* __restrict__ hi, float* __restrict__ lo,
                             int R, int K, int Kp) {
  size_t total = (size_t)R * Kp;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    int r = (int)(i / Kp), k = (int)(i % Kp);
    float x = (k < K) ? src[(size_t)r * K + k] : 0.f;
    uint32_t h, l; split_tf32(x, h, l);
    hi[i] = __uint_as_float(h); lo[i] = __uint_as_float(l);
  }
}
// vectorized version when K % 4 == 0 (Kp == K)
__global__ void k_split_rows4(const float4* __restrict__ src, float4* __restrict__ hi, float4* __restrict__ lo, size_t n4) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
    float4 x = src[i]; uint32_t h0, l0, h1, l1, h2, l2, h3, l3;
    split_tf32(x.x, h0, l0); split_tf32(x.y, h1, l1); split_tf32(x.z, h2, l2); split_tf32(x.w, h3, l3);
    hi[i] = make_float4(__uint_as_float(h0), __uint_as_float(h1), __uint_as_float(h2), __uint_as_float(h3));
    lo[i] = make_float4(__uint_as_float(l0), __uint_as_float(l1), __uint_as_float(l2), __uint_as_float(l3));
  }
}
void prep_split_rows(const float* src, float* hi, float* lo, int R, int K, int Kp, cudaStream_t s) {
  if (K == Kp && (K % 4) == 0) {
    size_t n4 = (size_t)R * K / 4;
    k_split_rows4<<<132 * 8, 256, 0, s>>>((const float4*)src, (float4*)hi, (float4*)lo, n4);
  } else {
    k_split_rows<<<132 * 8, 256, 0, s>>>(src, hi, lo, R, K, Kp);
  }
}

// ---------------------------------------------------------------------------
// transpose through a 32x32 smem tile: src K x N -> dst N x Kp
template <int MODE>  // 0: plain copy, 1: round tf32, 2: split (dst=hi, dst2=lo)
__global__ void k_transpose_f32(const float* __restrict__ src, float* __restrict__ dst, float* __restrict__ dst2,
                                int K, int N, int Kp) {
  __shared__ float t[32][33];
  int n0 = blockIdx.x * 32, k0 = blockIdx.y * 32;
  int tx = threadIdx.x, ty = threadIdx.y;  // 32 x 8
  for (int i = ty; i < 32; i += 8) {
    int k = k0 + i, n = n0 + tx;
    t[i][tx] = (k < K && n < N) ? src[(size_t)k * N + n] : 0.f;
  }
  __syncthreads();
  for (int i = ty; i < 32; i += 8) {
    int n = n0 + i, k = k0 + tx;
    if (n < N && k < Kp) {
      float x = t[tx][i];
      size_t o = (size_t)n * Kp + k;
      if (MODE == 0) dst[o] = x;
      else if (MODE == 1) dst[o] = __uint_as_float(f2tf32(x));
      else { uint32_t h, l; split_tf32(x, h, l); dst[o] = __uint_as_float(h); dst2[o] = __uint_as_float(l); }
    }
  }
}
void prep_split_transpose(const float* src, float* hiT, float* loT, int K, int N, int Kp, cudaStream_t s) {
  dim3 g(cdiv(N, 32), cdiv(Kp, 32)), b(32, 8);
  k_transpose_f32<2><<<g, b, 0, s>>>(src, hiT, loT, K, N, Kp);
}
void prep_transpose_f32(const float* src, float* dst, int K, int N, int Kp, bool round_tf32, cudaStream_t s) {
  dim3 g(cdiv(N, 32), cdiv(Kp, 32)), b(32, 8);
  if (round_tf32) k_transpose_f32<1><<<g, b, 0, s>>>(src, dst, nullptr, K, N, Kp);
  else k_transpose_f32<0><<<g, b, 0, s>>>(src, dst, nullptr, K, N, Kp);
}
__global__ void k_transpose_f16(const __half* __restrict__ src, __half* __restrict__ dst, int K, int N, int Kp) {
  __shared__ __half t[64][66];
  int n0 = blockIdx.x * 64, k0 = blockIdx.y * 64;
  int tx = threadIdx.x, ty = threadIdx.y;  // 64 x 4
  for (int i = ty; i < 64; i += 4) {
    int k = k0 + i, n = n0 + tx;
    t[i][tx] = (k < K && n < N) ? src[(size_t)k * N + n] : __float2half(0.f);
  }
  __syncthreads();
  for (int i = ty; i < 64; i += 4) {
    int n = n0 + i, k = k0 + tx;
    if (n < N && k < Kp) dst[(size_t)n * Kp + k] = t[tx][i];
  }
}
void prep_transpose_f16(const __half* src, __half* dst, int K, int N, int Kp, cudaStream_t s) {
  dim3 g(cdiv(N, 64), cdiv(Kp, 64)), b(64, 4);
  k_transpose_f16<<<g, b, 0, s>>>(src, dst, K, N, Kp);
}

// ---------------------------------------------------------------------------
static PFN_cuTensorMapEncodeTiled_v12000 get_encode() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    cudaDriverEntryPointQueryResult q;
    void* p = nullptr;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    if (!p || q != cudaDriverEntryPointSuccess) { fprintf(stderr, "no cuTensorMapEncodeTiled\n"); exit(3); }
    fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
  }
  return fn;
}
CUtensorMap make_tmap_2d(const void* ptr, CUtensorMapDataType dt, int elem_bytes,
                         uint64_t rows, uint64_t cols, uint64_t ld_elems,
                         uint32_t box_cols, uint32_t box_rows) {
  CUtensorMap m;
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {ld_elems * (uint64_t)elem_bytes};
  cuuint32_t box[2] = {box_cols, box_rows};
  cuuint32_t es[2] = {1, 1};
  CUresult r = get_encode()(&m, dt, 2, const_cast<void*>(ptr), dims, strides, box, es,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled failed %d (rows %llu cols %llu ld %llu box %u x %u)\n", (int)r,
            (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)ld_elems, box_cols, box_rows);
    exit(3);
  }
  return m;
}
