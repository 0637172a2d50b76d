"""An OCI image archive (``oci-archive``, as ``hack/build-images.sh`` writes it): its config,
and its root filesystem unpacked into a directory by umoci (Debian's package), owners, modes,
links and whiteouts as a container runtime would apply them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

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
    def manifest_digest(self) -> str:
        """The digest of the image's manifest: what a registry names the pushed image by."""
        descriptor, _, _ = self._read()
        return str(descriptor["digest"])

    @property
    def blob_digests(self) -> list[str]:
        """The digests of the image's config and its layers, in the manifest's order."""
        _, manifest, _ = self._read()
        return [manifest["config"]["digest"], *(layer["digest"] for layer in manifest["layers"])]

    @property
    def unpacked_bytes(self) -> int:
        """The size of the image's layers uncompressed (what ``hack/build-images.sh`` reports
        as "MB unpacked"): the tar streams a runtime applies."""
        _, manifest, _ = self._read()
        total = 0
        with tarfile.open(self.path) as archive:
            for layer in manifest["layers"]:
                stream, inflate = _blob(archive, layer["digest"]), zlib.decompressobj(31)
                while chunk := stream.read(1 << 20):
                    total += len(inflate.decompress(chunk))
        return total

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
        """Unpack the image's root filesystem into ``root`` (must not exist) with umoci, which
        applies the layers and their whiteouts and keeps owners and modes; return it."""
        layout = root.with_name(root.name + ".layout")
        layout.mkdir(parents=True)
        try:
            subprocess.run(["tar", "-xf", str(self.path), "-C", str(layout)], check=True)
            # umoci names the image by a tag of the layout: give the one image a plain one.
            index_path = layout / "index.json"
            index = json.loads(index_path.read_text())
            (descriptor,) = index["manifests"]
            descriptor.setdefault("annotations", {})[REF_NAME] = "image"
            index_path.write_text(json.dumps(index))
            result = subprocess.run(
                ["umoci", "raw", "unpack", "--image", f"{layout}:image", str(root)],
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise RuntimeError(f"umoci raw unpack of {self.path} failed:\n{result.stderr}")
        finally:
            shutil.rmtree(layout, ignore_errors=True)
        return root


def _member(archive: tarfile.TarFile, name: str) -> IO[bytes]:
    stream = archive.extractfile(name)
    if stream is None:
        raise ValueError(f"{archive.name!s}: {name} is missing")
    return stream


def _blob(archive: tarfile.TarFile, digest: str) -> IO[bytes]:
    return _member(archive, "blobs/" + digest.replace(":", "/"))
