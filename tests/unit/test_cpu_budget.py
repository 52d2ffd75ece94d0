"""``--processes auto`` from the CPUs a process may use: the cgroup quota (v1 and v2, the smallest
over the process's cgroup and its ancestors) and the affinity mask, whichever is smaller; a number
of processes above the bound is refused in one line. The cgroup files here are fixtures under a
root; tests/e2e/test_processes_host.py runs the real program in a real cgroup."""

from __future__ import annotations

from pathlib import Path

import pytest

from docllm.adapters.host.cpus import CpuBudget, cgroup_quota, cpu_budget
from docllm.entrypoints.processes import AUTO, MAX_PER_CPU, parse_processes, resolve_processes

V2_MOUNTS = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNTS = (
    "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
)


def _tree(root: Path, cgroup: str, mounts: str, files: dict[str, str]) -> str:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(cgroup)
    (root / "proc/self/mountinfo").write_text(mounts)
    for name, text in files.items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def test_v2_quota_of_the_process_cgroup(tmp_path):
    files = {"/sys/fs/cgroup/kubepods/pod1/c1/cpu.max": "150000 100000\n"}
    root = _tree(tmp_path, "0::/kubepods/pod1/c1\n", V2_MOUNTS, files)
    assert cgroup_quota(root) == (1.5, "/sys/fs/cgroup/kubepods/pod1/c1")


def test_v2_the_smallest_quota_of_the_ancestors_counts(tmp_path):
    root = _tree(
        tmp_path,
        "0::/kubepods/pod1/c1\n",
        V2_MOUNTS,
        {
            "/sys/fs/cgroup/kubepods/pod1/c1/cpu.max": "max 100000\n",
            "/sys/fs/cgroup/kubepods/pod1/cpu.max": "50000 100000\n",  # the pod's: half a CPU
            "/sys/fs/cgroup/kubepods/cpu.max": "800000 100000\n",
        },
    )
    assert cgroup_quota(root) == (0.5, "/sys/fs/cgroup/kubepods/pod1")


def test_v2_in_a_cgroup_namespace_reads_the_mount_point(tmp_path):
    # Inside a container with its own cgroup namespace, /proc/self/cgroup says "/" and the
    # container's own cgroup is mounted at /sys/fs/cgroup.
    root = _tree(tmp_path, "0::/\n", V2_MOUNTS, {"/sys/fs/cgroup/cpu.max": "100000 100000\n"})
    assert cgroup_quota(root) == (1.0, "/sys/fs/cgroup")


def test_v2_unlimited_is_no_quota(tmp_path):
    root = _tree(tmp_path, "0::/a\n", V2_MOUNTS, {"/sys/fs/cgroup/a/cpu.max": "max 100000\n"})
    assert cgroup_quota(root) == (None, "")


def test_v1_quota_over_period(tmp_path):
    root = _tree(
        tmp_path,
        "12:pids:/x\n4:cpu,cpuacct:/kubepods/pod1/c1\n1:name=systemd:/x\n",
        V1_MOUNTS,
        {
            "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us": "-1\n",
            "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us": "100000\n",
            "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_quota_us": "200000\n",
            "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_period_us": "100000\n",
        },
    )
    assert cgroup_quota(root) == (2.0, "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1")


def test_v1_unlimited_and_a_missing_controller_are_no_quota(tmp_path):
    root = _tree(
        tmp_path / "a",
        "4:cpu,cpuacct:/\n",
        V1_MOUNTS,
        {
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        },
    )
    assert cgroup_quota(root) == (None, "")
    root = _tree(tmp_path / "b", "12:pids:/x\n", V1_MOUNTS, {})
    assert cgroup_quota(root) == (None, "")
    assert cgroup_quota(str(tmp_path / "nothing")) == (None, "")  # not Linux: no /proc


def test_hybrid_v1_cpu_and_v2_unified_take_the_smaller(tmp_path):
    mounts = V1_MOUNTS + "40 31 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
    root = _tree(
        tmp_path,
        "4:cpu,cpuacct:/a\n0::/a\n",
        mounts,
        {
            "/sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us": "300000\n",
            "/sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_period_us": "100000\n",
            "/sys/fs/cgroup/unified/a/cpu.max": "100000 100000\n",
        },
    )
    assert cgroup_quota(root) == (1.0, "/sys/fs/cgroup/unified/a")


@pytest.mark.parametrize(
    ("affinity", "quota", "usable"),
    [(16, 1.0, 1), (16, None, 16), (2, 8.0, 2), (16, 1.5, 1), (16, 0.25, 1), (4, 3.9, 3)],
)
def test_usable_is_the_smaller_rounded_down_and_at_least_one(affinity, quota, usable):
    assert CpuBudget(affinity, quota, "x").usable == usable


def test_auto_is_the_usable_cpus_and_a_number_above_the_bound_is_refused():
    one = CpuBudget(16, 1.0, "/sys/fs/cgroup")
    assert parse_processes("auto") == AUTO and parse_processes(" AUTO ") == AUTO
    assert resolve_processes(AUTO, one) == 1
    assert resolve_processes(MAX_PER_CPU, one) == MAX_PER_CPU
    with pytest.raises(ValueError) as refused:
        resolve_processes(MAX_PER_CPU + 1, one)
    message = str(refused.value)
    assert "\n" not in message and f"--processes {MAX_PER_CPU + 1}" in message
    assert "cgroup CPU quota 1 (/sys/fs/cgroup)" in message and "affinity mask 16" in message


def test_this_host_has_a_budget():
    budget = cpu_budget()
    assert 1 <= budget.usable <= budget.affinity
