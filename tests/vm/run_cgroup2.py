#!/usr/bin/env python3
"""Run the tests marked ``cgroup2`` in a real cgroup v2 kernel, under qemu.

    python tests/vm/run_cgroup2.py                  # as in CI: boot, run, print the guest's pytest output
    python tests/vm/run_cgroup2.py -- -k pids -x    # extra pytest arguments for the guest

Hosts that mount cgroup v1 only cannot run the v2 code path natively, so this
boots the host's Debian kernel (``linux-image-amd64``) with TCG, no disk
image and no network: an initramfs of ``busybox-static`` and the 9p modules
mounts the host's root read-only over 9p, gives the guest tmpfs on ``/tmp``
and ``/run``, mounts cgroup2 with the memory, pids and cpu controllers, and
runs this checkout's tests marked ``cgroup2`` with the interpreter running
this script (the checkout's venv). Results come back on a second, writable
9p share (the exit status and pytest's output) and on the serial console.

Missing packages are installed with apt when running as root; otherwise, or
on a machine that cannot boot the VM, it says why and exits 0 ("skipped").
The exit status is pytest's in the guest (5, "no tests collected", counts as
a failure), or 1 when the guest never reported one.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import lzma
import os
import platform
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ["qemu-system-x86", "linux-image-amd64", "busybox-static"]
QEMU = "qemu-system-x86_64"
BUSYBOX = "/bin/busybox"
#: Loaded in this order: a 9p root over virtio-pci.
MODULES = [
    "virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
    "netfs", "fscache", "9pnet", "9pnet_virtio", "9p",
]
MARK = re.compile(r"pytest\.mark\.cgroup2\b")
STATUS_LINE = re.compile(r"^SPOOLPARSE-VM-EXIT (\d+)\s*$")

# The guest's /init: busybox only, until the host root is mounted and we chroot into it.
INIT = """#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
for m in {modules}; do $B insmod /mods/$m.ko || echo "insmod $m failed"; done
# cache=loose: the root is read-only and nobody else writes it meanwhile; it spares a round trip per read
$B mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=524288,cache=loose hostroot /mnt \\
  || {{ echo "SPOOLPARSE-VM-ERROR cannot mount the host root"; $B poweroff -f; }}
$B mount -t proc proc /mnt/proc
$B mount -t sysfs sys /mnt/sys
$B mount -t devtmpfs dev /mnt/dev
$B mount -t tmpfs -o mode=1777 tmp /mnt/tmp
$B mount -t tmpfs -o mode=755 run /mnt/run
{reshared}$B mkdir -p /mnt/tmp/vmout
$B mount -t 9p -o rw,trans=virtio,version=9p2000.L,msize=524288 vmout /mnt/tmp/vmout \\
  || echo "SPOOLPARSE-VM-ERROR cannot mount the results share"
$B mount -t cgroup2 none /mnt/sys/fs/cgroup || echo "SPOOLPARSE-VM-ERROR cannot mount cgroup2"
# what a systemd host does at boot: the controllers available to every child of the root
echo "+memory +pids +cpu" > /mnt/sys/fs/cgroup/cgroup.subtree_control
$B chroot /mnt /bin/sh /tmp/vmout/guest.sh
$B sync
$B poweroff -f
"""

# Runs inside the chroot (the host's /bin/sh), as root in the root cgroup.
GUEST = """set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
export HYPOTHESIS_STORAGE_DIRECTORY=/tmp/.hypothesis SPOOLPARSE_VM=1
# every Python start costs seconds under TCG: no plugin discovery, no hypothesis set-up (tests/conftest.py)
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
up() {{ cut -d" " -f1 /proc/uptime; }}
echo "guest: $(uname -r), up $(up) s, controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
cd {checkout} || {{ echo "SPOOLPARSE-VM-EXIT 1"; exit 1; }}
{python} -m pytest -p no:cacheprovider --basetemp=/tmp/pytest -o addopts= -ra -v --strict-markers \\
  --noconftest --durations=0 -m cgroup2 {args} > /tmp/vmout/pytest.log 2>&1
