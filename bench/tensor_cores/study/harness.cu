// harness.cu - data generation, FP64 reference (cublasDgemm), cuBLAS references, checks and timing.
// usage: bench [--only substr[,substr...]] [--refs] [--shapes s,m,b] [--reps N] [--csv file]
#include "common.cuh"
#include <dlfcn.h>
#include <algorithm>
#include <cmath>
#include <cstring>

// ---------------------------------------------------------------------------
// cuBLAS through dlopen (no header / link dependency)
typedef void* cublasHandle_t;
typedef int (*fnCreate)(cublasHandle_t*);
typedef int (*fnSetStream)(cublasHandle_t, cudaStream_t);
typedef int (*fnSetMath)(cublasHandle_t, int);
typedef int (*fnSgemm)(cublasHandle_t, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*, float*, int);
typedef int (*fnDgemm)(cublasHandle_t, int, int, int, int, int, const double*, const double*, int, const double*, int, const double*, double*, int);
typedef int (*fnGemmEx)(cublasHandle_t, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int, const void*, void*, int, int, int, int);
static struct {
  cublasHandle_t h; fnSgemm sgemm; fnDgemm dgemm; fnGemmEx gemmex; fnSetMath setmath;
} blas;
enum { OP_N = 0, OP_T = 1, R32F = 0, R64F = 1, R16F = 2, C32F = 68, C32F_TF32 = 77, C64F = 70, ALGO_DEFAULT = -1 };
#define BK_(x) do { int st_ = (x); if (st_ != 0) { fprintf(stderr, "cuBLAS error %d at %s:%d\n", st_, __FILE__, __LINE__); exit(5);} } while (0)

