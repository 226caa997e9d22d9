"""Sort a rejected file's first error line, and a passed-through kernel's note, into causes (the issue's
list): the first rule whose pattern matches wins; what no rule knows is shown as its message with the
file, line, names and numbers taken out, so equal messages still add up."""
from __future__ import annotations

import os
import re

#: Type names C's and CUDA's headers declare that kernels use.
HEADER_TYPES = r"\b(u?int\d+_t|uint|ushort|uchar|ulong|size_t|ssize_t|ptrdiff_t|u?intptr_t|clock_t|time_t|" \
               r"cudaStream_t|cudaEvent_t)\b"

#: (cause, pattern) for the first error line of a rejected file.
FILE_CAUSES = [
    ("traceback (a bug)", r"Traceback|^\w+Error:"),
    ("internal error (a bug)", r"internal error"),
    ("timeout", r"no answer in"),
    ("no __global__ kernel in the file", r"no `?__global__`? kernel"),
    ("non-UTF-8 byte", r"UTF-8|utf-8|codec|not a text file"),
    ("system header included with quotes (\"cuda.h\")", r"'(cuda\w*|stdio|stdlib|string|math|float|limits|"
                                                         r"stdint|assert|time|sys/\w+|unistd)\.h' file not found"),
    ("user include not found", r"#include|include file|not found"),
    ("bool in device code", r"\bbool\b"),
    ("system-header names (M_PI, FLT_MAX, ...)", r"'?(M_PI|FLT_MAX|FLT_MIN|INT_MAX|INT_MIN|DBL_MAX|UINT_MAX|"
                                                 r"signbit|RAND_MAX|HUGE_VAL|M_E|M_SQRT2)'?"),
    ("C / CUDA header types (uint32_t, uint, size_t, clock_t, ...)", HEADER_TYPES),
    ("an #error directive reached (platform macros such as __linux__ not defined?)", r"#error"),
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

#: (cause, pattern) for the source line a syntax error points at (the message names only a token).
SOURCE_LINE_CAUSES = [
    ("bool in device code", r"\bbool\b"),
    ("inline PTX (asm)", r"\basm\b|__asm__"),
    ("templates", r"\btemplate\b|\btypename\b"),
    ("half / bfloat16", r"\b__half2?\b|\bhalf2?\b|bfloat16"),
    ("types of CUDA libraries (curand, cuFFT, cooperative groups, graphs)",
     r"\bcurand\w*|\bcufft\w*|\bthread_group\b|\bthread_block\b|\bcudaGraph\w*"),
    ("C++ (namespaces, references, classes, casts, auto, lambdas)",
     r"::|static_cast|reinterpret_cast|\bauto\b|\bclass\b|\bnamespace\b|\w&\s|&&|\bnullptr\b|\bconstexpr\b|"
     r"\b(int|float|double|unsigned)\(|\w+\s*=\s*[\w.]+\s*\)"),            # functional casts, default arguments
    ("textures / surfaces", r"\btex\w*|texture|surf\w*"),
    ("C / CUDA header types (uint32_t, uint, size_t, clock_t, ...)", HEADER_TYPES),
    ("__device__ / __constant__ globals", r"^\s*(static\s+)?(__device__|__constant__)\s+[^(]*[;=\[]"),
]

#: Names C's headers give that device code uses.
SYSTEM_NAMES = r"M_PI\w*|M_E|M_LN\w*|M_SQRT\w*|M_LOG\w*|FLT_\w+|DBL_\w+|INT_\w+|UINT_\w+|LONG_\w+|CHAR_\w+|" \
               r"RAND_MAX|HUGE_VALF?|INFINITY|NAN|signbit|isnan|isinf|isfinite"

#: (cause, pattern) for the note of a kernel the compiler read but did not transform.
KERNEL_CAUSES = [
    ("template kernel passed through", r"uses C\+\+ \([^)]*template"),
    ("pointer-to-struct parameter (members not modelled)", r"is a pointer to a struct"),
    ("grid-stride loop (not canonical)", r"canonical|grid-stride"),
    ("3-D indices (blockIdx.z / threadIdx.z)", r"\.z\b|3-D|NameError"),
    ("subscript not affine (clamps, data-dependent, ...)", r"not affine|unresolved|quasi-affine|indirect|gather"),
    ("atomics / reductions", r"atomic|reduction"),
    ("check could not run (sizes, emulation)", r"check could not run|not emulated|could not be emulated"),
    ("vectorize: slow arithmetic per element (no gain to show)", r"long-latency operations"),
    ("launch unknown or refused", r"launch(?!es the kernel)"),    # not restrict's 'the function that launches'
    ("aliasing not proved", r"alias|restrict"),
]


def undeclared_cause(name: str, sources: list[str]) -> str | None:
    """What an undeclared name is, from the program's text: a C header's name, a file-scope `__constant__`/
    `__device__` variable or texture the front end did not see, or a math function / intrinsic."""
    if re.fullmatch(SYSTEM_NAMES, name):
        return "system-header names (M_PI, FLT_MAX, INT_MAX, ...)"
    for text in sources:
        if re.search(rf"\b(__constant__|__device__)\b[^;(){{}}]*\b{re.escape(name)}\b\s*[\[=;]", text):
            return "__constant__ / __device__ globals undeclared"
        if re.search(rf"\btexture\s*<[^;]*\b{re.escape(name)}\b", text):
            return "textures / surfaces"
    if re.fullmatch(r"(__)?[a-z][a-z0-9_]*f?|__\w+", name):
        return "math function / intrinsic unknown"
    return None


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
    """The cause of a rejected file, from its result, its first error line and what the run found about it
    (entry['context']: the source line the error points at, the cause of an undeclared name)."""
    if entry["result"] == "timeout":
        return "timeout"
    if entry["result"] in ("traceback", "internal error"):
        return classify(entry["first_line"], FILE_CAUSES[:2])
    context = entry.get("context") or {}
    if re.search(r"no `?__global__`? kernel", entry["first_line"]):
        included = [k for k in entry.get("kernels", []) if k["file"] != entry["file"]]
        return "kernels live in an included file" if included else "host-only .cu file (no kernel at all)"
    if re.search(r"undeclared identifier '(printf|assert|malloc|free|memcpy|memset)'", entry["first_line"]):
        return "C library call in device code (printf, assert, ...)"
    if context.get("undeclared"):
        return context["undeclared"]
    if re.search(r"expected|before|Invalid|parse|syntax", entry["first_line"]) and context.get("source_line"):
        for cause, pattern in SOURCE_LINE_CAUSES:
            if re.search(pattern, context["source_line"]):
                return cause
        if context.get("struct_type"):
            return "struct types (parameters, fields)"
    return classify(entry["first_line"], FILE_CAUSES)


def error_context(first_line: str, sources: list[str]) -> dict:
    """The source line a `file:line:col: error:` points at, and for an undeclared identifier what it is."""
    context = {}
    m = re.match(r"^(.*?):(\d+):\d+:", first_line)
    if m and os.path.isfile(m.group(1)):
        with open(m.group(1), "rb") as f:
            lines = f.read().decode("utf-8", errors="replace").splitlines()
        line = int(m.group(2))
        if 0 < line <= len(lines):
            context["source_line"] = lines[line - 1].strip()
    texts = []
    for path in sources:
        with open(path, "rb") as f:
            texts.append(f.read().decode("utf-8", errors="replace"))
    u = re.search(r"undeclared identifier '([^']+)'", first_line)
    if u:
        cause = undeclared_cause(u.group(1), texts)
        if cause:
            context["undeclared"] = cause
    if "source_line" in context and any(_struct_type(name, texts) for name in _IDENT.findall(context["source_line"])):
        context["struct_type"] = True
    return context


_IDENT = re.compile(r"[A-Za-z_]\w*")


def _struct_type(name: str, texts: list[str]) -> bool:
    """Whether the program declares `name` as a struct, union or class type (`struct Particle {`,
    `typedef struct {...} Particle;`)."""
    return any(re.search(rf"\b(struct|union|class)\s+{name}\b|}}\s*{name}\s*;", t) for t in texts)


def kernel_notes(kernel: dict, entry: dict) -> list[str]:
    """The notes about one kernel: those naming it ('NAME') and those located inside its lines."""
    found = []
    for note in entry["notes"]:
        m = re.match(r"^(.*?):(\d+):\d+:", note)
        inside = m is not None and os.path.abspath(m.group(1)) == kernel["path"] and \
            kernel["line"] <= int(m.group(2)) <= kernel["end_line"]
        if inside or f"'{kernel['name']}'" in note or f"'{kernel['name']}<" in note:
            found.append(note)
    return found


#: Why the front end passed a kernel through, from its note (checked in order, first match wins).
PASS_THROUGH_CAUSES = [
    ("calls a __device__ function passed through (a C++ reference parameter...)", r"it calls '[^']+', which is passed"),
    ("texture fetch (tex1Dfetch / tex2D: texture references)", r"undeclared identifier 'tex(1Dfetch|2D|1D|3D)'"),
    ("undeclared name (a file-scope const, a macro of another file...)", r"undeclared identifier"),
    ("struct type named without `struct` (C++ style) or a union: not parsed",
     r"Invalid declaration before|expected expression or statement before '\*'|Invalid function definition"),
    ("template: its arguments are not integer constants or are deduced",
     r"not an integer constant|without template arguments|is a template with the parameter"),
    ("not found after preprocessing (inside #if)", r"could not be found after preprocessing"),
    ("parse error in the kernel", r"expected expression"),
]


def kernel_cause(kernel: dict, entry: dict) -> str:
    """Why a kernel of an accepted file was not transformed."""
    name = kernel["name"]
    instances = [r for r in entry["reported"] if r.startswith(name + "__")]    # affine__float_256
    if instances and name not in entry["reported"]:
        kernel = dict(kernel, name=instances[0])     # its notes name the instance
        name = kernel["name"]
    if name not in entry["reported"] and name not in entry["passed_through"]:
        if any("no __global__ kernel" in n for n in entry["notes"]):
            return "kernel not seen: 'no __global__ kernel' (extern \"C\" kernels of NVRTC / driver-API files)"
        if kernel["file"] != entry["file"]:
            return "kernel in an included file (not read)"
        return "kernel not read by the compiler (no note)"
    notes = kernel_notes(kernel, entry)
    for note in notes:
        cxx = re.search(r"uses C\+\+ \(([^)]*)\)", note)
        if cxx:
            what = re.sub(r"'([\w:]+?)::.*'", r"'\1::...'", re.sub(r",? ?line \d+", "", cxx.group(1)))
            return "template kernel passed through" if "template" in cxx.group(1) else \
                f"C++ passed through: {what}"      # one cause per construct, lines and template arguments dropped
    if name in entry["passed_through"]:
        for cause, pattern in PASS_THROUGH_CAUSES:
            if any(re.search(pattern, n) for n in notes):
                return "passed through: " + cause
        return "passed through: " + normalize(notes[0]) if notes else "passed through (no note)"
    if not kernel["naive_style"]:
        return "hand-optimized already (__shared__ / __syncthreads)"
    for cause, pattern in KERNEL_CAUSES:
        if any(re.search(pattern, n) for n in notes):
            return cause
    return "no pass applied: " + normalize(notes[0]) if notes else "no pass applied (no note)"
