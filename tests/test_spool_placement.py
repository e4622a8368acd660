"""Where a new spool's inode is made: on an ext4 without a journal, in a directory of the process's own.

There the kernel's inode allocator skips, one by one, the inodes of a block group freed in the last seconds
to minutes, so spools made right after a fleet freed thousands beside them cost ~0.5 ms each; a directory
under a ``chattr +T`` one lands in a block group of the filesystem's choosing. Real processes; what is left
on disk is looked at after they exit.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spoolparse import SpoolFullError
from spoolparse import spool as spool_mod
from spoolparse._os.identity import identity, parse

from .helpers import ROOT, identity_of_child

UID = os.geteuid()

# open one spool in argv[1]; print where it is and what its placement's parent looks like; then (argv[2]) exit
# normally, or be killed before any exit handler runs
ONE_SPOOL = r"""
import fcntl, json, os, signal, sys
from spoolparse import spool
f = spool.open_spool(sys.argv[1])
f.write(b"x")
target = os.readlink(f"/proc/self/fd/{f.fileno()}")
top = os.path.join(sys.argv[1], f"spoolparse-{os.geteuid()}")
flags = -1
if os.path.isdir(top):
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    buf = bytearray(8)
    fcntl.ioctl(fd, spool._FS_IOC_GETFLAGS, buf)
    flags = int.from_bytes(buf[:4], sys.byteorder)
    os.close(fd)
