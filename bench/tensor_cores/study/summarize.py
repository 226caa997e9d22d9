#!/usr/bin/env python3
"""Summarize results.csv: per precision/layout/shape, every variant with ratio to its cuBLAS reference."""
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
REF = {"f32": "cublas_sgemm", "tf32x3": "cublas_sgemm", "tf32": "cublas_tf32", "f16": "cublas_f16", "f64": "cublas_dgemm"}
BAR = {"tf32x3": 1.5, "tf32": 0.6, "f16": 0.5, "f64": 0.7}
by = {}
for r in rows:
    name, prec, lay, shp = r[0], r[1], r[2], r[3]
    by[(name, prec, lay, shp)] = r
refs = {(r[1], r[2], r[3]): r for r in rows if r[0].startswith("cublas")}
naive = {(r[2], r[3]): r for r in rows if r[0] == "naive_f32"}
def ref_for(prec, lay, shp):
    want = REF[prec]
    for r in rows:
        if r[0] == want and r[2] == lay and r[3] == shp:
            return r
    return None
print("%-32s %-6s %-2s %-14s %7s %8s %6s %5s %10s %10s %10s %s" % ("variant", "prec", "ly", "shape", "TF/s", "refTF/s", "ratio", "bar", "maxrel", "normrel", "beta-norm", "bad"))
for prec in ["f32", "tf32x3", "tf32", "f16", "f64"]:
    for shp in ["4096^3", "3000x5000x2000", "333x520x264"]:
        for lay in ["NN", "NT"]:
            sel = [r for r in rows if r[1] == prec and r[2] == lay and r[3] == shp]
            if prec == "f32":
                sel = [r for r in rows if r[2] == lay and r[3] == shp and r[0] in ("naive_f32", "cublas_sgemm")]
            if not sel: continue
            ref = ref_for(prec, lay, shp)
            sel.sort(key=lambda r: -float(r[9]))
            for r in sel:
                if "prep_only" in r[0] and shp == "333x520x264": continue
                if shp == "333x520x264":
                    lim = {"f32": 1e-5, "tf32x3": 1e-5, "tf32": 1e-2, "f16": 1e-3, "f64": 1e-10}[prec]
                    if float(r[11]) < lim and float(r[12]) < lim and r[13] == "0" and r[14] == "0":
                        continue
                    print("SMALL-SHAPE CHECK FAILED:", ",".join(r[:4]), r[11], r[12], r[13], r[14]); continue
                tf = float(r[9]); rt = float(ref[9]) if ref else 0
                ratio = tf / rt if rt > 0 else 0
                bar = BAR.get(prec, 0)
                if shp == "3000x5000x2000": bar *= 0.8
                print("%-32s %-6s %-2s %-14s %7.1f %8.1f %6.2f %5.2f %10.2e %10.2e %10.2e %s/%s" % (r[0], prec, lay, shp, tf, rt, ratio, bar, float(r[10]), float(r[11]), float(r[12]), r[13], r[14]))
