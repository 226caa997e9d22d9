"""docs/ARCHITECTURE.md is true to the code: every module or package it names in backquotes exists, and every
package of the compiler is named (a new folder gets its line in the document)."""
from __future__ import annotations

import re

from tests.conftest import ROOT

DOC = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGE = ROOT / "gpgpu_opt"


def _named_paths() -> set[str]:
    """Backquoted names that read as paths inside the package: `a/b.py`, `a/b/`, `a/b`, `passes/__init__.py`."""
    out = set()
    for token in re.findall(r"`([^`\s]+)`", DOC.read_text()):
        token = token.strip()
        if token.startswith(("gpgpu_opt/", "templates/", "tests/", "golden/", ".")):
            continue
        if "/" in token and re.fullmatch(r"[a-z_0-9/]+(\.py)?/?", token):
            out.add(token.rstrip("/"))
    return out


#: Where a path the document gives relative to a folder (`merge/z_march/`, `normalize/chains.py`) is looked for.
_FOLDERS = ("", "passes", "passes/merge", "rewriting", "analysis", "frontend")


def _exists(path: str) -> bool:
    for folder in _FOLDERS:
        base = PACKAGE / folder / path
        if base.is_file() if path.endswith(".py") else \
                ((base / "__init__.py").is_file() or base.with_suffix(".py").is_file()):
            return True
    return False


def test_every_path_the_document_names_exists():
    missing = sorted(p for p in _named_paths() if not _exists(p))
    assert not missing, f"docs/ARCHITECTURE.md names what is not in gpgpu_opt/: {missing}"


def test_every_package_is_named():
    text = DOC.read_text()
    packages = sorted(str(p.parent.relative_to(PACKAGE)) for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    unnamed = [p for p in packages if not re.search(rf"`(passes/|merge/|rewriting/)?{re.escape(p.split('/')[-1])}/?`", text)
               and f"`{p}/`" not in text and f"`{p}`" not in text]
    assert not unnamed, f"packages docs/ARCHITECTURE.md does not name: {unnamed}"