print(json.dumps({"pid": os.getpid(), "target": target, "flags": flags,
                  "top": sorted(os.listdir(top)) if os.path.isdir(top) else None}), flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _one_spool(directory: Path, how: str = "exit") -> dict[str, object]:
    p = subprocess.run([sys.executable, "-c", ONE_SPOOL, str(directory), how], capture_output=True, text=True,
                       cwd=ROOT, timeout=60, check=False)
    assert p.returncode == (-signal.SIGKILL if how == "kill" else 0), p.stderr
    out: dict[str, object] = json.loads(p.stdout)
    return out


def _needs_ext4_without_journal(path: Path) -> None:
    if not spool_mod._ext4_without_journal(str(path)):
        pytest.skip(f"needs the temp dir on an ext4 without a journal (the only filesystem where spools get a "
                    f"placement; {path} is not): run with TMPDIR on one, e.g. a loop-mounted mkfs.ext4 -O ^has_journal")


@pytest.fixture
def small_ext4(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB ext4 without a journal and with few inodes, loop-mounted (root only)."""
    image, d = tmp_path / "ext4.img", tmp_path / "mnt"
    d.mkdir()
    with open(image, "wb") as f:
        f.truncate(4 << 20)
    made = shutil.which("mkfs.ext4") is not None and subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-N", "64", str(image)], capture_output=True, check=False
    ).returncode == 0
    if os.geteuid() != 0 or not made or subprocess.run(
        ["mount", "-o", "loop", str(image), str(d)], capture_output=True, check=False
    ).returncode != 0:
        pytest.skip("needs root, mkfs.ext4 (e2fsprogs) and a loop device to mount a small ext4 without a journal")
    try:
        d.chmod(0o1777)
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True, check=False)


def test_a_full_filesystem_is_the_runs_failure_and_the_placement_stays(
    small_ext4: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 3600.0)  # no move to a new one while this runs
    assert spool_mod._ext4_without_journal(str(small_ext4))
    placement = spool_mod.placement(str(small_ext4))
    assert os.path.dirname(placement) == str(small_ext4 / f"spoolparse-{UID}")
    # a filesystem made with few inodes: once they are taken, no spool can be made
    fillers = []
    with pytest.raises(OSError, match="No space"):
        for i in range(10_000):
            fillers.append(small_ext4 / f"f{i}")
            fillers[-1].touch()
    with pytest.raises(SpoolFullError, match="cannot create a spool"):
        spool_mod.open_spool(str(small_ext4))
    for p in fillers[:-1]:
        p.unlink()
    f2 = spool_mod.open_spool(str(small_ext4))  # room again: still in the placement, not given up for the directory
    try:
        assert os.path.dirname(os.readlink(f"/proc/self/fd/{f2.fileno()}")) == placement
    finally:
        f2.close()
    spool_mod._made_in.pop(str(small_ext4), None)
    os.rmdir(placement)
    os.rmdir(os.path.dirname(placement))


def test_spools_are_made_in_a_directory_of_the_process_own_removed_at_exit(tmp_path: Path) -> None:
    _needs_ext4_without_journal(tmp_path)
    seen = _one_spool(tmp_path)
    placement = os.path.dirname(str(seen["target"]))
    assert os.path.dirname(placement) == str(tmp_path / f"spoolparse-{UID}")
    assert os.path.basename(placement).startswith(f"{seen['pid']}-")
    assert parse(os.path.basename(placement).rpartition("-")[0]) is not None  # named after its maker's identity
    assert os.path.basename(str(seen["target"])).startswith("#")  # O_TMPFILE: no name
    assert seen["top"] == [os.path.basename(placement)]
    assert isinstance(seen["flags"], int) and seen["flags"] & spool_mod._FS_TOPDIR_FL  # chattr +T
    assert os.listdir(tmp_path) == []  # gone with the process


def test_the_placement_of_a_killed_process_is_removed_by_the_next_process(tmp_path: Path) -> None:
    _needs_ext4_without_journal(tmp_path)
    killed = _one_spool(tmp_path, "kill")
    left = os.path.dirname(str(killed["target"]))
    assert os.path.isdir(left)  # no exit handler ran: an empty directory is left
    seen = _one_spool(tmp_path)
    assert seen["top"] == [os.path.basename(os.path.dirname(str(seen["target"])))]  # the dead one's is swept
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("case", ["dead", "pid reused", "alive", "pid alone"])
def test_a_placement_is_swept_once_its_maker_is_provably_gone_and_no_other(tmp_path: Path, case: str) -> None:
    """A placement is named after its maker's identity, as a task cgroup is: a pid number alone (an older
    name, or the number of a live spoolparse in another PID namespace sharing the directory) proves nothing, and
    removing a live process's placement made its next spools fail."""
    _needs_ext4_without_journal(tmp_path)
    ident, p = identity_of_child(alive=case in ("pid reused", "alive"), clock=[])
    if case == "pid reused":
        pid, start, ns = ident.split("-")
        ident = f"{pid}-{int(start) - 1}-{ns}"  # that pid's number, held now by a process started later
    top = tmp_path / f"spoolparse-{UID}"
    top.mkdir(mode=0o700)
    theirs = top / (f"{ident}-0badcafe" if case != "pid alone" else f"{p.pid}-0badcafe")
    theirs.mkdir(mode=0o700)
    try:
        spool_mod.open_spool(str(tmp_path)).close()  # this process's first spool there: it sweeps first
        mine = os.path.basename(spool_mod.placement(str(tmp_path)))
        assert mine.startswith(f"{identity()}-")
        assert theirs.exists() == (case in ("alive", "pid alone"))
    finally:
        if p.returncode is None:
            assert p.stdin is not None
            p.stdin.close()
            p.wait()
        with contextlib.suppress(OSError):
            theirs.rmdir()


def test_a_placement_removed_meanwhile_leaves_the_spools_in_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_ext4_without_journal(tmp_path)
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 3600.0)
    first = spool_mod.open_spool(str(tmp_path))
    placement = spool_mod.placement(str(tmp_path))
    assert placement != str(tmp_path)
    os.rmdir(placement)  # by hand, or another process's sweep
    os.rmdir(os.path.dirname(placement))
    second = spool_mod.open_spool(str(tmp_path))
    try:
        assert os.path.dirname(os.readlink(f"/proc/self/fd/{second.fileno()}")) == str(tmp_path)
        first.write(b"still here")  # the first one never needed its directory
    finally:
        first.close()
        second.close()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", ["symlink", "open to others"])
