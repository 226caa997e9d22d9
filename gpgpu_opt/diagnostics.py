"""Compiler-style diagnostics: `file:line:col: error: ...` and `note:` lines."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field


#: What a program read from standard input is called in diagnostics.
STDIN_NAME = "<stdin>"


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    column: int = 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"

    @classmethod
    def of(cls, node, fallback: "Location | None" = None) -> "Location | None":
        """Location of a pycparser node (its `coord`), or `fallback`."""
        coord = getattr(node, "coord", None)
        if coord is None or not coord.file or coord.file.startswith("<") and coord.file != STDIN_NAME:
            return fallback     # text of gpgpu-opt's own (<cuda-prelude>, <typedefs>...), not the user's
        return cls(coord.file, coord.line, coord.column or 1)


class CompileError(Exception):
    """An error in the user's input. Printed as `file:line:col: error: message`."""

    def __init__(self, message: str, location: Location | None = None, more: tuple[str, ...] = ()):
        super().__init__(message)
        self.message = message
        self.location = location
        self.more = more        # further error lines printed after this one (nvcc's other errors)

    def __str__(self) -> str:
        prefix = f"{self.location}: " if self.location else ""
        return "\n".join([f"{prefix}error: {self.message}", *self.more])


@dataclass
class Note:
    message: str
    location: Location | None = None
    kernel: str | None = None
    pass_name: str | None = None
    severity: str = "note"          # or 'warning'

    def __str__(self) -> str:
        prefix = f"{self.location}: " if self.location else ""
        return f"{prefix}{self.severity}: {self.message}"


@dataclass
class Diagnostics:
    """Collects notes and warnings; echoes them to stderr unless quiet."""

    quiet: bool = False
    notes: list[Note] = field(default_factory=list)

    def note(self, message: str, location: Location | None = None, *, kernel: str | None = None,
             pass_name: str | None = None) -> Note:
        return self._emit(Note(message, location, kernel, pass_name))

    def warning(self, message: str, location: Location | None = None, *, kernel: str | None = None) -> Note:
        return self._emit(Note(message, location, kernel, severity="warning"))

    def extend(self, notes: list[Note]) -> None:
        """Notes collected elsewhere (held back until their command knew it would not fail), in order."""
        for note in notes:
            self._emit(note)

    def _emit(self, note: Note) -> Note:
        self.notes.append(note)
        if not self.quiet:
            print(str(note), file=sys.stderr)
        return note
