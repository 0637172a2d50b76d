"""An OCI image archive (``oci-archive``, as ``hack/build-images.sh`` writes it): its config,
and its root filesystem unpacked into a directory, layer by layer with the OCI whiteouts.

Layers are streamed out of the archive (no copy of the blobs on disk), and owners, modes and
links are kept: the directory is what a container runtime would mount as the root.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
REF_NAME = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class OciArchive:
    """One image of an oci-archive file."""

    path: Path

    def _read(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        with tarfile.open(self.path) as archive:
            index = json.loads(_member(archive, "index.json").read())
            (descriptor,) = index["manifests"]
            manifest = json.loads(_blob(archive, descriptor["digest"]).read())
            config = json.loads(_blob(archive, manifest["config"]["digest"]).read())
        return descriptor, manifest, config

    @property
    def reference(self) -> str:
        """The reference the image was written under (the index's ref.name annotation)."""
        descriptor, _, _ = self._read()
        return str(descriptor.get("annotations", {}).get(REF_NAME, ""))

    @property
    def config(self) -> dict[str, Any]:
        """The image config's ``config`` object: User, Env, Entrypoint, Cmd, WorkingDir."""
        return dict(self._read()[2].get("config", {}))

    @property
    def history(self) -> list[dict[str, Any]]:
        return list(self._read()[2].get("history", []))

    @property
    def layer_count(self) -> int:
        return len(self._read()[1]["layers"])

    def unpack(self, root: Path) -> Path:
        """Unpack every layer into ``root`` (created; must not exist) and return it."""
        _, manifest, _ = self._read()
        root.mkdir(parents=True)
        with tarfile.open(self.path) as archive:
            for layer in manifest["layers"]:
                if not layer["mediaType"].endswith(("tar+gzip", "tar")):
                    raise ValueError(
                        f"{self.path}: layer type {layer['mediaType']} is not supported"
                    )
                blob = _blob(archive, layer["digest"])
                gzipped = layer["mediaType"].endswith("gzip")
                with tarfile.open(fileobj=blob, mode="r|gz" if gzipped else "r|") as tar:
                    _apply_layer(tar, root)
        return root


def _member(archive: tarfile.TarFile, name: str) -> IO[bytes]:
    stream = archive.extractfile(name)
    if stream is None:
        raise ValueError(f"{archive.name!s}: {name} is missing")
    return stream


def _blob(archive: tarfile.TarFile, digest: str) -> IO[bytes]:
    return _member(archive, "blobs/" + digest.replace(":", "/"))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _apply_layer(tar: tarfile.TarFile, root: Path) -> None:
    """Extract one layer over ``root``: a ``.wh.NAME`` entry deletes NAME of the layers below,
    ``.wh..wh..opq`` empties its directory of what the layers below put there."""
    added: set[PurePosixPath] = set()
    for member in tar:
        rel = PurePosixPath(os.path.normpath(member.name.lstrip("/")))
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"layer entry {member.name!r} leaves the root")
        target = root / rel
        if rel.name == OPAQUE:
            for child in list(target.parent.iterdir()) if target.parent.is_dir() else []:
                if rel.parent / child.name not in added:
                    _remove(child)
            continue
        if rel.name.startswith(WHITEOUT):
            _remove(target.parent / rel.name[len(WHITEOUT) :])
            continue
        if not (member.isdir() and target.is_dir() and not target.is_symlink()):
            _remove(target)
        tar.extract(member, root, numeric_owner=True, filter="fully_trusted")
        added.add(rel)