status=$?
cat /tmp/vmout/pytest.log
echo $status > /tmp/vmout/status
echo "guest: pytest done, up $(up) s"
echo "SPOOLPARSE-VM-EXIT $status"
"""


def skip(why: str) -> int:
    print(f"SKIPPED: cgroup v2 VM tests not run: {why}", flush=True)
    return 0


def missing() -> list[str]:
    out = []
    if shutil.which(QEMU) is None:
        out.append("qemu-system-x86")
    if not kernels():
        out.append("linux-image-amd64")
    if not os.access(BUSYBOX, os.X_OK) or "static" not in _file_kind(BUSYBOX):
        out.append("busybox-static")
    return out


def _file_kind(path: str) -> str:
    # a static busybox has no PT_INTERP (no "/lib64/ld-linux" string): good enough without `file`
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return ""
    return "dynamic" if b"ld-linux" in head else "static"


def kernels() -> list[tuple[str, str]]:
    """(vmlinuz path, version) of each kernel with its 9p modules, newest first."""
    found = []
    for vmlinuz in glob.glob("/boot/vmlinuz-*"):
        ver = vmlinuz.split("vmlinuz-", 1)[1]
        if glob.glob(f"/lib/modules/{ver}/kernel/fs/9p/9p.ko*") and os.access(vmlinuz, os.R_OK):
            found.append((vmlinuz, ver))
    return sorted(found, key=lambda kv: [int(x) if x.isdigit() else 0 for x in re.split(r"[.-]", kv[1])],
                  reverse=True)


def install(pkgs: list[str]) -> str | None:
    """apt-get install; ``None`` when done, else why not."""
    if os.geteuid() != 0:
        return f"missing {' '.join(pkgs)} and not root (install them: apt-get install -y {' '.join(PACKAGES)})"
    if shutil.which("apt-get") is None:
        return f"missing {' '.join(pkgs)} and no apt-get here"
    print(f"installing {' '.join(pkgs)} with apt-get", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    quiet = {"stdout": subprocess.DEVNULL, "env": env}
    subprocess.run(["apt-get", "update", "-qq"], check=False, **quiet)  # type: ignore[call-overload]
    r = subprocess.run(["apt-get", "install", "-y", "-qq", *pkgs], check=False, **quiet)  # type: ignore[call-overload]
    if r.returncode != 0:
        return f"apt-get install {' '.join(pkgs)} failed (exit {r.returncode})"
    return None


def _module_file(ver: str, name: str) -> str:
    hits = glob.glob(f"/lib/modules/{ver}/kernel/**/{name}.ko*", recursive=True)
    if not hits:
        raise FileNotFoundError(f"module {name} not found for kernel {ver}")
    return sorted(hits, key=len)[0]


def _read_module(path: str) -> bytes:
    data = Path(path).read_bytes()
    if path.endswith(".xz"):
        return lzma.decompress(data)
    if path.endswith(".gz"):
        return gzip.decompress(data)
    if path.endswith(".zst"):
        return subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout
    return data


def _cpio_entry(name: str, mode: int, data: bytes = b"", ino: int = 1) -> bytes:
    """One newc record (name without a leading slash)."""
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
    head = b"070701" + b"".join(b"%08X" % f for f in fields) + name.encode() + b"\0"
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


#: Host folders the guest's own tmpfs mounts cover (/tmp and /run are the guest's, not the host's).
COVERED = (Path("/tmp"), Path("/run"))


def covered_folders(python: str) -> list[Path]:
    """The checkout and the interpreter's virtual environment, where they lie under a covered folder.

    A checkout cloned into /tmp (as CI machines often do) would be hidden by the guest's tmpfs on /tmp:
    each such folder gets a read-only 9p share of its own, mounted back at the same path.
    """
    wanted = [CHECKOUT]
    venv = Path(python).absolute().parent.parent
    if (venv / "pyvenv.cfg").exists():
        wanted.append(venv)
    found: list[Path] = []
    for folder in wanted:
        if any(folder.is_relative_to(c) for c in COVERED) and not any(folder.is_relative_to(f) for f in found):
            found = [f for f in found if not f.is_relative_to(folder)] + [folder]
    return found


def reshare_lines(folders: list[Path]) -> str:
    """The guest's /init lines that mount each covered folder's share back at its host path."""
    return "".join(
        f"$B mkdir -p /mnt{shlex.quote(str(f))}\n"
        f"$B mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=524288,cache=loose keep{i} "
        f"/mnt{shlex.quote(str(f))} || echo \"SPOOLPARSE-VM-ERROR cannot mount {f}\"\n"
        for i, f in enumerate(folders)
    )


def build_initramfs(ver: str, dest: Path, reshared: str = "") -> None:
    entries: list[tuple[str, int, bytes]] = []
    for d in ("bin", "dev", "proc", "sys", "mnt", "mods"):
        entries.append((d, stat.S_IFDIR | 0o755, b""))
    entries.append(("bin/busybox", stat.S_IFREG | 0o755, Path(BUSYBOX).read_bytes()))
    entries.append(("bin/sh", stat.S_IFLNK | 0o777, b"busybox"))
    for m in MODULES:
        entries.append((f"mods/{m}.ko", stat.S_IFREG | 0o644, _read_module(_module_file(ver, m))))
    entries.append(("init", stat.S_IFREG | 0o755, INIT.format(modules=" ".join(MODULES), reshared=reshared).encode()))
    blob = b"".join(_cpio_entry(n, mode, data, i + 1) for i, (n, mode, data) in enumerate(entries))
    blob += _cpio_entry("TRAILER!!!", 0, b"", 0)
    with gzip.open(dest, "wb", compresslevel=1) as f:
        f.write(blob)


def marked_files() -> list[str]:
    """Test files that mark tests ``cgroup2`` (relative to the checkout)."""
    out = []
    for path in sorted((CHECKOUT / "tests").rglob("test_*.py")):
        if MARK.search(path.read_text(errors="replace")):
            out.append(str(path.relative_to(CHECKOUT)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before the VM is killed (default 600)")
    ap.add_argument("--memory", default="2048", help="guest RAM in MiB (default 2048)")
    ap.add_argument("--smp", default="2", help="guest CPUs (default 2)")
    ap.add_argument("--nice", type=int, default=10, help="niceness of qemu (default 10)")
    ap.add_argument("--python", default=sys.executable, help="interpreter to run pytest with in the guest")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args(argv)

    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return skip(f"needs an x86_64 Linux host, not {sys.platform}/{platform.machine()}")
    need = missing()
    if need:
        why = install(need)
        if why is not None:
            return skip(why)
        need = missing()
        if need:
            return skip(f"still missing after apt-get: {' '.join(need)}")
    files = marked_files()
    if not files:
        print("no test file marks tests cgroup2: failing", file=sys.stderr)
        return 1
    vmlinuz, ver = kernels()[0]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="spoolparse-vm-") as tmp:
        work = Path(tmp)
        out = work / "out"
        out.mkdir()
        initrd = work / "initrd.gz"
        covered = covered_folders(args.python)
        build_initramfs(ver, initrd, reshare_lines(covered))
        guest_args = " ".join(shlex.quote(a) for a in [*files, *args.pytest_args])
        (out / "guest.sh").write_text(
            GUEST.format(checkout=shlex.quote(str(CHECKOUT)), python=shlex.quote(args.python), args=guest_args)
        )
        cmd = [
            "nice", "-n", str(args.nice),
            QEMU, "-accel", "tcg,thread=multi", "-cpu", "max", "-m", args.memory, "-smp", args.smp,
            "-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio", "-monitor", "none",
            "-kernel", vmlinuz, "-initrd", str(initrd),
            "-append", "console=ttyS0 quiet loglevel=3 panic=-1",
            "-fsdev", "local,id=r,path=/,security_model=passthrough,readonly=on,multidevs=remap",
            "-device", "virtio-9p-pci,fsdev=r,mount_tag=hostroot",
            "-fsdev", f"local,id=o,path={out},security_model=passthrough",
            "-device", "virtio-9p-pci,fsdev=o,mount_tag=vmout",
        ]
        for i, folder in enumerate(covered):
            cmd += ["-fsdev", f"local,id=k{i},path={folder},security_model=passthrough,readonly=on,multidevs=remap",
                    "-device", f"virtio-9p-pci,fsdev=k{i},mount_tag=keep{i}"]
        print(f"booting {vmlinuz} under qemu (TCG) to run {' '.join(files)} -m cgroup2", flush=True)
        seen: list[int] = []
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def pump() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode(errors="replace").rstrip("\r\n")
                m = STATUS_LINE.match(line)
                if m:
                    seen.append(int(m.group(1)))
                print(f"  vm| {line}", flush=True)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            print(f"the VM did not finish within {args.timeout:.0f} s: killed", file=sys.stderr)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        reader.join(timeout=5)
        wall = time.monotonic() - t0
        status_file = out / "status"
        status: int | None = None
        if status_file.exists():
            status = int(status_file.read_text().strip() or "1")
        elif seen:
            status = seen[-1]
    if status is None:
        print(f"the guest reported no test status (qemu exit {proc.returncode}, {wall:.1f} s): failing",
              file=sys.stderr)
        return 1
    verdict = "passed" if status == 0 else "FAILED"
    print(f"cgroup v2 VM tests {verdict} (pytest exit {status}) in {wall:.1f} s wall, kernel {ver}", flush=True)
    if status == 5:
        print("pytest collected no tests in the guest: failing", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
