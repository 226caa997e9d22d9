"""An nvcc command line as gpgpu-opt reads it: the .cu translation units it compiles, with the flags that
change what the front end sees (-D, -U, -I, -isystem, the architectures, -x cu), and whether it compiles at
all. Every argument is kept in its place; the drop-in only swaps a unit's path for its optimized copy and
adds include directories in front of the ones that hold rewritten headers."""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

#: nvcc's options that take their value as the next argument (`-o file`, `--gpu-architecture sm_90`), long and
#: short spellings (`nvcc --help`); an option spelled with `=` or, for -D -U -I -L -l -O, glued to its value
#: (`-DN=4`, `-Iinc`), takes it there.
_WITH_VALUE = frozenset("""
-o --output-file -include --pre-include -l --library -D --define-macro -U --undefine-macro -I --include-path
-isystem --system-include -L --library-path -odir --output-directory -ccbin --compiler-bindir -arbin
--archiver-binary -ldir --libdevice-directory -target-dir --target-directory -opt-info --optimization-info
-dopt --dopt -ftemplate-backtrace-limit --ftemplate-backtrace-limit -ftemplate-depth --ftemplate-depth
-Xcompiler --compiler-options -Xlinker --linker-options -Xarchive --archive-options -Xptxas --ptxas-options
-Xnvlink --nvlink-options -Xcudafe -t --threads -split-compile --split-compile -split-compile-extended
--split-compile-extended -fdevice-time-trace --fdevice-time-trace -keep-dir --keep-dir -time --time -run-args
--run-args -idp --input-drive-prefix -ddp --dependency-drive-prefix -dp --drive-prefix -MT
--dependency-target-name -MF --dependency-output -arch --gpu-architecture -code --gpu-code -gencode
--generate-code -maxrregcount --maxrregcount -Werror --Werror -diag-error --diag-error -diag-suppress
--diag-suppress -diag-warn --diag-warn -jtd --jump-table-density -frandom-seed --frandom-seed -sanitize
--sanitize -optf --options-file -x --x -std --std -rdc --relocatable-device-code -ftz --ftz -prec-div
--prec-div -prec-sqrt --prec-sqrt -fmad --fmad -default-stream --default-stream -cudart --cudart -cudadevrt
--cudadevrt -m --machine -Ofc --Ofast-compile -Xcicc -Xfatbin --fatbin-options
""".split())
_GLUED = ("-D", "-U", "-I", "-L", "-l", "-O", "-isystem", "-o")
#: Commands that compile nothing whose output depends on the kernels' code, or that gpgpu-opt cannot follow
#: (an options file): passed to nvcc as they are.
_NOT_COMPILING = frozenset("""
-E --preprocess -M --generate-dependencies -MM --generate-nonsystem-dependencies -V --version -h --help
-dryrun --dryrun --list-gpu-code -code-ls --list-gpu-arch -arch-ls
""".split())
_CUDA_SUFFIXES = (".cu",)


@dataclass
class Unit:
    index: int          # where its path is in the command line
    path: str


@dataclass
class NvccCommand:
    args: list[str]
    units: list[Unit] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    include_dirs: list[str] = field(default_factory=list)
    #: (index of the option, the directory): where an include directory is named, to put another before it
    include_options: list[tuple[int, str]] = field(default_factory=list)
    architectures: list[int] = field(default_factory=list)   # the compute capabilities named, as 75, 90...
    compiles: bool = True
    why_not: str = ""                                         # why the command is passed through as it is
    depfile: str | None = None                                # -MF
    writes_depfile: bool = False                              # -MD / -MMD
    output: str | None = None                                 # -o


