"""Git plumbing shared by the series tools: a reproducible git runner and ``git format-patch`` header parsing."""

from __future__ import annotations

import email.utils
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from viewreplay import ViewReplayError
from viewreplay.pin import Pin
from viewreplay.tree import public_version, tree_version

# Settings that change what format-patch writes; pinned so that the output depends on the commits only.
_REPRODUCIBLE_CONFIG = (
    "core.abbrev=7",
    "diff.algorithm=myers",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.renames=true",
    "format.signature=",
    "format.coverLetter=false",
    "format.numbered=auto",
    "i18n.commitEncoding=UTF-8",
    "commit.gpgSign=false",
)
_SUBJECT_PREFIX_RE = re.compile(r"^\[PATCH(?: \d+/\d+)?\] ")


@dataclass(frozen=True)
class Identity:
    """Author/committer of the commits the tools create (name, email, ISO date)."""

    name: str
    email: str
    date: str

    def env(self) -> dict[str, str]:
        return {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_AUTHOR_DATE": self.date,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
            "GIT_COMMITTER_DATE": self.date,
        }


def git(
    cwd: Path, *args: str, identity: Identity | None = None, check: bool = True, index: Path | None = None
) -> str:
    """Run git in ``cwd`` without global/system config (reproducible output) and return stdout.

    ``index`` is a scratch index file to use instead of the repository's. Refuses
    (ViewReplayError) on failure unless ``check`` is false.
    """
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(key, None)
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    if identity is not None:
        env.update(identity.env())
    config = [arg for item in _REPRODUCIBLE_CONFIG for arg in ("-c", item)]
    result = subprocess.run(["git", *config, *args], cwd=cwd, env=env, check=False, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise ViewReplayError(f"{cwd}: 'git {' '.join(args)}' failed: {(result.stderr or result.stdout).strip()}")
    return result.stdout


def git_show(cwd: Path, rev: str, rel: str) -> bytes:
    """The bytes of ``rel`` at ``rev`` (no text conversion)."""
    result = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=cwd, check=False, capture_output=True)
    if result.returncode != 0:
        raise ViewReplayError(f"{cwd}: 'git show {rev}:{rel}' failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def patch_header(patch_text: str) -> dict[str, str]:
    """The mail headers of a format-patch file (``From``, ``Date``, ``Subject``), continuation lines unfolded."""
    headers: dict[str, str] = {}
    last = None
    for line in patch_text.splitlines()[1:]:
        if not line:
            break
        if line[0] in " \t" and last:
            headers[last] += " " + line.strip()
            continue
        key, _, value = line.partition(":")
        last = key.strip()
        headers[last] = value.strip()
    return headers


def patch_subject(patch_text: str) -> str:
    """The commit subject of a format-patch file, without its ``[PATCH n/m]`` prefix."""
    return _SUBJECT_PREFIX_RE.sub("", patch_header(patch_text).get("Subject", ""))


def patch_identity(patch: Path) -> Identity:
    """The author and date of a format-patch file, as an identity for new commits."""
    headers = patch_header(patch.read_text(encoding="utf-8"))
    name, mail = email.utils.parseaddr(headers.get("From", ""))
    try:
        date = email.utils.parsedate_to_datetime(headers["Date"]).isoformat()
    except (KeyError, TypeError, ValueError):
        raise ViewReplayError(f"{patch}: no parsable From:/Date: header") from None
    if not name or not mail:
        raise ViewReplayError(f"{patch}: no parsable From: header")
    return Identity(name=name, email=mail, date=date)


def numbering_style(patches: list[Path]) -> str:
    """``numbered`` if the patches carry ``[PATCH n/m]``, ``none`` if plain ``[PATCH]`` (default: numbered)."""
    styles = set()
    for patch in patches:
        subject = patch_header(patch.read_text(encoding="utf-8")).get("Subject", "")
        if re.match(r"^\[PATCH \d+/\d+\] ", subject):
            styles.add("numbered")
        elif subject.startswith("[PATCH] "):
            styles.add("none")
    return styles.pop() if len(styles) == 1 else "numbered"


def check_upstream_checkout(root: Path, pin: Pin) -> None:
    """Refuse anything but a git work tree whose version.txt matches the pin and which has the pinned tag."""
    if not root.is_dir():
        raise ViewReplayError(f"{root}: no such directory")
    if not (root / "version.txt").is_file():
        raise ViewReplayError(f"{root}: not a PyTorch checkout (no version.txt)")
    version = tree_version(root)
    if public_version(version) != pin.version:
        raise ViewReplayError(f"{root / 'version.txt'}: torch version {version} does not match the pinned {pin.version}")
    if git(root, "rev-parse", "--is-inside-work-tree", check=False).strip() != "true":
        raise ViewReplayError(f"{root}: not a git work tree")
    if not git(root, "rev-parse", "-q", "--verify", f"refs/tags/{pin.upstream_tag}^{{commit}}", check=False).strip():
        raise ViewReplayError(f"{root}: has no tag {pin.upstream_tag}")
