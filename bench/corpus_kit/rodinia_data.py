"""Inputs for the Rodinia programs that read data a fetched checkout lacks (the suite's data/ directory is a
separate download): synthetic files in the formats the programs parse, written into the GPU bundle, so that
such programs can be built, run, timed and checked like the others. The values are random but seeded: the
naive and the optimized build read the same file. Sizes are chosen to keep a run around a second on an H100.

GENERATED maps a main file (its path inside the suite's cuda/ directory) to its run: the arguments and the
files to write, each at a path relative to the directory the program runs in ('@DATA@/NAME' is a shared
file at the bundle's data/ directory, so that several programs and both builds read one copy).

LARGE maps a main file to a second run at a large input, timed beside the first as NAME_large: cfd's and
srad's kernels are chosen by the launch's size (gpgpu_opt/launch_dispatch.py), and the suite's inputs (97K
elements for cfd) do not reach the size from which all the optimized ones run. Its domain (hundreds of MB) is generated on the GPU machine: this file
runs there with python3 alone (`python3 rodinia_data.py cfd_domain PATH ELEMENTS`, from data/generate.sh). A
run may also set the program's own macros (GeneratedRun.macros: cfd's iteration count, for NAME_large)."""
from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from typing import Callable


def cfd_domain(path: str, elements: int = 97046, seed: int = 7, digits: int = 6) -> None:
    """cfd's domain file: the element count, then per element its area and, for each of its 4 faces, the
    neighbour (Fortran numbering: 1..n; 0 a wing boundary, -1 the far field) and the face normal's 3 components.
    The default size is that of the suite's own fvcorr.domn.097K; `digits` after the point (fewer for a large
    domain: a smaller file, read faster)."""
    rng = random.Random(seed)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="ascii") as f:
        f.write(f"{elements}\n")
        for _ in range(elements):
            fields = [f"{rng.uniform(0.5, 2.0):.{digits}f}"]
            for _face in range(4):
                kind = rng.random()
                neighbour = 0 if kind < 0.02 else -1 if kind < 0.04 else rng.randint(1, elements)
                fields.append(str(neighbour))
                fields += [f"{rng.uniform(-1.0, 1.0):.{digits}f}" for _ in range(3)]
            f.write(" ".join(fields) + "\n")


def pgm_image(path: str, rows: int, cols: int, seed: int = 5) -> None:
    """An ASCII PGM image (srad_v1 skips three header lines, then reads rows x cols integers)."""
    rng = random.Random(seed)
    body = "\n".join(" ".join(str(rng.randint(1, 255)) for _ in range(cols)) for _ in range(rows))
    _write(path, f"P2\n{cols} {rows}\n255\n{body}\n")


def hurricane_records(directory: str, files: int = 4, records: int = 50000, seed: int = 3) -> None:
    """nn's inputs: filelist.txt naming `files` database files of fixed-width records, each with its latitude
    at columns 28-32 and its longitude at 33-37 (nn reads 49 characters and a newline per record)."""
    rng = random.Random(seed)
    names = []
    for f in range(files):
        name = f"cane{f}.db"
        lines = []
        for r in range(records):
            head = f"{1950 + r % 60:4d} {1 + r % 12:2d} {1 + r % 28:2d} {r % 24:2d} {r % 1000:3d} {'STORM':<10s}"
            lat, lng = rng.uniform(0.0, 63.0), rng.uniform(0.0, 180.0)
            lines.append((head.ljust(28) + f"{lat:5.1f}{lng:5.1f}").ljust(49))
        _write(os.path.join(directory, name), "\n".join(lines) + "\n")
        names.append(name)
    _write(os.path.join(directory, "filelist.txt"), "\n".join(names) + "\n")


def hotspot3d_grid(path: str, rows: int, layers: int, low: float, high: float, seed: int) -> None:
    """hotspot3D's power or temperature file: rows x rows x layers values, one per line."""
    rng = random.Random(seed)
    _write(path, "\n".join(f"{rng.uniform(low, high):.4f}" for _ in range(rows * rows * layers)) + "\n")


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


