"""Edge-type spelling shared by the spec, the store and the workload."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distgnn_api.edge_types import (
    MAX_NAME_LENGTH,
    STRICT_KEY_PATTERN,
    STRICT_NAME_PATTERN,
    edge_type_key,
    is_type_name,
    parse_edge_type_key,
    reverse_edge_type,
)


def test_key_round_trip() -> None:
    et = ("author", "affiliated_with", "institution")
    assert edge_type_key(et) == "author__affiliated_with__institution"
    assert parse_edge_type_key(edge_type_key(et)) == et


@pytest.mark.parametrize(
    "key", ["author__writes", "a__b__c__d", "author___writes__paper", "1a__b__c", "a__b_ __c", ""]
)
def test_bad_keys_are_refused_with_the_form(key: str) -> None:
    with pytest.raises(ValueError, match="src__rel__dst"):
        parse_edge_type_key(key)


def test_names_never_hold_the_separator() -> None:
    assert is_type_name("field_of_study")
    assert not is_type_name("field__of")
    assert not is_type_name("paper_")
    with pytest.raises(ValueError, match="not a type name"):
        edge_type_key(("paper", "has__topic", "field_of_study"))


def test_reverse_follows_to_undirected() -> None:
    assert reverse_edge_type(("author", "writes", "paper")) == ("paper", "rev_writes", "author")
    assert reverse_edge_type(("paper", "rev_writes", "author")) == ("author", "writes", "paper")
    assert reverse_edge_type(("paper", "cites", "paper")) == ("paper", "cites", "paper")


@pytest.mark.parametrize("name", ["paper\n", "paper ", "\npaper", "pa per"])
def test_whitespace_never_makes_a_name(name: str) -> None:
    assert not is_type_name(name)
    with pytest.raises(ValueError, match="src__rel__dst"):
        parse_edge_type_key(f"author__writes__{name}")


@settings(max_examples=400, derandomize=True)
@given(st.text(alphabet="aZ0_\n -", min_size=0, max_size=10))
def test_the_re2_patterns_say_what_is_type_name_says(name: str) -> None:
    """The CRD's CEL rules use the RE2 patterns; they must agree with the Python check."""
    strict = re.fullmatch(STRICT_NAME_PATTERN, name) is not None and len(name) <= MAX_NAME_LENGTH
    assert strict == is_type_name(name)
    key = f"author__{name}__paper"
    assert (re.fullmatch(STRICT_KEY_PATTERN, key) is not None) == is_type_name(name)


def test_long_names_are_refused_at_the_limit() -> None:
    assert is_type_name("a" * MAX_NAME_LENGTH)
    assert not is_type_name("a" * (MAX_NAME_LENGTH + 1))