def test_a_spoolparse_directory_not_ours_is_not_used(tmp_path: Path, kind: str) -> None:
    _needs_ext4_without_journal(tmp_path)
    top = tmp_path / f"spoolparse-{UID}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if kind == "symlink":
        top.symlink_to(elsewhere)
    else:
        top.mkdir()
        top.chmod(0o777)
    seen = _one_spool(tmp_path)
    assert os.path.dirname(str(seen["target"])) == str(tmp_path)  # in the directory itself
    assert os.listdir(elsewhere) == []
    if kind != "symlink":
        assert os.listdir(top) == []


def test_other_filesystems_get_no_placement(tmp_path: Path) -> None:
    d = tmp_path / "mnt"
    d.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)],
                                           capture_output=True, check=False).returncode != 0:
        pytest.skip("needs root to mount a tmpfs")
    try:
        assert not spool_mod._ext4_without_journal(str(d))
        seen = _one_spool(d)
        assert os.path.dirname(str(seen["target"])) == str(d)
        assert seen["top"] is None
        assert os.listdir(d) == []
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True, check=False)


def test_a_process_moves_to_a_new_placement_after_many_spools_and_after_a_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the spools a fleet freed are recent in its placement's block group: the next fleet starts elsewhere
    _needs_ext4_without_journal(tmp_path)
    monkeypatch.setattr(spool_mod, "PLACEMENT_SPOOLS", 3)
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 3600.0)  # by count first, whatever the host's load
    top = tmp_path / f"spoolparse-{UID}"
    made = [spool_mod.open_spool(str(tmp_path)) for _ in range(7)]
    where = [os.path.dirname(os.readlink(f"/proc/self/fd/{f.fileno()}")) for f in made]
    assert [len(set(where[i:i + 3])) for i in (0, 3)] == [1, 1] and len(set(where)) == 3, where  # 3, 3, 1
    assert sorted(os.listdir(top)) == [os.path.basename(where[-1])]  # the ones left are gone at once
    for f in made:
        f.write(b"still usable")
        f.close()
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 0.2)
    time.sleep(0.3)
    after_pause = spool_mod.open_spool(str(tmp_path))
    try:
        assert os.path.dirname(os.readlink(f"/proc/self/fd/{after_pause.fileno()}")) not in where
    finally:
        after_pause.close()
    assert len(os.listdir(top)) == 1


def test_threads_making_spools_while_placements_move_on_stay_in_placements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_ext4_without_journal(tmp_path)
    monkeypatch.setattr(spool_mod, "PLACEMENT_SPOOLS", 2)
    targets: list[str] = []

    def make() -> None:
        for _ in range(200):
            f = spool_mod.open_spool(str(tmp_path))
            targets.append(os.readlink(f"/proc/self/fd/{f.fileno()}"))
            f.close()

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(targets) == 800
    # a thread that found its placement gone (another moved on and removed it) took the new one
    assert all(os.path.dirname(os.path.dirname(t)) == str(tmp_path / f"spoolparse-{UID}") for t in targets)
    assert spool_mod.placement(str(tmp_path)) != str(tmp_path)
    assert len(os.listdir(tmp_path / f"spoolparse-{UID}")) == 1


def test_a_forked_copy_makes_its_own_placement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_ext4_without_journal(tmp_path)
    monkeypatch.setattr(spool_mod, "PLACEMENT_PAUSE", 3600.0)
    parent = spool_mod.placement(str(tmp_path))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: a spool of its own, in a placement of its own; the parent's is not its to remove
        try:
            f = spool_mod.open_spool(str(tmp_path))
            os.write(w, os.readlink(f"/proc/self/fd/{f.fileno()}").encode())
            f.close()
            spool_mod._remove_placements()
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        target = pipe.read().decode()
    os.waitpid(pid, 0)
    mine = os.path.dirname(target)
    assert os.path.basename(mine).startswith(f"{pid}-") and mine != parent
    assert not os.path.exists(mine)
    assert os.path.isdir(parent)  # the parent's own is still there, and still used
    f = spool_mod.open_spool(str(tmp_path))
    try:
        assert os.path.dirname(os.readlink(f"/proc/self/fd/{f.fileno()}")) == parent
    finally:
        f.close()