@dataclass(frozen=True)
class GeneratedRun:
    args: tuple[str, ...]
    files: tuple[tuple[str, Callable[[str], None]], ...]   # (path from the run directory or @DATA@/..., writer)
    #: Shared files generated on the GPU machine instead (too large to carry): (@DATA@/NAME, this file's
    #: command-line arguments after the path), written into data/generate.sh.
    on_device: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: (NAME, VALUE): the program's own `#define NAME ...` line set to VALUE in both trees' sources, for a
    #: setting the program fixes with a plain #define (which -D cannot change).
    macros: tuple[tuple[str, str], ...] = ()
    #: Seconds a run may take, where the program needs more than run.sh's RUN_TIMEOUT (None: that limit).
    run_timeout: int | None = None


_CFD = GeneratedRun(("@DATA@/cfd_domain.txt",), (("@DATA@/cfd_domain.txt", cfd_domain),))
SRAD_ROWS, SRAD_COLS = 1024, 1024

GENERATED: dict[str, GeneratedRun] = {
    "cfd/euler3d.cu": _CFD,
    "cfd/euler3d_double.cu": _CFD,
    "cfd/pre_euler3d.cu": _CFD,
    "cfd/pre_euler3d_double.cu": _CFD,
    # srad_v1 opens ../../../data/srad/image.pgm from where it runs
    "srad/srad_v1/main.cu": GeneratedRun(
        ("100", "0.5", str(SRAD_ROWS), str(SRAD_COLS)),
        (("../../../data/srad/image.pgm", lambda p: pgm_image(p, SRAD_ROWS, SRAD_COLS)),)),
    # nn opens the database files its list names from where it runs: both beside each build's run directory
    "nn/nn_cuda.cu": GeneratedRun(("filelist.txt", "-r", "5", "-lat", "30", "-lng", "90"),
                                  (("filelist.txt", lambda p: hurricane_records(os.path.dirname(p))),)),
    "hotspot3D/3D.cu": GeneratedRun(
        ("256", "8", "100", "@DATA@/hotspot3D_power", "@DATA@/hotspot3D_temp", "output.out"),
        (("@DATA@/hotspot3D_power", lambda p: hotspot3d_grid(p, 256, 8, 0.0, 0.01, 1)),
         ("@DATA@/hotspot3D_temp", lambda p: hotspot3d_grid(p, 256, 8, 320.0, 340.0, 2)))),
}


#: cfd's second run: 2M elements, past the 1.08M threads (540K for doubles) from which the widened kernels run
#: on an H100, so that both of the output's kernels are timed.
LARGE_CFD_ELEMENTS = 2_000_000
#: ... at fewer time steps than the suite's 2000 (`#define iterations 2000`): at 2M elements those took 3.6 s
#: (7 s in double, 21 s for pre_euler3d) of the run's 20 s, which with reading the domain and writing the
#: solution ran past the limit (exit 124) on both builds. cfd prints its time per iteration, so the times stay
#: comparable. Reading 2M elements and writing the solution alone take close to 20 s (on an H100 machine, at
#: 200 steps, the double naive build still timed out while saving its solution, pre_euler3d's both): hence
#: the longer limit per run.
LARGE_CFD_ITERATIONS = 200
LARGE_CFD_RUN_TIMEOUT = 90
_CFD_LARGE = GeneratedRun(("@DATA@/cfd_domain_2M.txt",), (),
                          (("@DATA@/cfd_domain_2M.txt", ("cfd_domain", str(LARGE_CFD_ELEMENTS))),),
                          macros=(("iterations", str(LARGE_CFD_ITERATIONS)),), run_timeout=LARGE_CFD_RUN_TIMEOUT)
LARGE: dict[str, GeneratedRun] = {name: _CFD_LARGE for name in ("cfd/euler3d.cu", "cfd/euler3d_double.cu",
                                                                 "cfd/pre_euler3d.cu", "cfd/pre_euler3d_double.cu")}
#: srad_v1's second run: a 2048 x 2048 image (4M threads a launch), far past the thresholds of its widened
#: kernels (extract, prepare, compress). It measured its gather kernels (srad, srad2) widened: slower than the
#: naive ones at this size (gpgpu_opt/passes/vectorize: gather_body), so they are no longer widened.
SRAD_LARGE_SIDE = 2048
LARGE["srad/srad_v1/main.cu"] = GeneratedRun(
    ("100", "0.5", str(SRAD_LARGE_SIDE), str(SRAD_LARGE_SIDE)),
    (("../../../data/srad/image.pgm", lambda p: pgm_image(p, SRAD_ROWS, SRAD_COLS)),))