def parse(args: list[str], environment: dict[str, str] | None = None) -> NvccCommand:
    """The command line `args`, with the flags nvcc takes from the environment (NVCC_PREPEND_FLAGS before
    them, NVCC_APPEND_FLAGS after): nvcc compiles with those too."""
    command = NvccCommand(list(args))
    environment = os.environ if environment is None else environment
    _read(command, _split(environment.get("NVCC_PREPEND_FLAGS", "")), 0)
    _read(command, args, None)
    _read(command, _split(environment.get("NVCC_APPEND_FLAGS", "")), len(args))
    if command.compiles and not command.units:
        command.compiles, command.why_not = False, "no .cu file to compile"
    return command


def _read(command: NvccCommand, args: list[str], at: int | None, language: str | None = None) -> str | None:
    """Record what `args` say; `at`: the place in the command line of the options file they come from
    (None: they are the command line). Returns the language -x leaves in force."""
    i = 0
    while i < len(args):
        arg = args[i]
        name, value, taken = _option(args, i)
        where = i if at is None else at
        if name is None:
            if arg.endswith(_CUDA_SUFFIXES) or language == "cu":
                if at is not None:   # a unit named in an options file or the environment: not to be swapped
                    command.compiles, command.why_not = False, "a .cu file is named outside the command line"
                command.units.append(Unit(where, arg))
            i += 1
            continue
        if name in ("-optf", "--options-file"):
            for path in (value or "").split(","):
                language = _read(command, _options_file(command, path), where, language)
        else:
            _record(command, name, value, where)
        if name in ("-x", "--x"):
            language = value if value != "none" else None
        i += taken
    return language


def _split(flags: str) -> list[str]:
    try:
        return shlex.split(flags)
    except ValueError:
        return flags.split()


def _options_file(command: NvccCommand, path: str) -> list[str]:
    """The arguments of an nvcc options file (CMake passes include directories in one)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            return shlex.split(fh.read())
    except (OSError, ValueError) as err:
        command.compiles, command.why_not = False, f"cannot read the options file '{path}' ({err})"
        return []


def _option(args: list[str], i: int) -> tuple[str | None, str | None, int]:
    """(the option's name, its value or None, how many arguments it takes); (None, None, 1) for a file."""
    arg = args[i]
    if not arg.startswith("-") or arg == "-":
        return None, None, 1
    if "=" in arg and arg.split("=", 1)[0] in _WITH_VALUE:
        name, value = arg.split("=", 1)
        return name, value, 1
    if arg in _WITH_VALUE:
        return arg, args[i + 1] if i + 1 < len(args) else "", 2
    for glued in _GLUED:
        if arg.startswith(glued) and len(arg) > len(glued) and not arg.startswith(glued + "-"):
            return glued, arg[len(glued):], 1
    return arg.split("=", 1)[0], arg.split("=", 1)[1] if "=" in arg else None, 1


def _record(command: NvccCommand, name: str, value: str | None, index: int) -> None:
    if name in _NOT_COMPILING:
        command.compiles, command.why_not = False, f"{name} compiles nothing gpgpu-opt optimizes"
    elif name in ("-D", "--define-macro"):
        for definition in (value or "").split(","):
            macro, _, body = definition.partition("=")
            command.defines[macro] = body if body else "1"
    elif name in ("-U", "--undefine-macro"):
        for macro in (value or "").split(","):
            command.defines.pop(macro, None)
    elif name in ("-I", "--include-path", "-isystem", "--system-include"):
        for directory in (value or "").split(","):
            command.include_dirs.append(directory)
            command.include_options.append((index, directory))
    elif name in ("-arch", "--gpu-architecture", "-code", "--gpu-code", "-gencode", "--generate-code"):
        command.architectures += [int(n) for n in re.findall(r"(?:sm|compute|lto)_(\d+)", value or "")]
    elif name in ("-MF", "--dependency-output"):
        command.depfile = value
    elif name in ("-MD", "-MMD", "--generate-dependencies-with-compile",
                  "--generate-nonsystem-dependencies-with-compile"):
        command.writes_depfile = True
    elif name in ("-o", "--output-file"):
        command.output = value
