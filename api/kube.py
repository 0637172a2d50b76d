"""Kubernetes' own rules for the values a DistGNNJob passes on to its children.

The API server checks a child (a Pod template, a claim, a Service) when the operator creates
it, long after ``kubectl apply`` accepted the job. To refuse a bad job at ``kubectl apply``
instead, every value that ends up in a child is held here to the rule Kubernetes applies to
it in that child (``k8s.io/apimachinery/pkg/util/validation`` and ``pkg/apis/core/validation``):

- names: DNS-1123 labels and subdomains, label keys (qualified names) and label values;
- quantities: the syntax of ``resource.Quantity``, and their sign;
- images: no leading or trailing whitespace.

Each rule exists twice: as a schema pattern or a CEL rule for the CRD, and as a Python check
for ``distgnn validate``; both carry the same message.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from distgnn_api.cel import CelRule, cel

# --------------------------------------------------------------------------- names

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
MAX_MAP_ENTRIES = 64
"""Entries of a label or annotation map (it bounds the cost of the CEL rules on its keys)."""

DNS1123_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
# A qualified name (label or annotation key): an optional DNS-1123 subdomain prefix of at most
# 253 characters and '/', then a name of at most 63 characters. The prefix length is a CEL check.
QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE_RE = re.compile(LABEL_VALUE_PATTERN)
_QUALIFIED_NAME_RE = re.compile(QUALIFIED_NAME_PATTERN)
_DNS1123_LABEL_RE = re.compile(DNS1123_LABEL_PATTERN)
_DNS1123_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN_PATTERN)

# ASCII whitespace, as Go's regexp (the API server's pattern engine) reads \s, plus \v.
_WS = r" \t\n\v\f\r"
IMAGE_PATTERN = rf"^[^{_WS}](.*[^{_WS}])?$"
_IMAGE_RE = re.compile(IMAGE_PATTERN)


def is_qualified_name(value: str) -> bool:
    """A valid label or annotation key."""
    prefix, slash, _ = value.rpartition("/")
    return bool(_QUALIFIED_NAME_RE.fullmatch(value)) and (
        not slash or len(prefix) <= DNS1123_SUBDOMAIN_MAX
    )


def is_label_value(value: str) -> bool:
    """A valid label value (may be empty)."""
    return len(value) <= LABEL_VALUE_MAX and bool(_LABEL_VALUE_RE.fullmatch(value))


def is_dns1123_label(value: str) -> bool:
    return len(value) <= DNS1123_LABEL_MAX and bool(_DNS1123_LABEL_RE.fullmatch(value))


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= DNS1123_SUBDOMAIN_MAX and bool(_DNS1123_SUBDOMAIN_RE.fullmatch(value))


QUALIFIED_NAME_CEL = (
    f"k.matches(r'{QUALIFIED_NAME_PATTERN}') && "
    f"(!k.contains('/') || k.lastIndexOf('/') <= {DNS1123_SUBDOMAIN_MAX})"
)
KEY_MESSAGE = (
    "every key must be a qualified name: an optional DNS subdomain prefix and '/', then at most "
    "63 characters of letters, digits, '-', '_' or '.' that start and end with a letter or "
    "digit (e.g. 'example.com/team')"
)
KEYS_RULE: CelRule = cel(
    f"self.all(k, {QUALIFIED_NAME_CEL})",
    KEY_MESSAGE,
    None,
    lambda m: all(is_qualified_name(k) for k in m),
)


def _check(ok: bool, value: object, what: str) -> None:
    if not ok:
        raise ValueError(f"{value!r} is not {what}")


def _check_label_value(value: str) -> str:
    _check(
        is_label_value(value),
        value,
        "a label value; use at most 63 letters, digits, '-', '_' or '.', starting and ending "
        "with a letter or digit",
    )
    return value


def _check_subdomain(value: str) -> str:
    _check(
        is_dns1123_subdomain(value),
        value,
        "a DNS-1123 subdomain name; use lower-case letters, digits, '-' and '.', starting and "
        "ending with a letter or digit (e.g. 'fast-ssd')",
    )
    return value


def _check_dns_label(value: str) -> str:
    _check(
        is_dns1123_label(value),
        value,
        "a DNS-1123 label; use at most 63 lower-case letters, digits and '-', starting and "
        "ending with a letter or digit",
    )
    return value


def _check_image(value: str) -> str:
    _check(bool(_IMAGE_RE.fullmatch(value)), value, "an image reference without surrounding spaces")
    return value


def _check_qualified_name(value: str) -> str:
    if not is_qualified_name(value):
        raise ValueError(f"{value!r} is not a valid key; {KEY_MESSAGE}")
    return value


def _check_keys(value: dict[str, Any]) -> dict[str, Any]:
    bad = sorted(k for k in value if not is_qualified_name(k))
    if bad:
        raise ValueError(f"{bad[0]!r} is not a valid key; {KEY_MESSAGE}")
    return value


LabelValue = Annotated[
    str,
    AfterValidator(_check_label_value),
    Field(max_length=LABEL_VALUE_MAX, json_schema_extra={"pattern": LABEL_VALUE_PATTERN}),
]
Dns1123Subdomain = Annotated[
    str,
    AfterValidator(_check_subdomain),
    Field(
        min_length=1,
        max_length=DNS1123_SUBDOMAIN_MAX,
        json_schema_extra={"pattern": DNS1123_SUBDOMAIN_PATTERN},
    ),
]
Dns1123Label = Annotated[
    str,
    AfterValidator(_check_dns_label),
    Field(
        min_length=1,
        max_length=DNS1123_LABEL_MAX,
        json_schema_extra={"pattern": DNS1123_LABEL_PATTERN},
    ),
]
QualifiedName = Annotated[
    str,
    AfterValidator(_check_qualified_name),
    Field(
        min_length=1,
        max_length=DNS1123_SUBDOMAIN_MAX + 1 + 63,
        json_schema_extra={
            "pattern": QUALIFIED_NAME_PATTERN,
            "x-kubernetes-validations": [
                {
                    "rule": f"!self.contains('/') || self.lastIndexOf('/') <= {DNS1123_SUBDOMAIN_MAX}",
                    "message": KEY_MESSAGE,
                }
            ],
        },
    ),
]
Image = Annotated[
    str,
    AfterValidator(_check_image),
    Field(min_length=1, max_length=1024, json_schema_extra={"pattern": IMAGE_PATTERN}),
]
_KEYS_EXTRA: dict[str, Any] = {
    "maxProperties": MAX_MAP_ENTRIES,
    "x-kubernetes-validations": [{"rule": KEYS_RULE.rule, "message": KEYS_RULE.message}],
}
Labels = Annotated[
    dict[str, LabelValue],
    AfterValidator(_check_keys),
    Field(max_length=MAX_MAP_ENTRIES, json_schema_extra=_KEYS_EXTRA),
]
"""A label map: qualified-name keys, label values."""
# Kubernetes caps all annotations of an object at 256 KiB: 64 keys of at most 317 bytes and
# values of at most 900 characters (3600 bytes in UTF-8) stay below it.
ANNOTATION_VALUE_MAX = 900
Annotations = Annotated[
    dict[str, Annotated[str, Field(max_length=ANNOTATION_VALUE_MAX)]],
    AfterValidator(_check_keys),
    Field(max_length=MAX_MAP_ENTRIES, json_schema_extra=_KEYS_EXTRA),
]
"""An annotation map: qualified-name keys, any values."""

# --------------------------------------------------------------------------- quantities

# Kubernetes resource.Quantity, as the API server's own OpenAPI pattern writes it. CEL's
# isQuantity() adds what the pattern cannot say (e.g. an exponent must be an integer).
QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
_QUANTITY_RE = re.compile(
    r"^(?P<num>[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
QUANTITY_MAX_LENGTH = 64
QUANTITY_EXAMPLES = "write e.g. '500m', '2', '8Gi' or '1.5G'"


def parse_quantity(value: int | str) -> Decimal | None:
    """The value of a Kubernetes quantity, or None when Kubernetes would not parse it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    match = _QUANTITY_RE.fullmatch(value)
    if match is None:
        return None
    try:
        number = Decimal(match["num"])
    except InvalidOperation:
        return None
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * (Decimal(1024) ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    exponent = int(suffix[1:])
    if abs(exponent) > 100:
        return None
    return number.scaleb(exponent)


def _quantity_rule(positive: bool) -> str:
    value = "quantity(string(self))"
    test = (
        f"{value}.isGreaterThan(quantity('0'))"
        if positive
        else f"!{value}.isLessThan(quantity('0'))"
    )
    return f"isQuantity(string(self)) && {test}"


def _quantity(minimum: int, what: str) -> Any:
    """A quantity type whose sign is at least ``minimum`` (0: not negative, 1: positive)."""
    message = f"must be a {what} Kubernetes quantity; {QUANTITY_EXAMPLES}"

    def check(value: int | str) -> int | str:
        parsed = parse_quantity(value)
        if isinstance(value, str) and len(value) > QUANTITY_MAX_LENGTH:
            raise ValueError(f"{value!r} is longer than {QUANTITY_MAX_LENGTH} characters")
        if parsed is None or (parsed < 0 if minimum == 0 else parsed <= 0):
            raise ValueError(f"{value!r} is not a {what} Kubernetes quantity; {QUANTITY_EXAMPLES}")
        return value

    return Annotated[
        int | str,
        AfterValidator(check),
        Field(
            json_schema_extra={
                "x-kubernetes-int-or-string": True,
                "pattern": QUANTITY_PATTERN,
                "maxLength": QUANTITY_MAX_LENGTH,
                "x-kubernetes-validations": [
                    {"rule": _quantity_rule(minimum > 0), "message": message}
                ],
            }
        ),
    ]


NonNegativeQuantity = _quantity(0, "non-negative")
PositiveQuantity = _quantity(1, "positive")

AUTO = "auto"
_AUTO_OR_QUANTITY_MESSAGE = (
    f"must be 'auto' or a non-negative Kubernetes quantity; {QUANTITY_EXAMPLES}"
)


def _check_auto_or_quantity(value: int | str) -> int | str:
    if value == AUTO:
        return value
    parsed = parse_quantity(value)
    if isinstance(value, str) and len(value) > QUANTITY_MAX_LENGTH:
        raise ValueError(f"{value!r} is longer than {QUANTITY_MAX_LENGTH} characters")
    if parsed is None or parsed < 0:
        raise ValueError(f"{value!r} {_AUTO_OR_QUANTITY_MESSAGE}")
    return value


AutoOrQuantity = Annotated[
    int | str,
    AfterValidator(_check_auto_or_quantity),
    Field(
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "pattern": f"^auto$|{QUANTITY_PATTERN}",
            "maxLength": QUANTITY_MAX_LENGTH,
            "x-kubernetes-validations": [
                {
                    "rule": f"string(self) == '{AUTO}' || ({_quantity_rule(False)})",
                    "message": _AUTO_OR_QUANTITY_MESSAGE,
                }
            ],
        }
    ),
]
"""'auto', or a non-negative quantity (bytes)."""