#: hotspot3D's second run: 768 x 768 x 8 (589824 threads a launch), past the one GPU-full from which its
#: widened z-marching kernel runs (launch_dispatch: a loop counts at most two trips); the suite's 512 x 512 and
#: the first run's 256 x 256 keep the naive copy. Its files (42 MB each) are written on the GPU machine.
HOTSPOT3D_LARGE_SIDE, HOTSPOT3D_LAYERS = 768, 8
LARGE["hotspot3D/3D.cu"] = GeneratedRun(
    (str(HOTSPOT3D_LARGE_SIDE), str(HOTSPOT3D_LAYERS), "100", "@DATA@/hotspot3D_power_large",
     "@DATA@/hotspot3D_temp_large", "output.out"), (),
    (("@DATA@/hotspot3D_power_large", ("hotspot3d_grid", str(HOTSPOT3D_LARGE_SIDE), str(HOTSPOT3D_LAYERS), "0.0",
                                       "0.01", "1")),
     ("@DATA@/hotspot3D_temp_large", ("hotspot3d_grid", str(HOTSPOT3D_LARGE_SIDE), str(HOTSPOT3D_LAYERS),
                                      "320.0", "340.0", "2"))))
#: What `python3 rodinia_data.py WHAT PATH ARGS...` writes on the GPU machine.
ON_DEVICE = {"cfd_domain": lambda path, elements: cfd_domain(path, int(elements), digits=3),
             "hotspot3d_grid": lambda path, rows, layers, low, high, seed: hotspot3d_grid(
                 path, int(rows), int(layers), float(low), float(high), int(seed))}


def set_macros(run: GeneratedRun, trees: list[str], suffixes: tuple[str, ...]) -> None:
    """Give each of the run's macros its value where a source file of `trees` defines it (`#define NAME ...`
    at a line's start); a macro no file of a tree defines is an error (the run would not be the one named)."""
    for name, value in run.macros:
        line = re.compile(rf"^([ \t]*#[ \t]*define[ \t]+{re.escape(name)})[ \t]+\S[^\r\n]*$", re.M)
        for tree in trees:
            found = False
            for path in _files(tree, suffixes):
                with open(path, encoding="utf-8", errors="surrogateescape") as f:
                    text = f.read()
                new, count = line.subn(rf"\g<1> {value}", text)
                if count:
                    found = True
                    with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                        f.write(new)
            if not found:
                raise ValueError(f"{tree}: no source defines the macro {name} the run sets")


def _files(tree: str, suffixes: tuple[str, ...]) -> list[str]:
    return sorted(os.path.join(root, name) for root, _dirs, names in os.walk(tree) for name in names
                  if name.endswith(suffixes))


def write_inputs(run: GeneratedRun, bundle_dir: str, run_dirs: list[str]) -> None:
    """Write a run's files: the shared ones once under bundle_dir/data, the others beside each run directory
    (a path leaving the bundle is refused: the bundle is all the GPU machine gets)."""
    for where, writer in run.files:
        if where.startswith("@DATA@/"):
            path = os.path.join(bundle_dir, "data", where[len("@DATA@/"):])
            targets = [path]
        else:
            targets = sorted({os.path.normpath(os.path.join(d, where)) for d in run_dirs})
        for path in targets:
            if os.path.relpath(path, bundle_dir).startswith(".."):
                raise ValueError(f"{where}: outside the bundle from {run_dirs}")
            if not os.path.exists(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                writer(path)
    for where, command in run.on_device:
        _schedule(bundle_dir, where, command)


def _schedule(bundle_dir: str, where: str, command: tuple[str, ...]) -> None:
    """A line of data/generate.sh (run.sh runs it before the programs) that writes the file if it is missing."""
    if not where.startswith("@DATA@/") or command[0] not in ON_DEVICE:
        raise ValueError(f"{where}: only shared files of a known kind are generated on the GPU machine")
    target = '"$HERE/data/' + where[len("@DATA@/"):] + '"'
    line = f"[ -f {target} ] || python3 \"$HERE/rodinia_data.py\" {command[0]} {target} {' '.join(command[1:])}\n"
    script = os.path.join(bundle_dir, "data", "generate.sh")
    existing = open(script, encoding="ascii").read() if os.path.exists(script) else \
        'HERE=$(cd "$(dirname "$0")/.." && pwd)\n'
    if line not in existing:
        _write(script, existing + line)


if __name__ == "__main__":  # on the GPU machine: python3 rodinia_data.py WHAT PATH ARGS...
    import sys

    ON_DEVICE[sys.argv[1]](sys.argv[2], *sys.argv[3:])
