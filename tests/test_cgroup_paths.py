"""Where the runner finds its cgroup and its memory limit, on fake cgroup trees (no cgroup needed)."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spoolparse._os.cgroup import CGROUP1, CGROUP2, ENFORCEMENTS, NONE, WATCHDOG, enforcement_of
from spoolparse._os.cgroupfs import enclosing_limit, own_cgroup, v2_dir

from .runner_support import ROOT

MiB = 1 << 20


def _cg(d: Path, **files: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name.replace("_", ".", 1)).write_text(text + "\n")
    return d


def _v2_tree(tmp_path: Path) -> Path:
    root = _cg(tmp_path / "cg", cgroup_controllers="cpu memory pids")
    _cg(root / "slice", cgroup_controllers="memory pids", memory_max=str(300 * MiB), memory_current="1")
    _cg(root / "slice" / "svc", cgroup_controllers="memory pids", memory_max="max", memory_current="1")
    _cg(root / "slice" / "svc" / "spoolparse-leaf", cgroup_controllers="memory pids", memory_max=str(900 * MiB),
        memory_current="1")
    return root


def test_enclosing_limit_is_the_tightest_memory_max_on_the_way_up(tmp_path: Path) -> None:
    root = _v2_tree(tmp_path)
    leaf = root / "slice" / "svc" / "spoolparse-leaf"
    assert enclosing_limit("v2", str(leaf)) == (300 * MiB, str(root / "slice"))
    assert enclosing_limit("v2", str(root / "slice" / "svc")) == (300 * MiB, str(root / "slice"))
    (root / "slice" / "memory.max").write_text("max\n")
    assert enclosing_limit("v2", str(leaf)) == (900 * MiB, str(leaf))
    (leaf / "memory.max").write_text("max\n")
    assert enclosing_limit("v2", str(leaf)) is None  # the root has no memory.max: the host's RAM


def test_enclosing_limit_on_v1_reads_the_hierarchical_limit(tmp_path: Path) -> None:
    d = _cg(tmp_path / "memory" / "job", memory_limit_in_bytes=str(1 << 62))
    (d / "memory.stat").write_text(f"cache 0\nhierarchical_memory_limit {200 * MiB}\n")
    assert enclosing_limit("v1", str(d)) == (200 * MiB, str(d))
    (d / "memory.stat").write_text(f"hierarchical_memory_limit {1 << 62}\n")
    assert enclosing_limit("v1", str(d)) is None


def test_own_cgroup_finds_the_v2_root_cgroup_too(tmp_path: Path) -> None:
    # the root cgroup has no memory.current: a runner there (a VM, a container's namespace root) still counts
    root = _cg(tmp_path / "cg", cgroup_controllers="cpu memory pids")
    here = Path("/proc/self/cgroup").read_text()
    path = next((line.split(":", 2)[2] for line in here.splitlines() if line.startswith("0::")), None)
    if path is None:
        pytest.skip("needs a cgroup v2 or hybrid host (a 0:: line in /proc/self/cgroup); "
                    "python tests/vm/run_cgroup2.py runs the v2 tests in a v2 kernel")
    _cg(root / path.lstrip("/"), cgroup_controllers="memory")
    assert v2_dir(root=str(root)) == os.path.normpath(str(root / path.lstrip("/")))
    assert own_cgroup(root=str(root)) == ("v2", os.path.normpath(str(root / path.lstrip("/"))))


def test_enforcement_names_have_one_definition() -> None:
    assert ENFORCEMENTS == ("cgroup2", "cgroup1", "watchdog", "none")
    assert (CGROUP2, CGROUP1, WATCHDOG, NONE) == ENFORCEMENTS
    assert enforcement_of(None, 64 * MiB) == WATCHDOG
    assert enforcement_of(None, None) == NONE


def _vm_script() -> Any:
    sys.path.insert(0, str(ROOT / "tests" / "vm"))
    try:
        import run_cgroup2
    finally:
        sys.path.pop(0)
    return run_cgroup2


def test_the_vm_script_skips_saying_why_when_it_cannot_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    vm = _vm_script()
    monkeypatch.setattr(vm, "QEMU", "qemu-system-not-here")
    monkeypatch.setattr(vm.os, "geteuid", lambda: 1000)
    assert vm.main([]) == 0
    out = capsys.readouterr().out
    # Which other packages are missing depends on the machine (a fresh one has none of them).
    first_line = out.splitlines()[0]
    assert first_line.startswith("SKIPPED: cgroup v2 VM tests not run: missing qemu-system-x86")
    assert " and not root" in first_line
    assert "apt-get install -y qemu-system-x86 linux-image-amd64 busybox-static" in out


@pytest.mark.skipif(shutil.which("cpio") is None, reason="needs cpio to list the archive")
def test_the_vm_initramfs_is_a_newc_archive_cpio_reads(tmp_path: Path) -> None:
    vm = _vm_script()
    blob = b"".join([
        vm._cpio_entry("bin", 0o40755, b"", 1),
        vm._cpio_entry("bin/hello", 0o100755, b"#!/bin/sh\necho hi\n", 2),
        vm._cpio_entry("bin/sh", 0o120777, b"hello", 3),
        vm._cpio_entry("TRAILER!!!", 0, b"", 0),
    ])
    (tmp_path / "a.cpio.gz").write_bytes(gzip.compress(blob))
    listing = subprocess.run(["cpio", "-it"], input=gzip.decompress((tmp_path / "a.cpio.gz").read_bytes()),
                             capture_output=True, check=True).stdout.decode().split()
    assert listing == ["bin", "bin/hello", "bin/sh"]
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["cpio", "-idm", "--quiet"], input=blob, cwd=out, check=True, capture_output=True)
    assert (out / "bin" / "hello").read_text() == "#!/bin/sh\necho hi\n"
    assert os.readlink(out / "bin" / "sh") == "hello"
    assert vm.marked_files() == ["tests/test_cgroup2.py", "tests/test_nothing_outlives.py"]


def test_the_vm_shares_again_a_checkout_and_venv_the_guests_tmp_would_hide(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    vm = _vm_script()
    venv = tmp_path / "clone" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    monkeypatch.setattr(vm, "COVERED", (tmp_path,))
    monkeypatch.setattr(vm, "CHECKOUT", tmp_path / "clone")
    # the venv lies inside the checkout: one share covers both
    assert vm.covered_folders(str(venv / "bin" / "python")) == [tmp_path / "clone"]
    monkeypatch.setattr(vm, "CHECKOUT", Path("/work/elsewhere"))
    assert vm.covered_folders(str(venv / "bin" / "python")) == [venv]
    assert f"/mnt{venv}" in vm.reshare_lines([venv]) and "keep0" in vm.reshare_lines([venv])
