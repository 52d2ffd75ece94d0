"""The CPUs this process may use: the affinity mask, and the CPU quota of its cgroup (v1 or v2),
whichever is smaller.

A container limited to 1 CPU on a 16-core node still sees 16 CPUs in its affinity mask: only the
cgroup's quota (Kubernetes' ``resources.limits.cpu``) says 1. The quota of every cgroup from the
process's own up to its hierarchy's root applies (a pod's and its container's), so the smallest
counts. Standard library only: the CLI reads it to parse ``--processes auto``.

``root`` prefixes every path read (``/proc/self/...`` and the cgroup mounts), so the tests point it
at a tree of fixture files.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class CpuBudget:
    affinity: int  # CPUs in the affinity mask
    quota: float | None  # CPUs the cgroup quota allows (None: no quota found)
    source: str  # where the quota was read, in words (for the start-up log line)

    @property
    def usable(self) -> int:
        """Whole CPUs: the quota rounded down (a 1.5-CPU quota runs 1 process at full speed, not
        2 throttled), never below 1."""
        if self.quota is None:
            return max(1, self.affinity)
        return max(1, min(self.affinity, math.floor(self.quota)))

    def describe(self) -> str:
        quota = "no cgroup CPU quota" if self.quota is None else f"cgroup CPU quota {self.quota:g} ({self.source})"
        return f"{self.usable} usable CPUs: affinity mask {self.affinity}, {quota}"


def cpu_budget(root: str = "/") -> CpuBudget:
    quota, source = cgroup_quota(root)
    return CpuBudget(len(os.sched_getaffinity(0)), quota, source)


def cgroup_quota(root: str = "/") -> tuple[float | None, str]:
    """The smallest CPU quota over the process's cgroup and its ancestors, in CPUs, and the file
    that set it; (None, "") when there is none or nothing can be read (not Linux, no cgroup fs)."""
    base = Path(root)
    try:
        memberships = (base / "proc/self/cgroup").read_text().splitlines()
        mounts = (base / "proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None, ""
    found: list[tuple[float, str]] = []
    for line in memberships:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":  # v2: one unified hierarchy
            mount = _mount(mounts, "cgroup2", None)
            reader = _v2_quota
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's hierarchy
            mount = _mount(mounts, "cgroup", "cpu")
            reader = _v1_quota
        else:
            continue
        if mount is None:
            continue
        for directory in _up_to_root(base, mount, path):
            quota = reader(directory)
            if quota is not None:
                found.append((quota, str(PurePosixPath("/") / directory.relative_to(base))))
    if not found:
        return None, ""
    return min(found)


def _mount(mounts: list[str], fstype: str, controller: str | None) -> tuple[str, str] | None:
    """(root of the mount inside the hierarchy, mount point) of the first cgroup mount of ``fstype``
    (with ``controller`` among its super options, for v1). mountinfo(5): fields, then " - " fstype
    source super-options."""
    for line in mounts:
        fields, sep, tail = line.partition(" - ")
        parts, tail_parts = fields.split(), tail.split()
        if not sep or len(parts) < 5 or len(tail_parts) < 3 or tail_parts[0] != fstype:
            continue
        if controller is not None and controller not in tail_parts[2].split(","):
            continue
        return parts[3], parts[4]
    return None


def _up_to_root(base: Path, mount: tuple[str, str], path: str) -> list[Path]:
    """The cgroup directories from the process's own up to the mount point. A path outside the
    mount's root (a cgroup namespace shows "/" and the mount's root is the container's own) is
    read at the mount point alone."""
    mount_root, mount_point = PurePosixPath(mount[0]), PurePosixPath(mount[1])
    own = PurePosixPath(path)
    if own.is_relative_to(mount_root) and ".." not in own.parts:
        relative = own.relative_to(mount_root)
    else:
        relative = PurePosixPath(".")
    top = base / mount_point.relative_to("/")
    directories = [top / relative]
    while directories[-1] != top:
        directories.append(directories[-1].parent)
    return directories


def _v2_quota(directory: Path) -> float | None:
    """cpu.max: "$MAX $PERIOD", "max" when unlimited."""
    try:
        quota, _, period = (directory / "cpu.max").read_text().strip().partition(" ")
        return None if quota == "max" else _cpus(int(quota), int(period or "100000"))
    except (OSError, ValueError):
        return None


def _v1_quota(directory: Path) -> float | None:
    """cpu.cfs_quota_us (-1 when unlimited) over cpu.cfs_period_us."""
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text().strip())
        period = int((directory / "cpu.cfs_period_us").read_text().strip())
        return None if quota < 0 else _cpus(quota, period)
    except (OSError, ValueError):
        return None


def _cpus(quota: int, period: int) -> float | None:
    return quota / period if quota > 0 and period > 0 else None
