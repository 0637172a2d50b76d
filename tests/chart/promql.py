"""Finds the metric names that a PromQL expression (as written in a Grafana panel) reads.

Not a full PromQL parser: it removes what cannot be a metric name (string literals, label
matchers, grouping clauses, range and subquery brackets, Grafana variables, numbers) and keeps
the identifiers that are not functions, keywords or aggregation operators.
"""

from __future__ import annotations

import re

# Words of PromQL that look like identifiers but are not metric names.
KEYWORDS = frozenset(
    {
        "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
        "and", "or", "unless", "atan2", "inf", "nan",
        "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
        "bottomk", "topk", "quantile", "limitk", "limit_ratio",
    }
)  # fmt: skip

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VAR = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_IDENT = re.compile(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")
_LABEL_VALUES = re.compile(r"^\s*label_values\s*\((?P<args>.*)\)\s*$", re.DOTALL)
_GRAFANA_FUNCS = re.compile(r"^\s*(query_result|metrics)\s*\((?P<args>.*)\)\s*$", re.DOTALL)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    text = _STRING.sub('""', expr)
    text = _GRAFANA_VAR.sub("1", text)
    text = _MATCHERS.sub("", text)
    text = _BRACKETS.sub("", text)
    text = _GROUPING.sub("", text)
    names: set[str] = set()
    for match in _IDENT.finditer(text):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in KEYWORDS:
            continue
        if re.fullmatch(r"\d+[smhdwy]?", word) or re.fullmatch(r"[eE]\d*", word):
            continue
        names.add(word)
    return names


def variable_query_metrics(query: str) -> set[str]:
    """The metric names of a Grafana Prometheus variable query such as label_values(m{...}, l)."""
    match = _LABEL_VALUES.match(query)
    if match:
        args = match["args"]
        # label_values(label) reads no metric; label_values(selector, label) reads the selector.
        depth, split = 0, None
        for i, ch in enumerate(args):
            depth += ch in "({["
            depth -= ch in ")}]"
            if ch == "," and depth == 0:
                split = i
        return metric_names(args[:split]) if split is not None else set()
    match = _GRAFANA_FUNCS.match(query)
    if match:
        return metric_names(match["args"])
    return metric_names(query)


_GROUPING_LABELS = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\((?P<labels>[^()]*)\)", re.IGNORECASE
)
_MATCHER_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def label_names(expr: str) -> set[str]:
    """The label names an expression matches on or groups by."""
    text = _STRING.sub('""', expr)
    names: set[str] = set()
    for match in _GROUPING_LABELS.finditer(text):
        names.update(x.strip() for x in match["labels"].split(",") if x.strip())
    for block in _MATCHERS.findall(text):
        names.update(_MATCHER_LABEL.findall(block))
    return names
