"""The suite stops in one line, before any test, when the disk is too full for it (conftest.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import NEEDS_FREE_GB, REPO

# pytest on one quick file, with shutil.disk_usage reporting `free` bytes on every disk
RUN = """
import collections, shutil, sys
import pytest
shutil.disk_usage = lambda path: collections.namedtuple("usage", "total used free")(2**40, 0, {free})
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "tests/test_text_split.py"]))
"""


@pytest.mark.parametrize("free_gb, stops", [(NEEDS_FREE_GB - 0.5, True), (NEEDS_FREE_GB + 0.5, False)])
def test_full_disk_stops_the_run_before_any_test(free_gb, stops):
    run = subprocess.run(
        [sys.executable, "-c", RUN.format(free=int(free_gb * 2**30))],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if stops:
        assert run.returncode == 2, run.stdout + run.stderr
        assert f"only {free_gb:.1f} GB free" in run.stdout and "passed" not in run.stdout
    else:
        assert run.returncode == 0, run.stdout + run.stderr
        assert "passed" in run.stdout
