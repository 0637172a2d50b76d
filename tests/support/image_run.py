"""Run a command from an image's unpacked root filesystem, the way a restricted pod runs it.

The process gets a private mount namespace (``unshare --mount``) and this machine's network
namespace, so ``127.0.0.1`` reaches the test control plane and the other processes. Inside it:

- the root filesystem is mounted read-only (``readOnlyRootFilesystem``);
- ``/tmp`` is a fresh tmpfs and ``/proc``, ``/dev`` are the host's;
- the given host paths are bind-mounted (read-only or not), like a pod's volumes;
- the image's shells (dash, bash) are masked by ``/dev/null``, so an entrypoint that needs a
  shell fails;
- the command runs as uid/gid 10001 (``unshare --root --setuid --setgid``), no supplementary
  groups, with HOME from the image's passwd, the image config's ``Env`` plus the given variables and nothing of this
  process's environment.

The host's util-linux (``unshare``, ``mount``) does the setup: nothing of it runs inside the
image.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IMAGE_UID = 10001
SHELLS = ("usr/bin/dash", "usr/bin/bash", "bin/dash", "bin/bash")
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Bind:
    """A host path mounted at ``target`` inside the root (the same path by default)."""

    source: Path
    target: str = ""
    read_only: bool = False

    @property
    def inside(self) -> str:
        return self.target or str(self.source)


@dataclass(frozen=True)
class ImageRoot:
    """An unpacked image: its root directory and its config (``User``, ``Env``, ...)."""

    root: Path
    config: Mapping[str, Any]
    binds: Sequence[Bind] = field(default_factory=tuple)

    @property
    def image_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for item in self.config.get("Env") or []:
            name, _, value = str(item).partition("=")
            env[name] = value
        return env

    @property
    def entrypoint(self) -> list[str]:
        """The command the image runs: Entrypoint followed by Cmd (exec form)."""
        return [*(self.config.get("Entrypoint") or []), *(self.config.get("Cmd") or [])]

    def home(self, uid: int) -> str:
        """The user's home from the image's /etc/passwd, as container runtimes set HOME."""
        passwd = self.root / "etc" / "passwd"
        for line in passwd.read_text().splitlines() if passwd.exists() else []:
            fields = line.split(":")
            if len(fields) > 5 and fields[2] == str(uid):
                return fields[5]
        return "/"

    def with_binds(self, *binds: Bind) -> ImageRoot:
        return ImageRoot(self.root, self.config, (*self.binds, *binds))

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        uid: int = IMAGE_UID,
        gid: int = IMAGE_UID,
    ) -> list[str]:
        """The host command that runs ``argv`` inside the root as ``uid:gid``."""
        root = shlex.quote(str(self.root))
        lines = [
            "set -e",
            f"R={root}",
            'mount --bind "$R" "$R"',
            'mount -t proc proc "$R/proc"',
            'mount --rbind /dev "$R/dev"',
            'mount -t tmpfs -o mode=1777,size=2g tmpfs "$R/tmp"',
        ]
        for bind in self.binds:
            if any(p.is_symlink() for p in (self.root / bind.inside.lstrip("/")).parents):
                raise ValueError(f"{bind.inside}: a mount point under a symlink of the image")
            target = '"$R"' + shlex.quote(bind.inside)
            # Mount points in the unpacked tree (or the tmpfs), made before the root turns
            # read-only.
            if bind.source.is_dir():
                lines.append(f"mkdir -p {target}")
            else:
                lines.append(f'mkdir -p "$(dirname {target})"; touch {target}')
            lines.append(f"mount --bind {shlex.quote(str(bind.source))} {target}")
            if bind.read_only:
                lines.append(f"mount -o remount,bind,ro {target}")
        for shell in SHELLS:
            path = self.root / shell
            if path.is_file() and not path.is_symlink():
                lines.append(f"mount --bind /dev/null {shlex.quote(str(path))}")
        lines.append('mount -o remount,bind,ro "$R"')
        workdir = cwd or str(self.config.get("WorkingDir") or "/")
        lines.append(
            f'exec unshare --root="$R" --wd={shlex.quote(workdir)} '
            f'--setgid={gid} --setuid={uid} -- "$@"'
        )
        script = "\n".join(lines)
        return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script,
                "image-run", *argv]  # fmt: skip

    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The process's whole environment: the image's Env, then ``extra``. The host tools
        that set up the namespace find themselves on the image's PATH or the standard one."""
        env = {"HOME": self.home(IMAGE_UID), **self.image_env}
        env.update(extra or {})
        env.setdefault("PATH", HOST_PATH)
        return env
