"""The compile-once cache: memory and disk layers, atomicity, several processes, statistics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from structout.cache import CompileCache, default_cache_dir, schema_key

REPO = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


class CountingTranslator:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, schema: Any) -> str:
        self.calls += 1
        return f"start ::= {json.dumps(json.dumps(schema, sort_keys=True))} ;"


def test_second_lookup_is_a_memory_hit(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path)
    tr = CountingTranslator()
    text1, key1 = cache.kbnf_for_schema(SCHEMA, tr)
    # Same schema with another key order: same canonical JSON, same entry.
    reordered = {"required": ["a"], "properties": {"a": {"type": "integer"}}, "type": "object"}
    text2, key2 = cache.kbnf_for_schema(reordered, tr)
    assert (text1, key1) == (text2, key2)
    assert tr.calls == 1
    s = cache.stats()
    assert (s.schema_misses, s.schema_memory_hits, s.schema_disk_hits) == (1, 1, 0)
    assert s.disk_writes == 1
    assert s.as_dict()["schema_hits"] == 1


def test_new_cache_object_hits_the_disk(tmp_path: Path) -> None:
    tr = CountingTranslator()
    CompileCache(tmp_path).kbnf_for_schema(SCHEMA, tr)
    fresh = CompileCache(tmp_path)
    text, _ = fresh.kbnf_for_schema(SCHEMA, tr)
    assert tr.calls == 1
    assert fresh.stats().schema_disk_hits == 1
    assert text == tr(SCHEMA)


def test_key_depends_on_options_and_schema() -> None:
    assert schema_key(SCHEMA) == schema_key(json.loads(json.dumps(SCHEMA)))
    assert schema_key(SCHEMA) != schema_key(SCHEMA, {"whitespace": "compact"})
    assert schema_key(SCHEMA) != schema_key({**SCHEMA, "required": []})


def test_memory_bound_is_respected(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, max_memory_entries=2, disk=False)
    tr = CountingTranslator()
    for i in range(3):
        cache.kbnf_for_schema({"const": i}, tr)
    cache.kbnf_for_schema({"const": 0}, tr)  # evicted (least recently used) → translated again
    assert tr.calls == 4
    cache.kbnf_for_schema({"const": 2}, tr)
    assert tr.calls == 4


def test_corrupt_disk_entry_is_a_miss_and_gets_replaced(tmp_path: Path) -> None:
    tr = CountingTranslator()
    _, key = CompileCache(tmp_path).kbnf_for_schema(SCHEMA, tr)
    files = list(tmp_path.rglob(f"{key}.json"))
    assert len(files) == 1
    files[0].write_text('{"format": 1, "key": "' + key + '", "kbnf": "trunc')  # torn write
    cache = CompileCache(tmp_path)
    cache.kbnf_for_schema(SCHEMA, tr)
    assert tr.calls == 2 and cache.stats().schema_misses == 1
    entry = json.loads(files[0].read_text())
    assert entry["key"] == key and entry["kbnf"] == tr(SCHEMA)
    # No temporary files are left behind.
    assert [p.name for p in files[0].parent.iterdir()] == [files[0].name]


def test_tampered_entry_fails_the_checksum(tmp_path: Path) -> None:
    tr = CountingTranslator()
    _, key = CompileCache(tmp_path).kbnf_for_schema(SCHEMA, tr)
    path = next(tmp_path.rglob(f"{key}.json"))
    entry = json.loads(path.read_text())
    entry["kbnf"] = "start ::= 'evil' ;"
    path.write_text(json.dumps(entry))
    text, _ = CompileCache(tmp_path).kbnf_for_schema(SCHEMA, tr)
    assert text == tr(SCHEMA)


def test_unwritable_directory_degrades_to_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = CompileCache(blocker / "sub")
    tr = CountingTranslator()
    with pytest.warns(RuntimeWarning, match="STRUCTOUT_CACHE_DIR"):
        cache.kbnf_for_schema(SCHEMA, tr)
    cache.kbnf_for_schema(SCHEMA, tr)
    assert tr.calls == 1
    assert cache.stats().disk_errors == 1


def test_env_var_sets_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCTOUT_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    cache = CompileCache()
    cache.kbnf_for_schema(SCHEMA, CountingTranslator())
    assert list((tmp_path / "c").rglob("*.json"))
    monkeypatch.delenv("STRUCTOUT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert default_cache_dir() == tmp_path / "xdg" / "structout"


_CHILD = textwrap.dedent(
    """
    import json, sys
    from structout.cache import CompileCache
    def translate(schema):
        raise SystemExit("translator called: the disk cache missed")
    cache = CompileCache()
    text, key = cache.kbnf_for_schema(json.loads(sys.argv[1]), translate)
    print(json.dumps({"text": text, "stats": cache.stats().as_dict()}))
    """
)


def test_second_process_starts_warm(tmp_path: Path) -> None:
    tr = CountingTranslator()
    env = {**os.environ, "STRUCTOUT_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    CompileCache(tmp_path).kbnf_for_schema(SCHEMA, tr)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(SCHEMA)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    result = json.loads(out.stdout)
    assert result["text"] == tr(SCHEMA)
    assert result["stats"]["schema_disk_hits"] == 1
    assert result["stats"]["schema_misses"] == 0


def _write_same_key(directory: str) -> str:
    cache = CompileCache(directory, disk=True)
    text, _ = cache.kbnf_for_schema(SCHEMA, CountingTranslator())
    cache.clear()  # force the next lookups through the disk
    for _ in range(20):
        again, _ = cache.kbnf_for_schema(SCHEMA, CountingTranslator())
        assert again == text
        cache.clear()
    return text


def test_many_processes_share_one_directory(tmp_path: Path) -> None:
    with ProcessPoolExecutor(max_workers=4) as pool:
        texts = list(pool.map(_write_same_key, [str(tmp_path)] * 8))
    assert len(set(texts)) == 1
    entries = list(tmp_path.rglob("*.json"))
    assert len(entries) == 1
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_compiled_grammar_cache_hits(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, disk=False)
    compiled: list[str] = []

    class Vocab:
        pass

    def compile_fn(text: str, vocab: Any) -> object:
        compiled.append(text)
        return object()

    v1, v2 = Vocab(), Vocab()
    g1 = cache.compiled_grammar("start ::= 'a' ;", v1, compile_fn)
    assert cache.compiled_grammar("start ::= 'a' ;", v1, compile_fn) is g1
    assert cache.compiled_grammar("start ::= 'a' ;", v2, compile_fn) is not g1  # other vocab
    assert cache.compiled_grammar("start ::= 'b' ;", v1, compile_fn) is not g1
    assert len(compiled) == 3
    s = cache.stats()
    assert (s.grammar_hits, s.grammar_misses) == (1, 3)
