// common.cuh - shared helpers for the tensor-core feasibility study.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda.h>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <string>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); exit(2);} } while (0)

// ---------------------------------------------------------------------------
// Variant registry (host side)
// ---------------------------------------------------------------------------
enum Prec { P_F32 = 0, P_TF32X3 = 1, P_TF32 = 2, P_F16 = 3, P_F64 = 4 };

struct GemmArgs {
  int M, N, K;
  const void* A;     // M x K row-major
  const void* B;     // K x N row-major (bt=false) or N x K row-major (bt=true)
  void* C;           // M x N row-major (float, or double for F64)
  double alpha, beta;
  bool bt;
  void* ws;          // workspace (pre-pass buffers)
  size_t ws_bytes;
};
typedef void (*LaunchFn)(const GemmArgs&, cudaStream_t);
struct Variant {
  std::string name;
  int prec;
  int layouts;       // bit0: NN (row-major B) supported, bit1: NT (B stored N x K)
  LaunchFn fn;
  std::string note;  // structure description
};

void register_naive(std::vector<Variant>&);
void register_wgmma_tf32(std::vector<Variant>&);
void register_wgmma_f16(std::vector<Variant>&);
void register_mma_f32(std::vector<Variant>&);
void register_mma_f64(std::vector<Variant>&);
void register_mma_f16(std::vector<Variant>&);
void register_gen(std::vector<Variant>&);

// pre-pass launchers (k_prep.cu)
// split rows: src R x K (ld K) -> hi, lo R x Kp (Kp = round_up(K,4)), zero padded
void prep_split_rows(const float* src, float* hi, float* lo, int R, int K, int Kp, cudaStream_t s);
// split + transpose: src K x N (ld N) -> hiT, loT N x Kp
void prep_split_transpose(const float* src, float* hiT, float* loT, int K, int N, int Kp, cudaStream_t s);
// transpose (+ optional tf32 rna rounding): src K x N -> dst N x Kp
void prep_transpose_f32(const float* src, float* dst, int K, int N, int Kp, bool round_tf32, cudaStream_t s);
void prep_transpose_f16(const __half* src, __half* dst, int K, int N, int Kp, cudaStream_t s);

// TMA descriptor helper (host) - 2D tensor, inner dim = cols
CUtensorMap make_tmap_2d(const void* ptr, CUtensorMapDataType dt, int elem_bytes,
                         uint64_t rows, uint64_t cols, uint64_t ld_elems,
                         uint32_t box_cols, uint32_t box_rows);

__host__ __device__ static inline int cdiv(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ static inline int round_up(int a, int b) { return cdiv(a, b) * b; }

// ---------------------------------------------------------------------------
// Device helpers
// ---------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
  int n = pred ? 16 : 0;   // src-size 0 -> zero-fill
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
__device__ __forceinline__ uint32_t f2tf32(float x) {
  uint32_t r; asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x)); return r;
}
// hi = rna_tf32(x), lo = rna_tf32(x - hi)
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = f2tf32(x);
  lo = f2tf32(x - __uint_as_float(hi));
}

// C = alpha*acc + beta*C (beta==0 -> C not read), guarded
template <typename T>
__device__ __forceinline__ void epi_store(T* C, int N, int r, int c, int M, T v, T alpha, T beta) {
  if (r < M && c < N) {
    size_t idx = (size_t)r * N + c;
    T o = alpha * v;
    if (beta != T(0)) o += beta * C[idx];
    C[idx] = o;
  }
}
// pair store (c, c+1), vectorized when both in range and aligned
template <typename T>
__device__ __forceinline__ void epi_store2(T* C, int N, int r, int c, int M, T v0, T v1, T alpha, T beta) {
  if (r >= M) return;
  size_t idx = (size_t)r * N + c;
  if (c + 1 < N && ((N & 1) == 0)) {
    if (sizeof(T) == 4) {
      float2* p = reinterpret_cast<float2*>(C + idx);
      float2 o = make_float2((float)(alpha * v0), (float)(alpha * v1));
      if (beta != T(0)) { float2 old = *p; o.x += (float)beta * old.x; o.y += (float)beta * old.y; }
      *p = o;
    } else {
      double2* p = reinterpret_cast<double2*>(C + idx);
      double2 o = make_double2((double)(alpha * v0), (double)(alpha * v1));
      if (beta != T(0)) { double2 old = *p; o.x += (double)beta * old.x; o.y += (double)beta * old.y; }
      *p = o;
    }
  } else {
    if (c < N) { T o = alpha * v0; if (beta != T(0)) o += beta * C[idx]; C[idx] = o; }
    if (c + 1 < N) { T o = alpha * v1; if (beta != T(0)) o += beta * C[idx + 1]; C[idx + 1] = o; }
  }
}

// grouped tile rasterization for L2 reuse
__device__ __forceinline__ void tile_coords(int bid, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int G = 8;
  int per_group = G * tiles_n;
  int group = bid / per_group;
  int first_m = group * G;
  int gsz = min(tiles_m - first_m, G);
  int in = bid % per_group;
  tm = first_m + in % gsz;
  tn = in / gsz;
}
