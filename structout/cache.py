"""Compile-once cache: schema → KBNF → compiled grammar.

Two layers:

* **Schema → KBNF.** Keyed by a SHA-256 of the schema (its ``marshal`` form for plain data, else
  its canonical JSON; in the schema's key order, which the translation follows), the translator
  options and the structout version. Kept in a bounded in-memory LRU and on disk under
  ``STRUCTOUT_CACHE_DIR``
  (default: the user cache directory, e.g. ``~/.cache/structout``), so a second process starts warm.
  Disk entries are written atomically (temporary file in the same directory + ``os.replace``) and
  carry a checksum; several processes may read and write the same directory at once, a torn or
  corrupt entry is treated as a miss and rewritten. An entry is one line of JSON (format, key,
  version, SHA-256 of the text) and then the KBNF text as it is: no JSON string to parse, whose
  escapes made reading a large grammar's entry cost more than loading its compiled form.
* **KBNF + vocabulary → compiled grammar.** The engine's cache (one per process, bounded by
  ``structout.configure_cache``), with its disk layer under ``<directory>/grammars``: a grammar
  compiled by one process is loaded by the next instead of being compiled again. Entries are keyed
  by the full grammar text, the engine limits, the vocabulary's fingerprint and the engine build;
  one that is corrupt, truncated or foreign is detected (magic, build, checksum, key, structural
  checks), recompiled and replaced, never trusted.

Both disk layers are written after the call that compiled the entry has returned, by the
engine's writer thread (one per process, native: it never holds the interpreter lock, so it does
not slow the next request's Python work; :func:`flush_disk_writes` waits for it, interpreter exit
does too, not ``os._exit``), so a new schema is ready without waiting for the filesystem.
Statistics are readable with :func:`cache_stats` (``structout.cache_stats()``: the process-wide
cache; or ``CompileCache.stats()``); the engine's own counters, every path included, with
``structout.grammar_cache_stats()``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import marshal
import os
import sys
import threading
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from structout import _engine
from structout.lru import LRU

if TYPE_CHECKING:  # pragma: no cover
    from structout._engine import CompiledGrammar

__all__ = [
    "CacheStats",
    "CompileCache",
    "cache_stats",
    "clear_cache",
    "default_cache_dir",
    "flush_disk_writes",
    "get_default_cache",
    "schema_key",
    "schema_key_function",
]

#: Bump when the on-disk entry format or the key changes (old entries are then ignored, not
#: misread). 3: schema keys keep the schema's key order (2 sorted them, and so gave a schema
#: whose properties were reordered the grammar of the first order seen).
DISK_FORMAT = 3


def structout_version() -> str:
    """The structout version (part of every cache key): the engine's, which is the package's
    (``pyproject.toml`` takes its version from ``engine_rs/Cargo.toml``)."""
    from structout._engine import __version__

    return __version__


def default_cache_dir() -> Path:
    """``$STRUCTOUT_CACHE_DIR`` if set, else the platform's user cache directory + ``structout``."""
    env = os.environ.get("STRUCTOUT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "structout" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "structout"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "structout"


def schema_key(schema: Any, options: Mapping[str, Any] | None = None) -> str:
    """SHA-256 hex key of (schema, translator options, structout version, translator revision).

    The schema part keeps the schema's key order, as the translation does (properties are emitted
    in the schema's order). For plain data (dicts, lists, strings, numbers, booleans, None) it is
    the ``marshal`` serialization, format 2 (no references or interning flags: equal data gives
    equal bytes in every process of one Python version; several times cheaper than JSON for a
    large schema); for anything else (a Pydantic type, a dict subclass) the canonical JSON of
    ``structout.schema.canonical_schema_key``. Equal keys mean equal data, hence equal grammars.
    """
    return schema_key_function(options)(schema)


def schema_key_function(options: Mapping[str, Any] | None = None) -> Callable[[Any], str]:
    """:func:`schema_key` under fixed ``options``, their part of the key computed once (for
    callers that key many schemas under the same options: the tools of one request)."""
    salt = _key_salt(options)

    def key(schema: Any) -> str:
        try:
            part = b"marshal\0" + marshal.dumps(schema, 2)
        except (ValueError, TypeError, RecursionError):  # not plain data
            from structout.schema import canonical_schema_key

            part = b"canonical\0" + canonical_schema_key(schema).encode()
        h = hashlib.sha256(salt)
        h.update(part)
        return h.hexdigest()

    return key


def _key_salt(options: Mapping[str, Any] | None) -> bytes:
    """The part of every key that is not the schema: format, translator options, versions."""
    from structout.schema import _TRANSLATOR_REVISION, canonical_json

    version = structout_version()
    try:
        # (with each value's type: True and 1 are equal keys but different options)
        config = (
            _TRANSLATOR_REVISION,
            version,
            tuple(sorted((k, type(v).__name__, v) for k, v in (options or {}).items())),
        )
        salt = _SALT_BY_CONFIG.get(config)
    except TypeError:  # an unhashable option value (a registry mapping)
        config, salt = None, None
    if salt is None:
        text = canonical_json(
            {
                "format": DISK_FORMAT,
                "options": dict(options or {}),
                "structout": version,
                "translator": _TRANSLATOR_REVISION,
                "python": sys.version_info[:2],
            }
        )
        salt = text.encode("utf-8") + b"\0"
        if config is not None:
            if len(_SALT_BY_CONFIG) >= 64:
                _SALT_BY_CONFIG.clear()
            _SALT_BY_CONFIG[config] = salt
    return salt


#: The salt of each configuration seen (translator revision, version, options; a server has one
#: or a few): it depends on no schema, so a key costs the schema's serialization and one hash,
#: not a JSON encoding of the options and versions every time.
_SALT_BY_CONFIG: dict[tuple[int, str, tuple[tuple[str, str, Any], ...]], bytes] = {}


@dataclass
class CacheStats:
    """Hit/miss counters (a snapshot; counters only grow until ``reset_stats``)."""

    schema_memory_hits: int = 0
    schema_disk_hits: int = 0
    schema_misses: int = 0
    #: Compiled grammars found in the engine's memory cache / loaded from disk / compiled.
    grammar_hits: int = 0
    grammar_disk_hits: int = 0
    grammar_misses: int = 0
    disk_writes: int = 0
    disk_errors: int = 0

    @property
    def schema_hits(self) -> int:
        return self.schema_memory_hits + self.schema_disk_hits

    def as_dict(self) -> dict[str, int]:
        d = asdict(self)
        d["schema_hits"] = self.schema_hits
        return d


class CompileCache:
    """Schema → KBNF (memory + disk) and KBNF + vocabulary → compiled grammar (the engine's
    memory cache + disk).

    ``directory=None`` uses :func:`default_cache_dir` (read at each access, so setting
    ``STRUCTOUT_CACHE_DIR`` later still takes effect); ``disk=False`` keeps everything in memory.
    """

    def __init__(
        self,
        directory: os.PathLike[str] | str | None = None,
        *,
        max_memory_entries: int = 256,
        disk: bool = True,
    ) -> None:
        self._directory = Path(directory) if directory is not None else None
        self.disk = disk
        self._kbnf: LRU[str, str] = LRU(max_memory_entries)
        self._stats = CacheStats()
        self._stats_lock = threading.Lock()
        self._warned = False
        # This cache's KBNF entries, written by the engine's writer thread (its outcomes are
        # counted there; ``_writes_base`` is what they were at the last ``reset_stats``).
        self._writes = _engine.DiskWrites()
        self._writes_base = (0, 0)

    # ----------------------------------------------------------------- paths & stats
    @property
    def directory(self) -> Path:
        return self._directory if self._directory is not None else default_cache_dir()

    @property
    def grammar_directory(self) -> Path | None:
        """Where compiled grammars are kept on disk (None when ``disk=False``)."""
        return self.directory / "grammars" if self.disk else None

    def _root(self) -> str:
        """The directory as text (``os.path`` on strings: a lookup costs microseconds, not the
        tens that ``pathlib`` objects cost on every new schema)."""
        return (
            os.fspath(self._directory) if self._directory is not None else str(default_cache_dir())
        )

    def _entry_path(self, root: str, key: str) -> str:
        return os.path.join(root, "kbnf", f"v{DISK_FORMAT}", key[:2], f"{key}.kbnf")

    def _count(self, field: str) -> None:
        with self._stats_lock:
            setattr(self._stats, field, getattr(self._stats, field) + 1)

    def stats(self) -> CacheStats:
        self._report_write_error()
        with self._stats_lock:
            stats = CacheStats(**asdict(self._stats))
            written, failed = self._writes_base
        stats.disk_writes += self._writes.written - written
        stats.disk_errors += self._writes.failed - failed
        return stats

    def reset_stats(self) -> None:
        with self._stats_lock:
            self._stats = CacheStats()
            self._writes_base = (self._writes.written, self._writes.failed)

    def clear(self, *, disk: bool = False) -> None:
        """Drop the in-memory KBNF layer and the engine's compiled grammars (and this cache's
        on-disk KBNF and compiled-grammar entries when ``disk=True``)."""
        # Pending writes first: they would bring entries back, or count after the reset.
        flush_disk_writes()
        self._kbnf.clear()
        _engine.configure_cache(int(_engine.cache_stats()["capacity"]), clear=True)
        if disk:
            # (`*.json`: entries of the first KBNF format)
            for sub, pattern in (("kbnf", "*.kbnf"), ("kbnf", "*.json"), ("grammars", "*.grammar")):
                root = self.directory / sub
                if root.is_dir():
                    for path in root.rglob(pattern):
                        with contextlib.suppress(OSError):
                            path.unlink()

    # ----------------------------------------------------------------- schema → KBNF
    def kbnf_for_schema(
        self,
        schema: Any,
        translate: Callable[[Any], str],
        options: Mapping[str, Any] | None = None,
        *,
        quick: Callable[[Any], str | None] | None = None,
        key: Callable[[Any], str] | None = None,
    ) -> tuple[str, str]:
        """Return ``(kbnf_text, key)`` for a JSON Schema, translating only on a miss.

        ``translate(schema)`` is called on a miss (its exceptions propagate unchanged, nothing is
        cached for a schema that fails to translate). ``quick(schema)``, when given, is tried on
        a memory miss before the disk: a translation cheaper than a disk lookup (the engine's
        common shape), whose text is kept in memory only; None passes on to the disk and
        ``translate``. ``key``: the schema's key function, from :func:`schema_key_function` for
        the options ``translate`` uses (instead of ``options``).
        """
        if key is not None and options is not None:
            raise TypeError("pass the translator options or their key function, not both")
        digest = schema_key(schema, options) if key is None else key(schema)
        text = self._kbnf.get(digest)
        if text is not None:
            self._count("schema_memory_hits")
            return text, digest
        if quick is not None:
            text = quick(schema)
            if text is not None:
                self._count("schema_misses")
                self._kbnf.put(digest, text)
                return text, digest
        root = self._root() if self.disk else None
        if root is not None:
            text = self._read_disk(self._entry_path(root, digest), digest)
            if text is not None:
                self._count("schema_disk_hits")
                self._kbnf.put(digest, text)
                return text, digest
        self._count("schema_misses")
        text = translate(schema)
        if not isinstance(text, str):
            raise TypeError(f"schema translator returned {type(text).__name__}, expected str")
        self._kbnf.put(digest, text)
        if root is not None:
            self._write_disk(root, digest, text)
        return text, digest

    def _read_disk(self, path: str, key: str) -> str | None:
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            self._disk_problem(f"cannot read {path}: {exc}")
            return None
        header, newline, body = raw.partition(b"\n")
        try:
            entry = json.loads(header.decode("utf-8"))
            ok = (
                bool(newline)
                and isinstance(entry, dict)
                and entry.get("format") == DISK_FORMAT
                and entry.get("key") == key
                and entry.get("sha256") == hashlib.sha256(body).hexdigest()
            )
            text = body.decode("utf-8") if ok else None
        except (ValueError, TypeError, RecursionError):
            text = None
        # None: a corrupt or foreign file, a miss; the next write replaces it atomically.
        return text

    def _write_disk(self, root: str, key: str, text: str) -> None:
        """Hands a new KBNF entry to the engine's writer thread, which writes it after this call
        returns, without the interpreter lock."""
        body = text.encode("utf-8")
        header = {
            "format": DISK_FORMAT,
            "key": key,
            "structout": structout_version(),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
        # One line: json.dumps escapes every newline inside strings.
        data = json.dumps(header).encode("utf-8") + b"\n" + body
        path = self._entry_path(root, key)
        self._writes.write_later(path, data, _unless_removed(root))
        self._report_write_error()

    def _report_write_error(self) -> None:
        """Warns (once per cache) of the first background write that failed."""
        message = self._writes.take_error()
        if message is not None:
            self._warn_disk_problem(message)

    def _disk_problem(self, message: str) -> None:
        self._count("disk_errors")
        self._warn_disk_problem(message)

    def _warn_disk_problem(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"structout cache: {message}; continuing without the disk cache for this entry "
                "(set STRUCTOUT_CACHE_DIR to a writable directory to fix)",
                RuntimeWarning,
                stacklevel=4,
            )

    # ----------------------------------------------------------------- KBNF → grammar
    def compiled_grammar(
        self, kbnf: str, vocab: Any, limits: Mapping[str, Any] | None = None
    ) -> CompiledGrammar:
        """The compiled grammar for ``kbnf`` over ``vocab`` under the engine ``limits``: from the
        engine's memory cache, else from this cache's disk directory, else compiled (and then
        written there). Disk problems never fail the call; they cost a compilation."""
        root = self._root() if self.disk else None
        directory = os.path.join(root, "grammars") if root is not None else None
        engine_limits = dict(limits or {})
        grammar, origin = _engine.load_or_compile(
            kbnf, vocab, "start", directory, defer_write=True, **engine_limits
        )
        self._count(
            {"memory": "grammar_hits", "disk": "grammar_disk_hits"}.get(origin, "grammar_misses")
        )
        if origin == "compiled" and directory is not None:
            _engine.store_compiled_later(kbnf, grammar, directory, _unless_removed(root))
        return grammar


def _unless_removed(root: str | None) -> str | None:
    """``root`` when it exists now: a background write is then skipped if it was removed
    meanwhile (a write does not bring back a cache directory its owner deleted)."""
    return root if root is not None and os.path.isdir(root) else None


if hasattr(os, "register_at_fork"):  # (not on Windows, which does not fork)
    # A fork waits until the engine's writer thread is between jobs (a job may hold a lock the
    # child would need: the engine's cache counters); the child starts its own writer at its
    # first write, without the parent's queue (those entries are the parent's to write).
    os.register_at_fork(
        before=lambda: _engine.pause_disk_writes(10.0, start=False),
        after_in_parent=_engine.resume_disk_writes,
    )


def flush_disk_writes(timeout: float | None = None) -> bool:
    """Wait until the disk writes submitted so far by every cache in this process are done (they
    run in the background after the compile that produced them); False if ``timeout`` seconds
    passed first. Also run at interpreter exit, so a short-lived process leaves its entries for
    the next; a process that ends with ``os._exit`` (multiprocessing workers do) or is killed
    leaves the last ones unwritten (a miss later, never a wrong entry). Call it before removing a
    cache directory that is still in use.
    """
    return bool(_engine.flush_disk_writes(timeout))


atexit.register(flush_disk_writes, 30.0)

_default_cache: CompileCache | None = None
_default_lock = threading.Lock()


def get_default_cache() -> CompileCache:
    """The process-wide cache used by :class:`structout.Model` unless another is given."""
    global _default_cache
    with _default_lock:
        if _default_cache is None:
            _default_cache = CompileCache()
        return _default_cache


def cache_stats() -> CacheStats:
    """Hit/miss statistics of the process-wide :class:`CompileCache` (``structout.cache_stats``)."""
    return get_default_cache().stats()


def clear_cache(*, disk: bool = False) -> None:
    """Clear the process-wide cache's memory layers (and its disk entries with ``disk=True``)."""
    get_default_cache().clear(disk=disk)
