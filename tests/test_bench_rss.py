"""The benchmark's peak RSS is each engine's own: a worker started by a parent that once held a
lot of memory (the benchmark converts and quantizes in-process) must not report the parent's
high-water mark, which Linux carries across fork and exec."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import bench_common  # noqa: E402

MB = 2**20


def _child(megabytes: int) -> list[str]:
    """A process that touches `megabytes` MB and exits."""
    return [sys.executable, "-c", f"b = bytearray({megabytes} * {MB}); b[::4096] = b'x' * len(b[::4096])"]


def test_peak_rss_is_the_workers_own_not_the_parents():
    held = bytearray(600 * MB)
    held[::4096] = b"y" * len(held[::4096])  # the parent now peaks above 600 MB
    small, large = bench_common.run_measured(_child(40)), bench_common.run_measured(_child(240))
    assert small.returncode == 0 and large.returncode == 0
    assert 40 <= small.peak_rss_mb < 200, small.peak_rss_mb
    assert 240 <= large.peak_rss_mb < 400, large.peak_rss_mb
    del held


def test_a_failing_worker_keeps_its_exit_status():
    r = bench_common.run_measured([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"])
    assert r.returncode == 3 and r.stdout.strip() == "out" and r.peak_rss_mb > 0
