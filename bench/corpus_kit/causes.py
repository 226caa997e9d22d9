"""Sort a rejected file's first error line, and a passed-through kernel's note, into causes (the issue's
list): the first rule whose pattern matches wins; what no rule knows is shown as its message with the
file, line, names and numbers taken out, so equal messages still add up."""
from __future__ import annotations

import re

#: (cause, pattern) for the first error line of a rejected file.
FILE_CAUSES = [
    ("traceback (a bug)", r"Traceback|^\w+Error:"),
    ("internal error (a bug)", r"internal error"),
    ("timeout", r"no answer in"),
    ("no __global__ kernel in the file (kernels in an included file?)", r"no `?__global__`? kernel"),
    ("non-UTF-8 byte", r"UTF-8|utf-8|codec"),
    ("quoted include not found", r"#include|include file|not found"),
    ("bool in device code", r"\bbool\b"),
    ("system-header names (M_PI, FLT_MAX, ...)", r"'?(M_PI|FLT_MAX|FLT_MIN|INT_MAX|INT_MIN|DBL_MAX|UINT_MAX|"
                                                 r"signbit|RAND_MAX|HUGE_VAL|M_E|M_SQRT2)'?"),
    ("fixed-width / unsigned shorthand types (uint32_t, uint, size_t)", r"'?(u?int\d+_t|uint|size_t|uchar|ushort)'?"),
    ("half / bfloat16", r"half|bfloat16"),
    ("textures / surfaces", r"\btex\w*|texture|surf\w*"),
    ("templates", r"template"),
    ("C++ (namespaces, references, classes, casts, auto, lambdas)",
     r"namespace|::|static_cast|reinterpret_cast|const_cast|\bauto\b|lambda|class\b|operator|reference|&&?\s"),
    ("__constant__ / __device__ globals", r"__constant__|__device__"),
    ("struct parameters / fields", r"struct|->|member|field"),
    ("undeclared identifier (math / intrinsics / globals)", r"undeclared|unknown (identifier|function)"),
    ("syntax the front end cannot parse", r"parse|syntax|expected|unexpected|before:"),
]

#: (cause, pattern) for the note of a kernel the compiler read but did not transform.
KERNEL_CAUSES = [
    ("template kernel passed through", r"template"),
    ("grid-stride loop (not canonical)", r"canonical|grid-stride|gridDim"),
    ("subscript not affine (clamps, data-dependent, ...)", r"not affine|unresolved|quasi-affine|indirect|gather"),
    ("3-D indices (blockIdx.z / threadIdx.z)", r"\.z\b|3-D|NameError"),
    ("atomics / reductions", r"atomic|reduction"),
    ("shared memory or barriers already (hand-optimized)", r"__shared__|shared memory|barrier|__syncthreads"),
    ("check could not run (sizes, emulation)", r"check could not run|not emulated|emulat"),
    ("launch unknown or refused", r"launch"),
    ("C++ construct (auto, references, casts, ::)", r"auto|reference|static_cast|::"),
    ("aliasing not proved", r"alias|restrict"),
]


def normalize(message: str) -> str:
    """A message without its location, quoted names and numbers: `x.cu:3:5: error: 'foo' undeclared` ->
    `'…' undeclared`."""
    message = re.sub(r"^.*?:\d+:\d+:\s*", "", message.strip())
    message = re.sub(r"^(error|note|warning):\s*", "", message)
    message = re.sub(r"'[^']*'|`[^`]*`", "'…'", message)
    message = re.sub(r"\b\d+\b", "N", message)
    return message[:90]


def classify(message: str, rules: list[tuple[str, str]]) -> str:
    body = re.sub(r"^.*?:\d+:\d+:\s*", "", message.strip())
    for cause, pattern in rules:
        if re.search(pattern, body):
            return cause
    return "other: " + normalize(message)


def file_cause(entry: dict) -> str:
    """The cause of a rejected file, from its result and first error line."""
    if entry["result"] in ("traceback", "internal error", "timeout"):
        return classify(entry["first_line"], FILE_CAUSES[:3]) if entry["result"] != "timeout" else "timeout"
    return classify(entry["first_line"], FILE_CAUSES)


def kernel_note(kernel: dict, entry: dict) -> str | None:
    """The first note naming the kernel (`file:l:c: note: NAME: ...` or `... NAME ...`)."""
    name = kernel["name"]
    for note in entry["notes"]:
        if re.search(rf"\b{re.escape(name)}\b", note):
            return note
    return None


def kernel_cause(kernel: dict, entry: dict) -> str:
    """Why a kernel of an accepted file was not transformed."""
    name = kernel["name"]
    if name not in entry["reported"] and name not in entry["passed_through"]:
        if kernel["file"] != entry["file"]:
            return "kernel in an included file (not read)"
        return "kernel not read by the compiler (no note)"
    note = kernel_note(kernel, entry)
    if note is None:
        if kernel.get("template"):
            return "template kernel passed through"
        return "no pass applied (no note)"
    return classify(note, KERNEL_CAUSES)
