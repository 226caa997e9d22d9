"""Jinja templates for the code shapes the passes insert (templates/ at the project root).

An installed package carries them as gpgpu_opt/templates (pyproject.toml maps the directory there); a
checkout or an editable install reads templates/ beside the package."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

import jinja2


def template_dir() -> Path:
    """Where the templates are: inside the installed package, else the project root's templates/."""
    packaged = resources.files("gpgpu_opt") / "templates"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir())), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)


def render(name: str, /, **values) -> str:
    return environment().get_template(name).render(**values)
