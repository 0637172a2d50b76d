"""Edge-type spelling shared by the spec, the store and the workload."""

from __future__ import annotations

import pytest

from distgnn_api.edge_types import (
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
