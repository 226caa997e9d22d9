"""Generate the compiler's outputs for the GPU run: each naive kernel of bench/tensor_cores at each precision, and
variants of the tensor-core tile's shape (OPS patched in-process), each kernel renamed so that one binary holds all."""
import dataclasses, json, pathlib, sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))     # the repository: this script runs the compiler in-process
from gpgpu_opt.passes.merge import mma_tile
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.codegen import kernel_source

BASE = {k: v for k, v in mma_tile.OPS.items()}
VARIANTS = [  # (name, naive file, precision, op overrides)
    ("f64_default", "dgemm_nn", "ieee", {}),
    ("f64_band0", "dgemm_nn", "ieee", {"band_rows": 1}),
    ("f64_k32s3", "dgemm_nn", "ieee", {"tile_k": 32, "stages": 3}),
    ("sgemm_reg", "sgemm_nn", "ieee", {}),
    ("tf32_default", "sgemm_nn", "tf32", {}),
    ("tf32_w64x64_k32s3", "sgemm_nn", "tf32", {"warp_n": 64, "tile_k": 32, "stages": 3}),
    ("tf32_256_w64x64_k32s3", "sgemm_nn", "tf32", {"tile_n": 256, "warp_n": 64, "tile_k": 32, "stages": 3}),
    ("tf32x3_default", "sgemm_nn", "tf32x3", {}),
    ("tf32x3_k32s3", "sgemm_nn", "tf32x3", {"tile_k": 32, "stages": 3}),
    ("tf32_nt_default", "sgemm_nt", "tf32", {}),
    ("tf32x3_nt_default", "sgemm_nt", "tf32x3", {}),
    ("sgemm_nt_reg", "sgemm_nt", "ieee", {}),
    ("f16_default", "hgemm_nn", "ieee", {}),
    ("f16_nt_default", "hgemm_nt", "ieee", {}),
    ("f16_256", "hgemm_nn", "ieee", {"tile_n": 256, "warp_n": 64, "blocks_per_sm": 1}),
    ("f16_k64s3", "hgemm_nn", "ieee", {"tile_k": 64, "stages": 3, "warp_n": 64}),
    ("f16_w64x64", "hgemm_nn", "ieee", {"warp_n": 64}),
]
#: The naive kernels as written, launched beside their outputs.
NAIVE = [("naive_hgemm_nn", "hgemm_nn"), ("naive_hgemm_nt", "hgemm_nt")]


def op_of(naive: str, precision: str) -> str:
    """The OPS entry a variant's overrides patch: the precision asked, or the operands' default form."""
    return precision if precision != "ieee" else {"d": "f64", "h": "f16"}.get(naive[0], "")
out = HERE
rows = []
for name, naive, precision, over in VARIANTS:
    for k, v in BASE.items():
        mma_tile.OPS[k] = dataclasses.replace(v, **over) if over and k == op_of(naive, precision) else v
    kname = f"k_{name}"
    src = (HERE.parent / f"{naive}.cu").read_text().replace(naive, kname)
    path = out / f"naive_{name}.cu"
    path.write_text(src)
    d = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=d, target=get_target("sm_90"))
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), d, {}, assume_restrict=True,
                          matmul_precision=precision, validate=True)
    k = result.kernels[0]
    (out / f"gen_{name}.cu").write_text(result.output)
    merge = [x.reason[:60] for x in k.context.log.decisions if x.pass_name == "merge" and x.action == "applied"]
    rows.append((name, k.validation.status if k.validation else None, merge[:1]))
    path.unlink()
for name, naive in NAIVE:
    (out / f"gen_{name}.cu").write_text((HERE.parent / f"{naive}.cu").read_text().replace(naive, f"k_{name}"))
for r in rows:
    print(*r)

# The launchers: each output in a namespace of its own, launched as the naive program launches it (16x16
# blocks over (N, M)) through its generated launch helpers.
prec = {"ieee": "P_F32", "tf32": "P_TF32", "tf32x3": "P_TF32X3"}
lines = ['// k_gen.cu - written by gen_variants.py: the compiler\'s outputs as harness variants.',
         '#include "common.cuh"', '#include <cuda_pipeline.h>']
regs = []
for name, naive, precision, _ in VARIANTS + [(n, naive, "ieee", None) for n, naive in NAIVE]:
    t = "double" if naive.startswith("d") else "float"
    ab = "__half" if naive.startswith("h") else t      # the operands' type: half products sum in float
    p = "P_F64" if t == "double" else "P_F16" if ab == "__half" else prec[precision]
    ns, kernel = f"g_{name}", f"k_{name}"
    text = (out / f"gen_{name}.cu").read_text()
    smem = f"{ns}::{kernel}_shared_bytes((const void *){ns}::{kernel})" if f"{kernel}_shared_bytes" in text else "0"
    launch = f"{ns}::{kernel}_grid(ng, nb), {ns}::{kernel}_block(ng, nb)" if f"{kernel}_grid" in text else "ng, nb"
    lines.append(f'namespace {ns} {{\n#include "gen_{name}.cu"\n}}')
    lines.append(f"static void run_{ns}(const GemmArgs& a, cudaStream_t s) {{\n"
                 f"  dim3 nb(16, 16), ng(cdiv(a.N, 16), cdiv(a.M, 16));\n"
                 f"  {ns}::{kernel}<<<{launch}, {smem}, s>>>"
                 f"(({ab}*)a.A, ({ab}*)a.B, ({t}*)a.C, a.M, a.N, a.K, ({t})a.alpha, ({t})a.beta);\n}}")
    regs.append(f'  v.push_back({{"gen_{name}", {p}, {2 if naive.endswith("_nt") else 1}, run_{ns}, '
                f'"compiler output {name}"}});')
lines.append("void register_gen(std::vector<Variant>& v) {\n" + "\n".join(regs) + "\n}")
(out / "k_gen.cu").write_text("\n".join(lines) + "\n")