static void load_blas(cudaStream_t s) {
  const char* names[] = {getenv("CUBLAS_LIB"), "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  void* lib = nullptr;
  for (const char* n : names) if (n && (lib = dlopen(n, RTLD_NOW | RTLD_GLOBAL))) break;
  if (!lib) { fprintf(stderr, "cannot dlopen cuBLAS: %s\n", dlerror()); exit(5); }
  auto sym = [&](const char* a) { void* p = dlsym(lib, a); if (!p) { fprintf(stderr, "missing %s\n", a); exit(5);} return p; };
  BK_(((fnCreate)sym("cublasCreate_v2"))(&blas.h));
  BK_(((fnSetStream)sym("cublasSetStream_v2"))(blas.h, s));
  blas.setmath = (fnSetMath)sym("cublasSetMathMode");
  BK_(blas.setmath(blas.h, 0));  // CUBLAS_DEFAULT_MATH: plain FP32 SGEMM
  blas.sgemm = (fnSgemm)sym("cublasSgemm_v2");
  blas.dgemm = (fnDgemm)sym("cublasDgemm_v2");
  blas.gemmex = (fnGemmEx)sym("cublasGemmEx");
}
// row-major C(MxN) = A(MxK) * B : column-major C^T = B^T A^T
static void blas_sgemm(const GemmArgs& a, cudaStream_t) {
  float al = (float)a.alpha, be = (float)a.beta;
  BK_(blas.sgemm(blas.h, a.bt ? OP_T : OP_N, OP_N, a.N, a.M, a.K, &al, (const float*)a.B, a.bt ? a.K : a.N,
                 (const float*)a.A, a.K, &be, (float*)a.C, a.N));
}
static void blas_dgemm(const GemmArgs& a, cudaStream_t) {
  double al = a.alpha, be = a.beta;
  BK_(blas.dgemm(blas.h, a.bt ? OP_T : OP_N, OP_N, a.N, a.M, a.K, &al, (const double*)a.B, a.bt ? a.K : a.N,
                 (const double*)a.A, a.K, &be, (double*)a.C, a.N));
}
static void blas_tf32(const GemmArgs& a, cudaStream_t) {
  float al = (float)a.alpha, be = (float)a.beta;
  BK_(blas.gemmex(blas.h, a.bt ? OP_T : OP_N, OP_N, a.N, a.M, a.K, &al, a.B, R32F, a.bt ? a.K : a.N, a.A, R32F, a.K,
                  &be, a.C, R32F, a.N, C32F_TF32, ALGO_DEFAULT));
}
static void blas_f16(const GemmArgs& a, cudaStream_t) {
  float al = (float)a.alpha, be = (float)a.beta;
  BK_(blas.gemmex(blas.h, a.bt ? OP_T : OP_N, OP_N, a.N, a.M, a.K, &al, a.B, R16F, a.bt ? a.K : a.N, a.A, R16F, a.K,
                  &be, a.C, R32F, a.N, C32F, ALGO_DEFAULT));
}

// ---------------------------------------------------------------------------
__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return (uint32_t)x;
}
__global__ void k_rand_f32(float* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (float)((hash32(i * 2654435761ULL + seed) >> 8) * (1.0 / 8388608.0) - 1.0);  // [-1, 1)
}
__global__ void k_rand_f64(double* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t hi = hash32(i * 2654435761ULL + seed), lo = hash32(i * 40503ULL + seed * 7 + 1);
    uint64_t m = ((hi << 21) ^ lo) & ((1ULL << 53) - 1);
    p[i] = (double)m * (2.0 / 9007199254740992.0) - 1.0;
  }
}
__global__ void k_f32_to_f64(const float* s, double* d, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = s[i];
}
__global__ void k_f32_to_f16(const float* s, __half* d, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = __float2half_rn(s[i]);
}
__global__ void k_f16_to_f64(const __half* s, double* d, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = (double)__half2float(s[i]);
}
__global__ void k_transpose_copy(const float* s, float* d, int R, int Cc) {  // d[c][r] = s[r][c]
  __shared__ float t[32][33];
  int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
  for (int i = threadIdx.y; i < 32; i += 8) { int r = r0 + i, c = c0 + threadIdx.x; if (r < R && c < Cc) t[i][threadIdx.x] = s[(size_t)r * Cc + c]; }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) { int c = c0 + i, r = r0 + threadIdx.x; if (r < R && c < Cc) d[(size_t)c * R + r] = t[threadIdx.x][i]; }
}
// error: expected = alpha*ref + beta*c0
struct ErrAcc { double sd2, sr2; unsigned long long maxd, maxr, nbad; };
template <typename TO, typename TC>
__global__ void k_err(const TO* out, const double* ref, const TC* c0, double alpha, double beta, size_t n, ErrAcc* acc) {
  double sd2 = 0, sr2 = 0, md = 0, mr = 0; unsigned long long bad = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    double e = alpha * ref[i] + (c0 ? beta * (double)c0[i] : 0.0);
    double o = (double)out[i];
    if (!isfinite(o)) { bad++; continue; }
    double d = fabs(o - e);
    sd2 += d * d; sr2 += e * e; md = fmax(md, d); mr = fmax(mr, fabs(e));
  }
  for (int off = 16; off; off >>= 1) {
    sd2 += __shfl_xor_sync(0xffffffff, sd2, off); sr2 += __shfl_xor_sync(0xffffffff, sr2, off);
    md = fmax(md, __shfl_xor_sync(0xffffffff, md, off)); mr = fmax(mr, __shfl_xor_sync(0xffffffff, mr, off));
    bad += __shfl_xor_sync(0xffffffff, bad, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&acc->sd2, sd2); atomicAdd(&acc->sr2, sr2);
    atomicMax(&acc->maxd, (unsigned long long)__double_as_longlong(md));
    atomicMax(&acc->maxr, (unsigned long long)__double_as_longlong(mr));
    atomicAdd(&acc->nbad, bad);
  }
}

// ---------------------------------------------------------------------------
static cudaStream_t g_s;
static ErrAcc* g_acc;
static const int GR = 132 * 8, BL = 256;

