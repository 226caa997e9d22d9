"""What a cubin build with include directories read, so that gpgpu_opt.nvcc can keep it exactly (ccache's
"direct mode", with its shadowing hole closed).

A build with `-I DIR` reads files that the cache key (nvcc, architecture, flags, text) does not see. Such a
build is kept with an `IncludeRecord`, and a kept build is used again only while the record still holds:

- **The files read, by content.** nvcc writes the files it read (`-MD -MF`; its dependency list covers the
  device pass, `__CUDA_ARCH__`-only headers included), and each one's sha256 is recorded. Every file is
  recorded, the toolkit's and the system's too: hashing them all (about 3 MB, some 30 ms) costs less than an
  argument about which directories belong to the installation. The source itself is the key's text.
- **The files not read that would now be.** A header added in an include directory can shadow the one that
  was read, or make `__has_include` true. Every include directive of every file read (and `__has_include`,
  `#include_next`, `#import`, `#embed`) is scanned for its spelling. Each spelling gives the paths where it
  could be looked for in a directory the user controls: the `-I` directories, and for a quoted spelling the
  directory of the file that names it. The candidates that were not files at build time are recorded, and
  must still not be files. This over-approximates the preprocessor's search (a directive in a branch not
  taken, a directory after the one that had the file: more candidates), never under-approximates it. The
  toolkit's and the system's include directories, searched after or without the user's, are not candidates
  (except as the directory of a quoted spelling's file): they are the installation, as for a build without
  `-I` (gpgpu_opt.nvcc), whose nvcc identity stands for them.
- **What cannot be read exactly is not kept** (`record_build` returns None): a computed include
  (`#include MACRO`, a directive continued over a line or with a comment before its operand), a quoted
  spelling with `..` in the source (its directory is a fresh temporary one: the candidate would be outside
  it and vanish with it), a dependency list that does not parse into existing files, and a file changed
  since the build began (its ctime or mtime later than the build's start less `SETTLE_SECONDS`: the file may
  have been read before the change and hashed after it). The margin covers the lag of the kernel's coarse
  file clock (milliseconds on a local disk); a file system whose clock lags ours by more (NFS with a skewed
  server) could let a change made during the build pass, as it can in ccache.

The source's own directory is a fresh temporary one holding only the source, so its candidates depend on the
text alone; the build's outputs are written beside it, not in it.
"""
from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass

#: How much earlier than the build's start a file's timestamps must be for the record to trust its hash.
SETTLE_SECONDS = 0.1

#: A preprocessor directive that reads a file (`#`, or the digraph `%:`), and the rest of its line.
_DIRECTIVE = re.compile(rb"^[ \t]*(?:#|%:|\?\?=)[ \t]*(?:include_next|include|import|embed)\b(.*)$", re.M)
#: `__has_include(`, `__has_include_next(` (and gcc's older `__has_include__`), `__has_embed(`.
_HAS_INCLUDE = re.compile(rb"\b(?:__has_include|__has_include_next|__has_embed)(?:__)?[ \t]*\((.*)$", re.M)


class NotKept(Exception):
    """The build read something the record cannot describe exactly; the message says what."""


@dataclass(frozen=True)
class IncludeRecord:
    """The files a build read, with their sha256, and the paths that were not files and must stay so."""
    files: dict[str, str]
    absent: tuple[str, ...]

    def still_holds(self) -> bool:
        return (not any(os.path.isfile(path) for path in self.absent)
                and all(_sha256(path) == digest for path, digest in self.files.items()))

    def as_json(self) -> dict:
        return {"files": self.files, "absent": list(self.absent)}

    @staticmethod
    def from_json(data: dict) -> "IncludeRecord":
        files, absent = data["files"], data["absent"]
        if not (isinstance(files, dict) and isinstance(absent, list)):
            raise ValueError("not an include record")
        return IncludeRecord(dict(files), tuple(absent))


def dependency_flags(deps_path: str) -> list[str]:
    """nvcc writes the files it read to deps_path, under the target name `kept`."""
    return ["-MD", "-MF", deps_path, "-MT", "kept"]


def include_directories(extra: list[str]) -> list[str] | None:
    """The absolute directories of `-IDIR` flags, or None where `extra` holds any other flag (which could name
    files or directories the record would not see: -isystem, -include, --include-path...)."""
    directories = []
    for flag in extra:
        if not flag.startswith("-I") or len(flag) == 2:
            return None
        directories.append(os.path.join(os.getcwd(), flag[2:]))
    return directories


