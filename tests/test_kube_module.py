"""The Go module in ``kube/`` that builds the real control plane: its pins agree with the
release's own module file, and the tests that need its binaries say why they cannot run."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import kube_control_plane

KUBE = Path(__file__).resolve().parent.parent / "kube"


def _go_mod() -> str:
    return (KUBE / "go.mod").read_text()


def _pinned_release() -> str:
    found = re.findall(r"^\s*(?:require\s+)?k8s\.io/kubernetes (v\d+\.\d+\.\d+)\s*$", _go_mod(), re.M)
    assert len(found) == 1, found
    return found[0]


def _replaced() -> dict[str, str]:
    return dict(re.findall(r"^\s*(k8s\.io/[a-z0-9-]+) => \1 (v\S+)\s*$", _go_mod(), re.M))


def test_every_staging_module_is_replaced_at_the_matching_version():
    release = _pinned_release()
    staging = f"v0.{release[3:]}"  # v1.36.3 -> v0.36.3
    replaced = _replaced()
    assert replaced and set(replaced.values()) == {staging}
    cache = Path(os.environ.get("GOMODCACHE", Path.home() / "go" / "pkg" / "mod"))
    release_mod = cache / "cache" / "download" / "k8s.io" / "kubernetes" / "@v" / f"{release}.mod"
    if not release_mod.exists():
        pytest.skip(f"the release's module file is not in Go's module cache ({release_mod}): kube/build.sh fetches it")
    # the root module requires each staging module at v0.0.0 and replaces it with its own tree
    required = set(re.findall(r"^\s*(k8s\.io/[a-z0-9-]+) v0\.0\.0\s*$", release_mod.read_text(), re.M))
    assert required == set(replaced)


def test_the_build_script_reads_the_pinned_release(tmp_path):
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain")
    script = (KUBE / "build.sh").read_text()
    line = next(x for x in script.splitlines() if x.startswith("release="))
    shown = subprocess.run(["bash", "-c", f"cd {KUBE} && {line} && echo $release"], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert shown == _pinned_release()


def test_without_binaries_the_reason_names_the_build(tmp_path, monkeypatch):
    monkeypatch.setattr(kube_control_plane, "BIN", tmp_path)
    reason = kube_control_plane.missing()
    assert reason is not None and "kube-apiserver" in reason and "kube-oracle" in reason
    assert ("kube/build.sh" in reason) if shutil.which("go") else ("no Go toolchain" in reason)
    for name in kube_control_plane.BINARIES:
        (tmp_path / name).write_text("")
    assert kube_control_plane.missing() is None