def test_fcntl_flags_constants_match_this_platform() -> None:
    # _IOR('f', 1, long) / _IOW('f', 2, long), as <linux/fs.h> spells FS_IOC_GETFLAGS / FS_IOC_SETFLAGS
    if sys.maxsize > 2**32:
        assert (spool_mod._FS_IOC_GETFLAGS, spool_mod._FS_IOC_SETFLAGS) == (0x80086601, 0x40086602)
    else:
        assert (spool_mod._FS_IOC_GETFLAGS, spool_mod._FS_IOC_SETFLAGS) == (0x80046601, 0x40046602)


# -- another local user cannot steer where root makes and removes directories ---------------------------------


def test_a_spool_directory_of_another_user_is_refused(other_user: tuple[int, int], shared_base: Path) -> None:
    """``PDD_AGENT_SPOOL_DIR`` naming a directory another user owns was used without a word: she could rename
    what spoolparse made in it at will."""
    theirs = shared_base / "theirs"
    theirs.mkdir()
    os.chown(theirs, *other_user)
    p = subprocess.run([sys.executable, "-m", "spoolparse", "run", "--allow-empty-answer", "--", "true"],
                       capture_output=True, cwd=ROOT,
                       env={**os.environ, "PDD_AGENT_SPOOL_DIR": str(theirs)}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert f"is owned by another user (uid {other_user[0]})".encode() in p.stderr, p.stderr
    assert os.listdir(theirs) == []
    with pytest.raises(spool_mod.SpoolDirError, match="owned by another user"):
        spool_mod.resolve_spool_dir(theirs)


def _swap_as(user: tuple[int, int], a: Path, b: Path, stop: Path) -> tuple[int, int]:
    """A process of ``user``'s exchanging ``a`` and ``b`` (``renameat2`` with ``RENAME_EXCHANGE``: atomic) again
    and again until ``stop`` exists: (its pid, the read end of a pipe that gets how many swaps it made)."""
    import ctypes

    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        return pid, r
    status = 1
    try:  # the child: her process from here on, with nothing of root's
        os.close(r)
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
        libc = ctypes.CDLL(None, use_errno=True)
        exchange = getattr(libc, "renameat2", None)
        nr = {"x86_64": 316, "aarch64": 276}.get(os.uname().machine)  # an older C library: the system call
        at_fdcwd, rename_exchange = -100, 2
        pa, pb, ps = bytes(a), bytes(b), bytes(stop)
        swaps = 0
        while not os.path.exists(ps):
            for _ in range(200):
                if exchange is not None:
                    swaps += exchange(at_fdcwd, pa, at_fdcwd, pb, rename_exchange) == 0
                else:
                    swaps += libc.syscall(nr, at_fdcwd, pa, at_fdcwd, pb, rename_exchange) == 0
        os.write(w, str(swaps).encode())
        status = 0
    finally:
        os._exit(status)


# Makes a new placement in argv[1] argv[2] times (each: the shared directory made or checked, swept, and a
# directory of the process's own made in it), a spool in each.
PLACE = r"""
import os, sys
from spoolparse import spool
placed = 0
for _ in range(int(sys.argv[2])):
    spool._made_in.pop(sys.argv[1], None)  # forget the placement: the next spool makes a new one
    f = spool.open_spool(sys.argv[1])
    placed += os.path.dirname(os.readlink(f"/proc/self/fd/{f.fileno()}")) != sys.argv[1]
    f.close()
print(placed)
"""


def test_a_swap_loop_of_another_user_never_makes_root_touch_her_target(
    other_user: tuple[int, int], shared_base: Path
) -> None:
    """A world-writable spool directory without the sticky bit: its ``spoolparse-0`` was checked once with
    ``lstat``, then swept and ``mkdtemp``'d in by path. Swapping it for a symlink to a directory of her choosing
    in between (a ``renameat2(RENAME_EXCHANGE)`` loop) made root remove ``99999-important`` there and make its
    ``<pid>-...`` placements there."""
    shared, target = shared_base / "shared", shared_base / "target"
    shared.mkdir()
    shared.chmod(0o777)  # anyone may rename entries in it: no sticky bit
    if not spool_mod._ext4_without_journal(str(shared)):
        pytest.skip("needs the temp dir on an ext4 without a journal (the only filesystem where spools get a "
                    "placement); run with TMPDIR on one")
    target.mkdir()
    (target / "99999-important").mkdir()  # what a sweep would take for a dead process's placement
    before = {p.name: p.stat().st_ino for p in target.iterdir()}
    (shared / "decoy").symlink_to(target)
    (shared / f"spoolparse-{UID}").mkdir(mode=0o700)  # root's own, as the first run leaves it
    stop = shared_base / "stop"
    pid, swaps = _swap_as(other_user, shared / f"spoolparse-{UID}", shared / "decoy", stop)
    placed = 0
    try:
        for _ in range(3):
            run = subprocess.run([sys.executable, "-c", PLACE, str(shared), "300"], capture_output=True, cwd=ROOT,
                                 timeout=300)
            assert run.returncode == 0, run.stderr
            placed += int(run.stdout)
    finally:
        stop.touch()
        _, status = os.waitpid(pid, 0)
        with os.fdopen(swaps, "rb") as f:
            made = f.read()
    assert status == 0 and int(made) > 0  # she did swap, all along
    assert placed > 0  # and placements were made all the same, whenever the name was root's own directory
    assert {p.name: p.stat().st_ino for p in target.iterdir()} == before  # nothing removed, nothing made


# -- a spool directory (or the temp dir) reached through anything of another user's is refused -------------------

# Resolve the spool directory as a run does (argv[1]: the one given, "" for none) and make a spool in it: print
# what was resolved and where the spool's inode is; warnings on stderr.
RESOLVE = r"""
import json, os, sys, warnings
from spoolparse import spool, SpoolDirError
warnings.simplefilter("always")
try:
    d = spool.resolve_spool_dir(sys.argv[1] or None)
except SpoolDirError as e:
    print(json.dumps({"error": str(e)}))
    raise SystemExit(0)
f = spool.open_spool(d)
print(json.dumps({"dir": d, "spool": os.path.realpath(os.readlink(f"/proc/self/fd/{f.fileno()}").split(" (")[0])}))
f.close()
"""

#: How the spool directory is named: the variable, the temp dir's variable, the option (``spool_dir=``).
NAMED_BY = ("PDD_AGENT_SPOOL_DIR", "TMPDIR", "--spool-dir")


def _resolve(named_by: str, path: Path) -> tuple[dict[str, str], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PDD_AGENT_SPOOL_DIR", "TMPDIR", "TEMP", "TMP")}
    arg = ""
    if named_by == "--spool-dir":
        arg = str(path)
    else:
        env[named_by] = str(path)
    p = subprocess.run([sys.executable, "-c", RESOLVE, arg], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    out: dict[str, str] = json.loads(p.stdout)
    return out, p.stderr


def _attack_shapes(base: Path, her: tuple[int, int]) -> dict[str, tuple[Path, str]]:
    """Each way another user can stand between root and the directory it names: (the path named, why it is
    refused). ``base/target`` is root's own directory, the one she wants root to write in."""
    hers, sticky = base / "hers", base / "sticky"
    for d in (hers, sticky):
        d.mkdir()
    os.chown(hers, *her)
    sticky.chmod(0o1777)  # /tmp's mode
    (hers / "link").symlink_to(base / "target")
    (sticky / "link").symlink_to(base / "target")
    (hers / "roots").mkdir()  # a directory of root's, in hers: she can swap it for a link at will
    for link in (hers / "link", sticky / "link"):
        os.lchown(link, *her)
    uid = her[0]
    theirs = f"goes through {str(hers)!r}, which is owned by another user (uid {uid})"
    return {
        "her symlink in her directory": (hers / "link", theirs),
        "her symlink in a sticky directory": (sticky / "link", f"is a symbolic link owned by another user (uid {uid})"),
        "root's directory in hers": (hers / "roots", theirs),
        "her directory": (hers, f"is owned by another user (uid {uid})"),
    }


@pytest.mark.parametrize("named_by", NAMED_BY)
def test_a_spool_directory_reached_through_another_users_symlink_or_directory_is_refused(
    other_user: tuple[int, int], shared_base: Path, named_by: str
) -> None:
    """``PDD_AGENT_SPOOL_DIR``, ``--spool-dir`` or ``TMPDIR`` naming her symlink to a directory of root's were
    accepted without a word (``os.stat`` followed the link and saw root's target; the temp dir had no check at
    all), and root made its ``spoolparse-0/<pid>-<random>`` directories where she pointed it."""
    target = shared_base / "target"
    target.mkdir()
    (target / "root-file").write_text("root's")
    for shape, (path, why) in _attack_shapes(shared_base, other_user).items():
        out, err = _resolve(named_by, path)
        if named_by == "--spool-dir":  # the directory the caller named: its error, nothing falls back
            assert out == {"error": f"spool directory {str(path)!r} {why}"}, shape
        else:
            fallback = "/tmp"  # neither TMPDIR nor the variable is set but the one named
            assert f"{named_by}={str(path)!r} {why}; spooling to {fallback!r} instead" in err, (shape, err)
            assert out["dir"] == fallback and os.path.dirname(out["spool"]).startswith(fallback), (shape, out)
        assert os.listdir(target) == ["root-file"], shape
    if named_by == "--spool-dir":
        link = shared_base / "hers" / "link"
        p = subprocess.run([sys.executable, "-m", "spoolparse", "run", "--spool-dir", str(link), "--", "true"],
                           capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
        assert p.returncode == 2 and "which is owned by another user" in p.stderr, p.stderr


@pytest.mark.parametrize("named_by", NAMED_BY)
def test_links_and_directories_of_root_or_our_own_on_the_way_are_followed(
    shared_base: Path, named_by: str
) -> None:
    """A distribution's ``/tmp`` -> elsewhere (root's link in root's directory), or a link of the user's own,
    keeps working: the link and what it leads to are ours or root's, and nobody else may change them."""
    target = shared_base / "target"
    target.mkdir()
    sticky = shared_base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "link").symlink_to(target)
    (shared_base / "relative").symlink_to("sticky/link")  # a link to a link, relative
    for path in (sticky / "link", shared_base / "relative", target):
        out, err = _resolve(named_by, path)
        assert out["dir"] == str(path) and os.path.dirname(out["spool"]).startswith(str(target)), (path, out, err)
        assert "Warning" not in err, err


def test_where_no_temp_dir_can_hold_spools_the_error_says_why_for_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temp-dir fallback had no check at all: it was ``tempfile.gettempdir()`` whatever that was."""
    import tempfile

    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))  # a program's own choice comes first
    monkeypatch.setenv("TMPDIR", str(tmp_path / "nope"))
    monkeypatch.delenv("TEMP", raising=False)
    monkeypatch.delenv("TMP", raising=False)
    monkeypatch.delenv("PDD_AGENT_SPOOL_DIR", raising=False)
    monkeypatch.setattr(spool_mod, "TEMP_DIRS", (str(afile), str(tmp_path / "missing")))
    monkeypatch.setattr(spool_mod, "_warned", set())
    with pytest.raises(spool_mod.SpoolDirError) as e:
        spool_mod.resolve_spool_dir()
    assert str(e.value) == (
        f"no directory can hold spools: tempfile.tempdir={str(tmp_path / 'gone')!r} does not exist; "
        f"TMPDIR={str(tmp_path / 'nope')!r} does not exist; {str(afile)!r} is not a directory; "
        f"{str(tmp_path / 'missing')!r} does not exist: name one with --spool-dir or PDD_AGENT_SPOOL_DIR"
    )
    monkeypatch.setattr(spool_mod, "TEMP_DIRS", (str(tmp_path),))
    with pytest.warns(spool_mod.SpoolDirWarning) as said:
        assert spool_mod.resolve_spool_dir() == str(tmp_path)
    assert [str(w.message) for w in said] == [
        f"tempfile.tempdir={str(tmp_path / 'gone')!r} does not exist; spooling to {str(tmp_path)!r} instead",
        f"TMPDIR={str(tmp_path / 'nope')!r} does not exist; spooling to {str(tmp_path)!r} instead",
    ]


@pytest.mark.parametrize("named_by", ["PDD_AGENT_SPOOL_DIR", "TMPDIR"])
def test_a_run_killed_with_a_spool_dir_of_her_link_leaves_nothing_in_her_target(
    other_user: tuple[int, int], shared_base: Path, named_by: str
) -> None:
    """A ``kill -9`` left root's ``spoolparse-0/<pid>-<random>`` in her target (an ext4 without a journal,
    where spools get a placement; elsewhere the warning is what tells)."""
    target = shared_base / "target"
    target.mkdir()
    link = _attack_shapes(shared_base, other_user)["her symlink in her directory"][0]
    env = {k: v for k, v in os.environ.items() if k not in ("PDD_AGENT_SPOOL_DIR", "TMPDIR", "TEMP", "TMP")}
    env[named_by] = str(link)
    mark = f"{30 + os.getpid() % 1000 / 1000:.3f}"  # the agent: sleep for this many seconds
    p = subprocess.Popen([sys.executable, "-m", "spoolparse", "run", "--", "sleep", mark],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 30
        while not _running(mark) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _running(mark)
    finally:
        p.kill()
        _, err = p.communicate(timeout=60)
    said = f"{named_by}={str(link)!r} goes through {str(link.parent)!r}, which is owned by another user"
    assert said.encode() in err, err
    assert os.listdir(target) == []
    deadline = time.monotonic() + 10
    while _running(mark) and time.monotonic() < deadline:  # the guardian ends the agent
        time.sleep(0.05)


def _running(seconds: str) -> bool:
    """Whether a ``sleep SECONDS`` runs (the agent, not the spoolparse naming it)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() == f"sleep\0{seconds}\0".encode():
                    return True
        except OSError:
            continue
    return False


# -- the step-by-step walk reaches what the kernel's lookup reaches -----------------------------------------------


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directories, a file and links of ours of every kind: relative, absolute, up and out, to a link, dangling,
    a loop."""
    base = tmp_path_factory.mktemp("walk")
    (base / "a" / "b").mkdir(parents=True)
    (base / "c").mkdir()
    (base / "f").write_text("")
    links = {"rel": "a/b", "abs": str(base / "c"), "up": "../c", "chain": "rel", "dangling": "nope",
             "loop": "loop2", "loop2": "loop", "root": "/", "file": "f"}
    for name, target in links.items():
        (base / name).symlink_to(target)
    (base / "a" / "b" / "up").symlink_to("../../c")
    return base


STEPS = ["a", "b", "c", "f", "rel", "abs", "up", "chain", "dangling", "loop", "root", "file", ".", "..", "", "nope"]


@settings(max_examples=500)  # a few microseconds each
@given(steps=st.lists(st.sampled_from(STEPS), max_size=6), relative=st.booleans())
def test_a_path_is_reached_step_by_step_where_the_kernel_reaches_it(
    tree: Path, steps: list[str], relative: bool
) -> None:
    """:func:`spoolparse._dirfd.open_path` walks a path itself, to check each link and directory on the way:
    with none refused, it ends where the kernel's lookup does, or fails as it does (``..`` after a link, links
    to links, absolute and relative ones, loops, a file on the way)."""
    from spoolparse._dirfd import NotOurs, open_path

    path = "/".join([str(tree), *steps])
    if relative:
        path = "/".join([".", *steps])  # from the working directory: the tree
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        try:
            st_ = os.stat(path)
            kernel: object = (st_.st_dev, st_.st_ino) if os.path.isdir(path) else "ENOTDIR"
        except OSError as e:
            kernel = errno.errorcode[e.errno or 0]
        try:
            fd = open_path(path)
        except NotOurs as e:
            ours: object = errno.errorcode[e.errno or 0]
        except FileNotFoundError:
            ours = "ENOENT"
        else:
            st_ = os.fstat(fd)
            os.close(fd)
            ours = (st_.st_dev, st_.st_ino)
    finally:
        os.chdir(cwd)
    assert ours == kernel, path
