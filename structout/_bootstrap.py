"""Finding the compiled engine (``structout._engine``) before anything imports it.

``pip install .`` puts the package, engine included, into site-packages. Python started from the
repository root imports the *source* folder ``structout/`` instead (the working directory comes
first on ``sys.path``), and a source folder has no compiled engine unless it was built in place
(``pip install -e .``). In that one case, when the installed wheel was built from this very checkout
(pip records the source directory in the wheel's ``direct_url.json``, PEP 610), its engine is the
engine of this source and is loaded under the name ``structout._engine``. Anything else fails with
an ImportError that says what to do; an engine built from other sources is never mixed in.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["ensure_engine"]

_NAME = "structout._engine"


def ensure_engine() -> None:
    """Make ``import structout._engine`` work, or raise an ImportError saying how to fix it."""
    if _NAME in sys.modules:
        return
    try:
        importlib.import_module(_NAME)
        return
    except ImportError as exc:
        missing = exc
    source_root = Path(__file__).resolve().parent.parent
    engine = _installed_engine_built_from(source_root)
    if engine is None:
        raise ImportError(
            f"structout's compiled engine ({_NAME}) is missing from {source_root / 'structout'}.\n"
            f"Python is importing structout from a source checkout ({source_root}) that was not "
            "built in place, and no installed structout was built from this checkout.\n"
            "hint: build it in place with `python3 -m pip install -e .` (needs a Rust toolchain), "
            "or install it with `python3 -m pip install .` and run Python (or the `structout` "
            "command) from another directory."
        ) from missing
    spec = importlib.util.spec_from_file_location(
        _NAME, engine, loader=importlib.machinery.ExtensionFileLoader(_NAME, str(engine))
    )
    if spec is None or spec.loader is None:  # pragma: no cover - only for unloadable files
        raise ImportError(f"cannot load structout's engine from {engine}") from missing
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_NAME]
        raise


def _installed_engine_built_from(source_root: Path) -> Path | None:
    """The engine file of an installed structout wheel built from ``source_root``, if any."""
    try:
        dist = metadata.distribution("structout")
    except metadata.PackageNotFoundError:
        return None
    origin = dist.read_text("direct_url.json")
    if not origin:
        return None
    try:
        url = urlparse(json.loads(origin).get("url", ""))
    except (ValueError, AttributeError):
        return None
    if url.scheme != "file" or Path(unquote(url.path)).resolve() != source_root:
        return None
    for file in dist.files or ():
        parts = file.parts
        is_engine = parts[-1].startswith("_engine.") and parts[-1].endswith((".so", ".pyd"))
        if len(parts) == 2 and parts[0] == "structout" and is_engine:
            path = Path(str(dist.locate_file(file))).resolve()
            if path.is_file() and path.parent != source_root / "structout":
                return path
    return None


ensure_engine()
