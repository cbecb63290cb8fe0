#!/usr/bin/env python3
"""Unpack pure-Python wheels into a folder for ``PYTHONPATH``, without pip.

A wheel is a zip: for a pure-Python one (``Root-Is-Purelib: true``, e.g. Liger-Kernel's
py3-none-any wheel) ``pip install --no-deps --target DEST`` amounts to extracting it, which is
all this does, so it also works where the image has no pip. The ``<name>.data/purelib`` and
``platlib`` folders go to DEST's root; scripts, headers and data files are left out (nothing
here needs them). No entry may leave DEST (absolute paths or ``..`` are refused). A wheel that is
not pure Python is unpacked only when its tags say it runs here without a build: any Python 3
(``py3-none``, e.g. z3-solver's, which carries its own ``libz3.so``) on a ``manylinux`` platform of
this machine's architecture; any other is refused.

Usage::

    python benchmarks/unpack_wheel.py --dest /tmp/bench_site benchmarks/wheels/liger_kernel-*.whl
"""
from __future__ import annotations

import argparse
import platform
import sys
import zipfile
from pathlib import Path, PurePosixPath


class WheelError(ValueError):
    pass


def _wheel_metadata(zf: zipfile.ZipFile) -> dict[str, str]:
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/WHEEL")]
    if len(names) != 1:
        raise WheelError(f"expected one *.dist-info/WHEEL, found {len(names)}")
    meta = {}
    for line in zf.read(names[0]).decode("utf-8").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip()
    return meta


def _destination(name: str) -> PurePosixPath | None:
    """Where entry ``name`` goes, relative to DEST (None: left out)."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\\" in name:
        raise WheelError(f"unsafe path in wheel: {name!r}")
    if path.parts and path.parts[0].endswith(".data"):
        if len(path.parts) > 2 and path.parts[1] in ("purelib", "platlib"):
            return PurePosixPath(*path.parts[2:])
        return None
    return path


def _runs_here(wheel: Path) -> bool:
    """A platform wheel that needs no build here: tags py3-none-manylinux*_<this machine's arch>."""
    parts = wheel.name[:-len(".whl")].split("-")
    if len(parts) < 5:
        return False
    python, abi, platforms = parts[-3], parts[-2], parts[-1].split(".")
    arch = platform.machine()
    return (sys.platform == "linux" and "py3" in python.split(".") and abi == "none"
            and any(p.startswith("manylinux") and p.endswith("_" + arch) for p in platforms))


def unpack(wheel: Path, dest: Path) -> list[str]:
    """Extract ``wheel`` into ``dest``; returns the top-level names it put there (packages, dist-info)."""
    with zipfile.ZipFile(wheel) as zf:
        if _wheel_metadata(zf).get("Root-Is-Purelib", "").lower() != "true" and not _runs_here(wheel):
            raise WheelError(f"{wheel.name} is neither pure Python (Root-Is-Purelib is not true) nor a "
                             f"py3-none-manylinux wheel for {platform.machine()}")
        plan = [(info, _destination(info.filename)) for info in zf.infolist() if not info.is_dir()]
        top = set()
        for info, rel in plan:
            if rel is None:
                continue
            target = dest.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            top.add(rel.parts[0])
    return sorted(top)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", required=True, help="folder to put on PYTHONPATH (created)")
    p.add_argument("wheels", nargs="+", type=Path)
    args = p.parse_args(argv)
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    failed = 0
    for wheel in args.wheels:
        try:
            top = unpack(wheel, dest)
            print(f"unpacked {wheel.name} into {dest}: {', '.join(top)}")
        except (OSError, zipfile.BadZipFile, WheelError) as exc:
            print(f"could not unpack {wheel}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
