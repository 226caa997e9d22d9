"""The tuning database: the winning variant of `tune`, keyed by the kernel's source hash, the sizes, the target
and the GPU's name; a JSON file under the user's cache directory (`--db` overrides it)."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.kernel import Kernel


def default_path() -> Path:
    """$GPGPU_OPT_CACHE, else the platform's user cache dir (XDG_CACHE_HOME, ~/.cache, ~/Library/Caches,
    %LOCALAPPDATA%), in gpgpu-opt/tuning.json."""
    if os.environ.get("GPGPU_OPT_CACHE"):
        return Path(os.environ["GPGPU_OPT_CACHE"]) / "tuning.json"
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif sys.platform.startswith("win"):
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gpgpu-opt" / "tuning.json"


def source_hash(kernel: Kernel) -> str:
    """sha256 of the kernel as parsed and printed (preprocessed: its macros' values are in it; layout is not)."""
    return hashlib.sha256(kernel_source(kernel.funcdef).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Choice:
    """What `compile` is told: the passes to run (`named`: those asked for by name, which run even where the
    target does not need them, as partition on GPUs that hash addresses), the merge factors (`--merge`), and
    the vector width."""
    passes: tuple[str, ...]
    merge: str | None = None
    vector_width: int | None = None
    named: tuple[str, ...] = ()

    def pass_list(self):
        from gpgpu_opt.passes import PassList

        return PassList(self.passes, self.named)

    def describe(self) -> str:
        parts = [f"passes {','.join(self.passes) or 'none'}"]
        if self.merge:
            parts.append(f"merge {self.merge}")
        if self.vector_width:
            parts.append(f"vector width {self.vector_width}")
        if self.named:
            parts.append(f"asked for {','.join(self.named)}")
        return ", ".join(parts)


@dataclass
class Entry:
    kernel: str
    source_hash: str
    sizes: dict
    target: str
    gpu: str
    choice: Choice
    label: str = ""
    ms: float | None = None
    naive_ms: float | None = None
    stored_at: float = field(default_factory=time.time)

    def key(self) -> tuple:
        return (self.source_hash, _sizes_key(self.sizes), self.target, self.gpu)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["choice"]["passes"] = list(self.choice.passes)
        d["choice"]["named"] = list(self.choice.named)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Entry":
        c = d["choice"]
        return cls(d["kernel"], d["source_hash"], dict(d["sizes"]), d["target"], d["gpu"],
                   Choice(tuple(c["passes"]), c.get("merge"), c.get("vector_width"), tuple(c.get("named", ()))),
                   d.get("label", ""),
                   d.get("ms"), d.get("naive_ms"), d.get("stored_at", 0.0))


def _sizes_key(sizes: dict) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in sizes.items()))


class TuningDB:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_path()

    def entries(self) -> list[Entry]:
        if not self.path.exists():
            return []
        try:
            data = json.loads(self.path.read_text())
            return [Entry.from_dict(d) for d in data.get("entries", [])]
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{self.path}: not a gpgpu-opt tuning database ({err})") from None

    def store(self, entry: Entry) -> None:
        """Add the entry, replacing one of the same key; written atomically."""
        kept = [e for e in self.entries() if e.key() != entry.key()] + [entry]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tuning-")
        with os.fdopen(fd, "w") as fh:
            json.dump({"version": 1, "entries": [e.as_dict() for e in kept]}, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, self.path)

    def lookup(self, source_hash_: str, target: str, sizes: dict | None = None, gpu: str | None = None) -> Entry | None:
        """The most recent entry for this kernel source and target; sizes and GPU must match where given."""
        found = [e for e in self.entries() if e.source_hash == source_hash_ and e.target == target
                 and (sizes is None or _sizes_key(e.sizes) == _sizes_key(sizes))
                 and (gpu is None or e.gpu == gpu)]
        return max(found, key=lambda e: e.stored_at) if found else None


def tuned_choice(db: TuningDB, program, target, bindings: dict, gpu: str | None, diagnostics) -> Entry | None:
    """The stored choice `compile` uses: one kernel of the program has an entry for this target (sizes as bound
    with --bind where given, the GPU where --gpu names it), and no other kernel has a different one (the merge
    factors apply to the whole compile). A note says which choice is used, or why none."""
    from gpgpu_opt.diagnostics import Location

    found = {}
    for kernel in program.kernels:
        entry = db.lookup(source_hash(kernel), target.name, None, gpu)
        if entry is not None and (not bindings or all(str(entry.sizes.get(k, v)) == str(v) for k, v in bindings.items())):
            found[kernel.name] = (kernel, entry)
    if not found:
        return None
    choices = {e.choice for _, e in found.values()}
    kernel, entry = next(iter(found.values()))
    if len(choices) > 1:
        diagnostics.note(f"tuned choices for {', '.join(found)} differ; compiling untuned (--merge applies to "
                         "every kernel)", Location.of(kernel.funcdef.decl))
        return None
    diagnostics.note(f"{kernel.name}: using the tuned choice {entry.label} ({entry.choice.describe()}) measured on "
                     f"{entry.gpu} at {', '.join(f'{k}={v}' for k, v in entry.sizes.items()) or 'its fixed sizes'} "
                     f"(from {db.path}; --no-tuned ignores it)", Location.of(kernel.funcdef.decl), kernel=kernel.name)
    return entry