struct Err { double maxrel, normrel; unsigned long long nbad; };
template <typename TO, typename TC>
static Err compute_err(const TO* out, const double* ref, const TC* c0, double alpha, double beta, size_t n) {
  CK(cudaMemsetAsync(g_acc, 0, sizeof(ErrAcc), g_s));
  k_err<TO, TC><<<GR, BL, 0, g_s>>>(out, ref, c0, alpha, beta, n, g_acc);
  CK(cudaGetLastError());
  ErrAcc h; CK(cudaMemcpyAsync(&h, g_acc, sizeof(h), cudaMemcpyDeviceToHost, g_s)); CK(cudaStreamSynchronize(g_s));
  double maxd, maxr; memcpy(&maxd, &h.maxd, 8); memcpy(&maxr, &h.maxr, 8);
  return {maxd / maxr, sqrt(h.sd2 / h.sr2), h.nbad};
}

struct Shape { int M, N, K; const char* tag; bool timed; };

int main(int argc, char** argv) {
  std::vector<std::string> only;
  bool refs = false;
  std::string shapes = "s,m,b";
  int reps = 25;
  const char* csv = "results.csv";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) { std::string v = argv[++i]; size_t p = 0;
      while (p != std::string::npos) { size_t q = v.find(',', p); only.push_back(v.substr(p, q == std::string::npos ? q : q - p)); p = q == std::string::npos ? q : q + 1; } }
    else if (a == "--refs") refs = true;
    else if (a == "--shapes" && i + 1 < argc) shapes = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = atoi(argv[++i]);
    else if (a == "--csv" && i + 1 < argc) csv = argv[++i];
    else if (a == "--list") {
      std::vector<Variant> kv;
      register_wgmma_tf32(kv); register_wgmma_f16(kv); register_mma_f32(kv); register_mma_f64(kv); register_mma_f16(kv); register_gen(kv);
      for (auto& v : kv) printf("%s\n", v.name.c_str());
      return 0;
    }
  }
  CK(cudaStreamCreate(&g_s));
  CK(cudaMalloc(&g_acc, sizeof(ErrAcc)));
  load_blas(g_s);

  std::vector<Variant> vars, kv;
  // the references: all with --refs, else those --only names (`--only cublas_f16,gen_f16`)
  kv.push_back({"cublas_sgemm", P_F32, 3, blas_sgemm, "cublasSgemm (FP32, default math)"});
  kv.push_back({"cublas_tf32", P_TF32, 3, blas_tf32, "cublasGemmEx FP32 COMPUTE_32F_FAST_TF32"});
  kv.push_back({"cublas_f16", P_F16, 3, blas_f16, "cublasGemmEx f16 in, f32 out, COMPUTE_32F"});
  kv.push_back({"cublas_dgemm", P_F64, 1, blas_dgemm, "cublasDgemm"});
  register_naive(kv);
  if (refs) { vars = kv; kv.clear(); }
  register_wgmma_tf32(kv); register_wgmma_f16(kv); register_mma_f32(kv); register_mma_f64(kv); register_mma_f16(kv); register_gen(kv);
  for (auto& v : kv) {
    bool take = false;
    for (auto& o : only) if (!o.empty() && v.name.find(o) != std::string::npos) take = true;
    if (take) vars.push_back(v);
  }
  if (vars.empty()) { fprintf(stderr, "no variants selected\n"); return 1; }

  FILE* fc = fopen(csv, "a");
  std::vector<Shape> sh;
  if (shapes.find('s') != std::string::npos) sh.push_back({333, 520, 264, "333x520x264", false});
  if (shapes.find('m') != std::string::npos) sh.push_back({3000, 5000, 2000, "3000x5000x2000", true});
  if (shapes.find('b') != std::string::npos) sh.push_back({4096, 4096, 4096, "4096^3", true});

  const size_t FLUSH = 256ull << 20;
  void* flush; CK(cudaMalloc(&flush, FLUSH));

  for (auto& S : sh) {
    const int M = S.M, N = S.N, K = S.K;
    const size_t nA = (size_t)M * K, nB = (size_t)K * N, nC = (size_t)M * N;
    float *A32, *B32, *Bt32, *C32, *C0f; __half *A16, *B16, *Bt16; double *A64, *B64, *Ad, *Bd, *R32, *R16, *R64, *C64, *C0d;
    CK(cudaMalloc(&A32, nA * 4)); CK(cudaMalloc(&B32, nB * 4)); CK(cudaMalloc(&Bt32, nB * 4));
    CK(cudaMalloc(&C32, nC * 4)); CK(cudaMalloc(&C0f, nC * 4));
    CK(cudaMalloc(&A16, nA * 2)); CK(cudaMalloc(&B16, nB * 2)); CK(cudaMalloc(&Bt16, nB * 2));
    CK(cudaMalloc(&A64, nA * 8)); CK(cudaMalloc(&B64, nB * 8)); CK(cudaMalloc(&Ad, nA * 8)); CK(cudaMalloc(&Bd, nB * 8));
    CK(cudaMalloc(&R32, nC * 8)); CK(cudaMalloc(&R16, nC * 8)); CK(cudaMalloc(&R64, nC * 8));
    CK(cudaMalloc(&C64, nC * 8)); CK(cudaMalloc(&C0d, nC * 8));
    size_t ws_bytes = ((size_t)2 * M * round_up(K, 8) + (size_t)2 * N * round_up(K, 8)) * 4 + (1 << 20);
    void* ws; CK(cudaMalloc(&ws, ws_bytes));

    k_rand_f32<<<GR, BL, 0, g_s>>>(A32, nA, 11 + M); k_rand_f32<<<GR, BL, 0, g_s>>>(B32, nB, 23 + N);
    k_rand_f32<<<GR, BL, 0, g_s>>>(C0f, nC, 37 + K);
    k_rand_f64<<<GR, BL, 0, g_s>>>(A64, nA, 41 + M); k_rand_f64<<<GR, BL, 0, g_s>>>(B64, nB, 53 + N);
    k_rand_f64<<<GR, BL, 0, g_s>>>(C0d, nC, 67 + K);
    k_transpose_copy<<<dim3(cdiv(N, 32), cdiv(K, 32)), dim3(32, 8), 0, g_s>>>(B32, Bt32, K, N);
    k_f32_to_f16<<<GR, BL, 0, g_s>>>(A32, A16, nA); k_f32_to_f16<<<GR, BL, 0, g_s>>>(B32, B16, nB);
    k_f32_to_f16<<<GR, BL, 0, g_s>>>(Bt32, Bt16, nB);
    CK(cudaGetLastError());
    // FP64 references from the same inputs, upcast
    GemmArgs ra{M, N, K, Ad, Bd, R32, 1.0, 0.0, false, nullptr, 0};
    k_f32_to_f64<<<GR, BL, 0, g_s>>>(A32, Ad, nA); k_f32_to_f64<<<GR, BL, 0, g_s>>>(B32, Bd, nB);
    blas_dgemm(ra, g_s);
    k_f16_to_f64<<<GR, BL, 0, g_s>>>(A16, Ad, nA); k_f16_to_f64<<<GR, BL, 0, g_s>>>(B16, Bd, nB);
    ra.C = R16; blas_dgemm(ra, g_s);
    ra.A = A64; ra.B = B64; ra.C = R64; blas_dgemm(ra, g_s);
    CK(cudaStreamSynchronize(g_s));

    for (auto& V : vars) {
      for (int lay = 0; lay < 2; ++lay) {
        if (!(V.layouts & (1 << lay))) continue;
        if (V.prec == P_F64) { if (lay) continue; }
        const bool bt = lay == 1;
        GemmArgs a{M, N, K, nullptr, nullptr, nullptr, 1.0, 0.0, bt, ws, ws_bytes};
        const double* ref; void* C; size_t csz; const void* c0;
        if (V.prec == P_F16) { a.A = A16; a.B = bt ? Bt16 : B16; ref = R16; C = C32; csz = 4; c0 = C0f; }
        else if (V.prec == P_F64) { a.A = A64; a.B = B64; ref = R64; C = C64; csz = 8; c0 = C0d; }
        else { a.A = A32; a.B = bt ? Bt32 : B32; ref = R32; C = C32; csz = 4; c0 = C0f; }
        a.C = C;
        auto run = [&]() { V.fn(a, g_s); CK(cudaGetLastError()); };
        // check 1: poisoned output, alpha=1, beta=0
        CK(cudaMemsetAsync(C, 0xFF, nC * csz, g_s));
        run();
        CK(cudaStreamSynchronize(g_s));
        Err e1 = csz == 4 ? compute_err<float, float>((const float*)C, ref, nullptr, 1.0, 0.0, nC)
                          : compute_err<double, double>((const double*)C, ref, nullptr, 1.0, 0.0, nC);
        // check 2: epilogue alpha=1.25, beta=-0.75 on random C0
        CK(cudaMemcpyAsync(C, c0, nC * csz, cudaMemcpyDeviceToDevice, g_s));
        a.alpha = 1.25; a.beta = -0.75;
        run();
        CK(cudaStreamSynchronize(g_s));
        Err e2 = csz == 4 ? compute_err<float, float>((const float*)C, ref, (const float*)c0, 1.25, -0.75, nC)
                          : compute_err<double, double>((const double*)C, ref, (const double*)c0, 1.25, -0.75, nC);
        a.alpha = 1.0; a.beta = 0.0;
        double med = 0, tfs = 0, mn = 0;
        if (S.timed && reps > 0) {
          run(); run();
          CK(cudaStreamSynchronize(g_s));
          // decide reps from one timed run
          cudaEvent_t e0, e1_;
          CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1_));
          CK(cudaEventRecord(e0, g_s)); run(); CK(cudaEventRecord(e1_, g_s)); CK(cudaEventSynchronize(e1_));
          float one; CK(cudaEventElapsedTime(&one, e0, e1_));
          int R = one > 20.f ? 3 : reps;
          std::vector<cudaEvent_t> ev(2 * R);
          for (auto& x : ev) CK(cudaEventCreate(&x));
          for (int r = 0; r < R; ++r) {
            CK(cudaMemsetAsync(flush, r & 0xff, FLUSH, g_s));
            CK(cudaEventRecord(ev[2 * r], g_s)); run(); CK(cudaEventRecord(ev[2 * r + 1], g_s));
          }
          CK(cudaStreamSynchronize(g_s));
          std::vector<float> ts(R);
          for (int r = 0; r < R; ++r) CK(cudaEventElapsedTime(&ts[r], ev[2 * r], ev[2 * r + 1]));
          for (auto& x : ev) CK(cudaEventDestroy(x));
          CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1_));
          std::sort(ts.begin(), ts.end());
          med = ts[R / 2]; mn = ts[0];
          tfs = 2.0 * M * N * (double)K / (med * 1e-3) / 1e12;
        }
        const char* pn[] = {"f32", "tf32x3", "tf32", "f16", "f64"};
        printf("%-34s %-7s %-2s %-15s %9.4f ms %8.2f TF/s  maxrel %.3e  norm %.3e  beta-norm %.3e  nonfinite %llu/%llu\n",
               V.name.c_str(), pn[V.prec], bt ? "NT" : "NN", S.tag, med, tfs, e1.maxrel, e1.normrel, e2.normrel, e1.nbad, e2.nbad);
        fflush(stdout);
        fprintf(fc, "%s,%s,%s,%s,%d,%d,%d,%.5f,%.5f,%.3f,%.4e,%.4e,%.4e,%llu,%llu,\"%s\"\n", V.name.c_str(), pn[V.prec],
                bt ? "NT" : "NN", S.tag, M, N, K, med, mn, tfs, e1.maxrel, e1.normrel, e2.normrel, e1.nbad, e2.nbad, V.note.c_str());
        fflush(fc);
      }
    }
    CK(cudaFree(A32)); CK(cudaFree(B32)); CK(cudaFree(Bt32)); CK(cudaFree(C32)); CK(cudaFree(C0f));
    CK(cudaFree(A16)); CK(cudaFree(B16)); CK(cudaFree(Bt16)); CK(cudaFree(A64)); CK(cudaFree(B64)); CK(cudaFree(Ad)); CK(cudaFree(Bd));
    CK(cudaFree(R32)); CK(cudaFree(R16)); CK(cudaFree(R64)); CK(cudaFree(C64)); CK(cudaFree(C0d)); CK(cudaFree(ws));
  }
  fclose(fc);
  return 0;
}
