"""No tracked file names a package registry's host.

Builds take their package indexes from the machine's own pip and apt configuration, or from
an argument without a default, so that a user behind a mirror can build. This test finds every
host name in the tracked files and fails on any that is a public package registry (known by
digest, so that this file names none either) or an index this machine is configured with.
"""

from __future__ import annotations

import configparser
import glob
import hashlib
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]

# sha256 (first 16 hex digits) of the hosts of the public package registries: the Python
# package index and its file host, Debian's and Ubuntu's archives, the Go module proxy and
# checksum database, npm, Maven Central, Rust's crate registry, conda and PyTorch's wheel index.
REGISTRY_HOST_DIGESTS = frozenset(
    {
        "a4aa2ac280bb8d1a",
        "c899567ee9068517",
        "d6d7019ca9fcbf07",
        "9495278a74715c7e",
        "e680c440a2e92079",
        "1ba4e37997a2e986",
        "c2b35955576ffa71",
        "26b795f2a123f2a2",
        "2e97613f5a81eaa4",
        "00a7dc5a0cc38858",
        "9da5f32d96412512",
        "048e76c14ef34200",
        "be57af6b78a7faca",
        "0dc11026ac75c015",
        "70bb4000cd2fab03",
        "03e390c8d8a6f2cf",
        "43c04ed1dabe979b",
        "317d2d52829b7812",
        "789e46d79514e280",
        "3d01f3609be82d98",
        "eb7e11c7f9ecbcf4",
        "a0f007d863a0ed19",
        "e514b0d3b0562f54",
        "4db460c55b85212e",
        "15bdb44dafa6843b",
    }
)

# A DNS name of two or more labels whose last label is alphabetic: the candidates.
HOST = re.compile(
    r"(?<![\w.-])((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,})(?![a-z0-9-])", re.I
)


def _digest(host: str) -> str:
    return hashlib.sha256(host.lower().encode()).hexdigest()[:16]


def _suffixes(host: str) -> Iterable[str]:
    labels = host.lower().split(".")
    return (".".join(labels[i:]) for i in range(len(labels) - 1))


def _configured_hosts() -> set[str]:
    """The hosts of the indexes this machine's pip, apt and Go are configured with."""
    urls: list[str] = []
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "GOPROXY"):
        urls += re.split(r"[\s,|]+", os.environ.get(name, ""))
    for path in ("/etc/pip.conf", os.path.expanduser("~/.config/pip/pip.conf")):
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            continue
        for section in parser.sections():
            for key in ("index-url", "extra-index-url"):
                urls += parser.get(section, key, fallback="").split()
    for path in ["/etc/apt/sources.list", *glob.glob("/etc/apt/sources.list.d/*")]:
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError):
            continue
        urls += re.findall(r"\b[a-z+]+://[^\s\]]+", text)
    return {host for url in urls if (host := urlsplit(url).hostname)}


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    return [ROOT / name.decode() for name in names if name]


def registry_hosts_in(text: str, configured: set[str]) -> set[str]:
    """The registry hosts that ``text`` names."""
    found = set()
    for match in HOST.finditer(text):
        host = match.group(1).lower()
        if host in configured or any(_digest(s) in REGISTRY_HOST_DIGESTS for s in _suffixes(host)):
            found.add(host)
    return found


def test_the_scan_finds_a_registry_host() -> None:
    """The check itself works: a host built here at run time is found, a neighbour is not."""
    host = ".".join(["pypi", "org"])
    assert registry_hosts_in(f"index-url = https://{host}/simple", set()) == {host}
    assert registry_hosts_in(f"see https://docs.{host}x/", set()) == set()
    assert registry_hosts_in("https://mirror.example.com/simple", {"mirror.example.com"}) == {
        "mirror.example.com"
    }


def test_no_tracked_file_names_a_package_registry_host() -> None:
    configured = _configured_hosts()
    offenders = {}
    for path in _tracked_text_files():
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        if hosts := registry_hosts_in(text, configured):
            offenders[str(path.relative_to(ROOT))] = sorted(hosts)
    assert not offenders, (
        "package registry hosts named in the repository (take the index from the machine's "
        f"pip/apt configuration or a required argument instead): {offenders}"
    )
