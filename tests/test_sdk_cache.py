"""The compile-once cache: memory and disk layers, atomicity, several processes, statistics."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from structout import _engine
from structout.cache import CompileCache, default_cache_dir, flush_disk_writes, schema_key

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
    # An equal schema built anew (the key is of the data, not of the object).
    text2, key2 = cache.kbnf_for_schema(json.loads(json.dumps(SCHEMA)), tr)
    assert (text1, key1) == (text2, key2)
    assert tr.calls == 1
    assert flush_disk_writes(timeout=30)
    s = cache.stats()
    assert (s.schema_misses, s.schema_memory_hits, s.schema_disk_hits) == (1, 1, 0)
    assert s.disk_writes == 1
    assert s.as_dict()["schema_hits"] == 1


def test_new_cache_object_hits_the_disk(tmp_path: Path) -> None:
    tr = CountingTranslator()
    CompileCache(tmp_path).kbnf_for_schema(SCHEMA, tr)
    flush_disk_writes()
    fresh = CompileCache(tmp_path)
    text, _ = fresh.kbnf_for_schema(SCHEMA, tr)
    assert tr.calls == 1
    assert fresh.stats().schema_disk_hits == 1
    assert text == tr(SCHEMA)


def test_key_depends_on_options_and_schema() -> None:
    assert schema_key(SCHEMA) == schema_key(json.loads(json.dumps(SCHEMA)))
    assert schema_key(SCHEMA) != schema_key(SCHEMA, {"whitespace": "compact"})
    assert schema_key(SCHEMA) != schema_key({**SCHEMA, "required": []})
    # Options that compare equal but are different values, in either order of first use (the
    # salt of a configuration is kept once computed).
    for first, second in (({"indent": 1}, {"indent": True}), ({"indent": False}, {"indent": 0})):
        a, b = schema_key(SCHEMA, first), schema_key(SCHEMA, second)
        assert a != b and a == schema_key(SCHEMA, first) and b == schema_key(SCHEMA, second)
    # An unhashable option (a registry) still keys by its content.
    reg = {"urn:a": {"type": "string"}}
    assert schema_key(SCHEMA, {"registry": reg}) == schema_key(SCHEMA, {"registry": dict(reg)})
    assert schema_key(SCHEMA, {"registry": reg}) != schema_key(
        SCHEMA, {"registry": {"urn:a": {"type": "integer"}}}
    )


def test_key_is_of_the_data_in_its_order(monkeypatch: pytest.MonkeyPatch) -> None:
    import structout.schema as schema_mod

    # The translation follows the key order, so the key does too.
    reordered = dict(reversed(list(SCHEMA.items())))
    assert schema_key(reordered) != schema_key(SCHEMA)
    for other in ({**SCHEMA, "required": []}, {**SCHEMA, "x": 1.0}, {**SCHEMA, "x": True}):
        assert schema_key(other) != schema_key({**SCHEMA, "x": 1})

    class Sub(dict):  # type: ignore[type-arg]
        pass

    # Not plain data: keyed by the canonical JSON instead, and still of the data.
    assert schema_key(Sub(SCHEMA)) == schema_key(Sub(json.loads(json.dumps(SCHEMA))))
    assert schema_key(Sub(SCHEMA)) != schema_key(Sub(reordered))
    assert schema_key({"const": object()}) != schema_key({"const": 1})
    cache = CompileCache(disk=False)
    assert cache.kbnf_for_schema(Sub(SCHEMA), CountingTranslator())[1] == schema_key(Sub(SCHEMA))
    # A new translator revision changes every key.
    before = (schema_key(SCHEMA), schema_key(Sub(SCHEMA)))
    monkeypatch.setattr(schema_mod, "_TRANSLATOR_REVISION", schema_mod._TRANSLATOR_REVISION + 1)
    after = (schema_key(SCHEMA), schema_key(Sub(SCHEMA)))
    assert before[0] != after[0] and before[1] != after[1]


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
    flush_disk_writes()
    files = list(tmp_path.rglob(f"{key}.kbnf"))
    assert len(files) == 1
    whole = files[0].read_bytes()
    expected = whole.split(b"\n", 1)[1].decode()
    for torn in (whole[: len(whole) // 2], whole[:-1], whole.split(b"\n")[0], b"[" * 100_000):
        files[0].write_bytes(torn)  # a torn write, or a hostile header
        cache = CompileCache(tmp_path)
        cache.kbnf_for_schema(SCHEMA, tr)
        assert cache.stats().schema_misses == 1
        flush_disk_writes()
        # Rewritten: one line of JSON, then the text as it is.
        header, text = files[0].read_bytes().split(b"\n", 1)
        assert json.loads(header)["key"] == key and text.decode() == expected
    assert tr.calls == 5
    # No temporary files are left behind.
    assert [p.name for p in files[0].parent.iterdir()] == [files[0].name]


def test_tampered_entry_fails_the_checksum(tmp_path: Path) -> None:
    tr = CountingTranslator()
    _, key = CompileCache(tmp_path).kbnf_for_schema(SCHEMA, tr)
    flush_disk_writes()
    path = next(tmp_path.rglob(f"{key}.kbnf"))
    header, _ = path.read_bytes().split(b"\n", 1)
    path.write_bytes(header + b"\nstart ::= 'evil' ;")
    cache = CompileCache(tmp_path)
    text, _ = cache.kbnf_for_schema(SCHEMA, tr)
    assert text == tr(SCHEMA) and cache.stats().schema_misses == 1


def test_unwritable_directory_degrades_to_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = CompileCache(blocker / "sub")
    tr = CountingTranslator()
    # (the write fails in the background, before the flush returns; the cache's next call warns)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache.kbnf_for_schema(SCHEMA, tr)
        flush_disk_writes()
        assert cache.stats().disk_errors == 1
    assert any(
        w.category is RuntimeWarning and "STRUCTOUT_CACHE_DIR" in str(w.message) for w in caught
    )
    cache.kbnf_for_schema(SCHEMA, tr)
    assert tr.calls == 1
    assert cache.stats().disk_errors == 1


def test_env_var_sets_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCTOUT_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    cache = CompileCache()
    cache.kbnf_for_schema(SCHEMA, CountingTranslator())
    flush_disk_writes()
    assert list((tmp_path / "c").rglob("*.kbnf"))
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
    flush_disk_writes()
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
    flush_disk_writes()
    cache.clear()  # force the next lookups through the disk
    for _ in range(20):
        again, _ = cache.kbnf_for_schema(SCHEMA, CountingTranslator())
        assert again == text
        cache.clear()
    # (a pool worker ends with os._exit, which skips the flush at exit)
    flush_disk_writes()
    return text


def test_many_processes_share_one_directory(tmp_path: Path) -> None:
    with ProcessPoolExecutor(max_workers=4) as pool:
        texts = list(pool.map(_write_same_key, [str(tmp_path)] * 8))
    assert len(set(texts)) == 1
    entries = list(tmp_path.rglob("*.kbnf"))
    assert len(entries) == 1
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


KBNF = 'start ::= "{" pair ("," pair)* "}" ; pair ::= #"\\"[a-z]{1,12}\\"" ":" #"-?[0-9]{1,6}" ;'


def _vocab() -> Any:
    import structout

    pieces = ["{", "}", ",", ":", '"', "-", "ab", 'abc"', '":', "12", "3", "x", "0"]
    return structout.Vocabulary.from_bytes(
        [p.encode() for p in pieces] + [None], eos_token_ids=[len(pieces)]
    )


def _masks(grammar: Any, prefixes: list[bytes]) -> list[list[int]]:
    """The mask after each prefix (bitmask rows as lists), to compare two compiled grammars."""
    import structout

    out = []
    for prefix in prefixes:
        m = grammar.matcher()
        assert m.accept_bytes(prefix)
        bm = structout.allocate_token_bitmask(1, grammar.vocab_size)
        m.fill_next_token_bitmask(bm)
        out.append(bm[0].tolist())
    return out


PREFIXES = [b"", b"{", b'{"ab', b'{"abc":-1', b'{"x":12,']


def _forget_memory() -> None:
    import structout

    structout.configure_cache(128, clear=True)


def test_compiled_grammars_hit_memory_then_disk(tmp_path: Path) -> None:
    vocab = _vocab()
    cache = CompileCache(tmp_path)
    _forget_memory()
    first = cache.compiled_grammar(KBNF, vocab)
    assert cache.compiled_grammar(KBNF, vocab) == first  # the engine's memory cache
    flush_disk_writes()
    entries = list((tmp_path / "grammars").rglob("*.grammar"))
    assert len(entries) == 1
    _forget_memory()
    loaded = cache.compiled_grammar(KBNF, vocab)
    assert loaded is not first
    assert _masks(loaded, PREFIXES) == _masks(first, PREFIXES)
    s = cache.stats()
    assert (s.grammar_misses, s.grammar_hits, s.grammar_disk_hits) == (1, 1, 1)
    # Other limits are another entry, never the cached one.
    cache.compiled_grammar(KBNF, vocab, {"max_items_per_set": 1000})
    flush_disk_writes()
    assert len(list((tmp_path / "grammars").rglob("*.grammar"))) == 2
    assert cache.stats().grammar_misses == 2


def test_disk_false_keeps_compiled_grammars_in_memory(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, disk=False)
    _forget_memory()
    cache.compiled_grammar(KBNF, _vocab())
    assert not (tmp_path / "grammars").exists()


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign", "empty", "other_key"])
def test_a_damaged_entry_is_recompiled_and_replaced(tmp_path: Path, damage: str) -> None:
    import structout

    vocab = _vocab()
    cache = CompileCache(tmp_path)
    _forget_memory()
    reference = _masks(cache.compiled_grammar(KBNF, vocab), PREFIXES)
    flush_disk_writes()
    (entry,) = (tmp_path / "grammars").rglob("*.grammar")
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        entry.write_bytes(data[:-40] + bytes([data[-40] ^ 0x01]) + data[-39:])
    elif damage == "foreign":
        entry.write_bytes(b"\x89PNG\r\n" + data[8:])
    elif damage == "empty":
        entry.write_bytes(b"")
    else:  # another grammar's entry under this name (a hash collision, or a copied file)
        _forget_memory()
        cache.compiled_grammar(KBNF.replace("{1,6}", "{1,7}"), vocab)
        flush_disk_writes()
        (other,) = set((tmp_path / "grammars").rglob("*.grammar")) - {entry}
        entry.write_bytes(other.read_bytes())
    _forget_memory()
    before = structout.grammar_cache_stats()["disk_errors"]
    again = cache.compiled_grammar(KBNF, vocab)
    assert _masks(again, PREFIXES) == reference
    assert structout.grammar_cache_stats()["disk_errors"] == before + 1
    flush_disk_writes()
    assert entry.read_bytes() == data  # rewritten whole
    _forget_memory()  # (also resets the engine's counters)
    cache.compiled_grammar(KBNF, vocab)
    stats = structout.grammar_cache_stats()
    assert (stats["disk_hits"], stats["disk_errors"]) == (1, 0)  # and now it loads


_GRAMMAR_CHILD = textwrap.dedent(
    """
    import json, sys
    import structout
    from structout.cache import CompileCache
    pieces = ["{", "}", ",", ":", '"', "-", "ab", 'abc"', '":', "12", "3", "x", "0"]
    vocab = structout.Vocabulary.from_bytes(
        [p.encode() for p in pieces] + [None], eos_token_ids=[len(pieces)]
    )
    cache = CompileCache()
    g = cache.compiled_grammar(sys.argv[1], vocab)
    m = g.matcher()
    m.accept_bytes(b'{"ab')
    bm = structout.allocate_token_bitmask(1, g.vocab_size)
    m.fill_next_token_bitmask(bm)
    print(json.dumps({"stats": cache.stats().as_dict(), "mask": bm[0].tolist()}))
    """
)


def test_a_new_process_loads_compiled_grammars_from_disk(tmp_path: Path) -> None:
    env = {**os.environ, "STRUCTOUT_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}

    def child() -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, "-c", _GRAMMAR_CHILD, KBNF],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        )
        result: dict[str, Any] = json.loads(out.stdout)
        return result

    first, second = child(), child()
    assert (first["stats"]["grammar_misses"], first["stats"]["grammar_disk_hits"]) == (1, 0)
    assert (second["stats"]["grammar_misses"], second["stats"]["grammar_disk_hits"]) == (0, 1)
    assert second["mask"] == first["mask"] and any(first["mask"])


def test_clear_disk_removes_compiled_grammars(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path)
    _forget_memory()
    cache.compiled_grammar(KBNF, _vocab())
    flush_disk_writes()
    assert list((tmp_path / "grammars").rglob("*.grammar"))
    cache.clear(disk=True)
    assert not list((tmp_path / "grammars").rglob("*.grammar"))
    cache.compiled_grammar(KBNF, _vocab())
    assert cache.stats().grammar_misses == 2


def test_schemas_differing_in_key_order_keep_their_own_grammars(tmp_path: Path) -> None:
    # The translation follows the schema's key order (properties are emitted in it): a schema
    # whose properties are reordered must not get the grammar of the first order seen.
    from structout.schema import to_kbnf

    a = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    b = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}
    assert to_kbnf(a) != to_kbnf(b)
    for cache in (CompileCache(tmp_path), CompileCache(disk=False)):
        assert cache.kbnf_for_schema(a, to_kbnf)[0] == to_kbnf(a)
        assert cache.kbnf_for_schema(b, to_kbnf)[0] == to_kbnf(b)
    # A new cache object on the same directory (disk entries only).
    fresh = CompileCache(tmp_path)
    assert fresh.kbnf_for_schema(b, to_kbnf)[0] == to_kbnf(b)
    assert fresh.kbnf_for_schema(a, to_kbnf)[0] == to_kbnf(a)


def test_disk_writes_happen_after_the_call(tmp_path: Path) -> None:
    # Hold the writer: the lookup returns all the same, its entries are written once the writer
    # goes on.
    assert _engine.pause_disk_writes(30)
    try:
        cache = CompileCache(tmp_path)
        text, key = cache.kbnf_for_schema(SCHEMA, CountingTranslator())
        _forget_memory()
        grammar = cache.compiled_grammar(KBNF, _vocab())
        assert not list(tmp_path.rglob("*.kbnf")) and not list(tmp_path.rglob("*.grammar"))
        assert not flush_disk_writes(timeout=0.05)
    finally:
        _engine.resume_disk_writes()
    assert flush_disk_writes(timeout=30)
    assert len(list(tmp_path.rglob(f"{key}.kbnf"))) == 1
    assert len(list((tmp_path / "grammars").rglob("*.grammar"))) == 1
    assert cache.stats().disk_writes == 1
    # What was written is what a new process would load.
    fresh = CompileCache(tmp_path)
    _forget_memory()
    assert fresh.kbnf_for_schema(SCHEMA, CountingTranslator())[0] == text
    assert _masks(fresh.compiled_grammar(KBNF, _vocab()), PREFIXES) == _masks(grammar, PREFIXES)
    assert (fresh.stats().schema_disk_hits, fresh.stats().grammar_disk_hits) == (1, 1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_writes_its_own_entries(tmp_path: Path) -> None:
    cache, other = CompileCache(tmp_path), CompileCache(tmp_path)
    # The parent's writer held with one of its writes queued: the child neither hangs nor writes
    # the parent's entry, and writes its own; the parent's is written once its writer goes on.
    assert _engine.pause_disk_writes(30)
    try:
        _, parent_key = other.kbnf_for_schema({"const": "parent"}, CountingTranslator())
        pid = os.fork()
        if pid == 0:  # pragma: no cover -- the child reports through its exit status
            ok = False
            try:
                _, key = cache.kbnf_for_schema({"const": "child"}, CountingTranslator())
                ok = (
                    flush_disk_writes(timeout=30)
                    and len(list(tmp_path.rglob(f"{key}.kbnf"))) == 1
                    and not list(tmp_path.rglob(f"{parent_key}.kbnf"))
                )
            finally:
                os._exit(0 if ok else 1)
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if not done:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert done, "the child hung"
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert not list(tmp_path.rglob(f"{parent_key}.kbnf")), "the fork resumed the writer"
    finally:
        _engine.resume_disk_writes()
    assert flush_disk_writes(timeout=30)
    assert len(list(tmp_path.rglob(f"{parent_key}.kbnf"))) == 1
    assert len(list(tmp_path.rglob("*.kbnf"))) == 2  # the parent's entry and the child's


def test_a_write_does_not_bring_back_a_removed_directory(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    assert _engine.pause_disk_writes(30)
    try:
        CompileCache(root).kbnf_for_schema(SCHEMA, CountingTranslator())
        _forget_memory()
        CompileCache(root).compiled_grammar(KBNF, _vocab())
        shutil.rmtree(root)
    finally:
        _engine.resume_disk_writes()
    assert flush_disk_writes(timeout=30)
    assert not root.exists()


def test_the_engines_common_shape_skips_the_disk_kbnf_layer(tmp_path: Path) -> None:
    # A schema the engine translates (tens of microseconds, less than a disk lookup) is kept in
    # memory only; one the Python translator takes has its KBNF written. Both compiled grammars
    # go to disk, and a new cache on the directory gives the same texts.
    from structout.compiling import schema_kbnf
    from structout.schema import common_shape_kbnf, to_kbnf
    from structout.schema._options import TranslatorOptions

    common = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    patterned = {"type": "string", "pattern": "^(ab|cd)+-[0-9]{2}$"}  # (alternation: Python's)
    options = TranslatorOptions()
    assert common_shape_kbnf(common, options) is not None
    assert common_shape_kbnf(patterned, options) is None
    cache = CompileCache(tmp_path)
    texts = [schema_kbnf(s, {}, cache) for s in (common, patterned)]
    assert texts == [to_kbnf(common), to_kbnf(patterned)]
    flush_disk_writes()
    assert cache.stats().schema_misses == 2 and cache.stats().disk_writes == 1
    assert [
        schema_key(s, None) in {p.stem for p in tmp_path.rglob("*.kbnf")}
        for s in (common, patterned)
    ] == [False, True]
    fresh = CompileCache(tmp_path)
    assert [schema_kbnf(s, {}, fresh) for s in (common, patterned)] == texts
    assert (fresh.stats().schema_disk_hits, fresh.stats().schema_misses) == (1, 1)