def record_build(source_path: str, deps_path: str, include_dirs: list[str], started: float) -> IncludeRecord | None:
    """The record of a finished build (module docstring), or None where the build cannot be kept exactly."""
    try:
        read = [path for path in dependency_list(deps_path) if path != source_path]
        files, absent = {}, set()
        for path in [source_path, *read]:
            with open(path, "rb") as fh:
                content = fh.read()
            digest = hashlib.sha256(content).hexdigest()
            if path != source_path:
                files[path] = digest
            absent.update(candidate for candidate in _candidates(path, digest, content, source_path, include_dirs)
                          if not os.path.isfile(candidate))
        _check_settled(read, started)
    except (NotKept, OSError):
        return None
    return IncludeRecord(files, tuple(sorted(absent)))


def dependency_list(deps_path: str) -> list[str]:
    """The files of nvcc's `kept : a.h b\\ c.h ...` rule, absolute (relative ones are the working directory's)."""
    with open(deps_path, "rb") as fh:
        text = os.fsdecode(fh.read()).replace("\\\n", " ")
    head, colon, rest = text.partition(":")
    if head.strip() != "kept" or not colon:
        raise NotKept(f"unexpected dependency file {text[:80]!r}")
    paths = [_unescape(word) for word in re.split(r"(?<!\\)\s+", rest.strip()) if word]
    paths = [os.path.join(os.getcwd(), path) for path in paths]
    if not all(os.path.isfile(path) for path in paths):
        raise NotKept("a listed dependency is not a file")
    return paths


def _unescape(word: str) -> str:
    """Make's escapes as gcc writes them: `\\ ` (space), `\\#`, `$$`; any other backslash is ambiguous."""
    word = word.replace("\\ ", " ").replace("\\#", "#").replace("$$", "$")
    if "\\" in word:
        raise NotKept(f"ambiguous dependency {word!r}")
    return word


def _candidates(including: str, digest: str, content: bytes, source_path: str, include_dirs: list[str]):
    """Where each spelling `including` names could be looked for in a directory the user controls."""
    for quoted, spelling in _spellings(digest, content):
        directories = list(include_dirs)
        if quoted and including == source_path:
            if ".." in spelling.split("/"):
                raise NotKept(f"'{spelling}' climbs out of the source's temporary directory")
        elif quoted:
            directories.insert(0, os.path.dirname(including))
        for directory in directories:
            yield os.path.join(directory, spelling)


def _spellings(digest: str, content: bytes) -> tuple[tuple[bool, str], ...]:
    """(quoted, spelling) of each file-reading directive and __has_include in `content` (the same system
    headers come back in every build: scanned once per process, by digest)."""
    if digest not in _scanned:
        _scanned[digest] = _scan(content)
    return _scanned[digest]


_scanned: dict[str, tuple[tuple[bool, str], ...]] = {}


def _scan(content: bytes) -> tuple[tuple[bool, str], ...]:
    operands = [m.group(1) for m in _DIRECTIVE.finditer(content)]
    if b"__has_" in content:
        operands += [m.group(1) for m in _HAS_INCLUDE.finditer(content)]
    return tuple(_spelling(operand) for operand in operands if _is_directive(operand))


def _is_directive(operand: bytes) -> bool:
    """False for prose in a comment ("#include's", a bare "#include"), which the preprocessor never reads as one."""
    return operand.lstrip(b" \t")[:1] not in (b"'", b"")


def _spelling(operand: bytes) -> tuple[bool, str]:
    operand = operand.lstrip(b" \t")
    close = {b'"': b'"', b"<": b">"}.get(operand[:1])
    end = operand.find(close, 1) if close else -1
    if end < 0:
        raise NotKept(f"computed include {os.fsdecode(operand[:60])!r}")
    return operand[:1] == b'"', os.fsdecode(operand[1:end])


def _check_settled(paths: list[str], started: float) -> None:
    limit = started - SETTLE_SECONDS
    for path in paths:
        info = os.stat(path)
        if max(info.st_mtime, info.st_ctime) > limit:
            raise NotKept(f"{path} changed while it was built")


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def now() -> float:
    """The build's start, on the clock file timestamps are compared with."""
    return time.time()
