"""A job's processes give the CPU to requests: the idle scheduling class or a lower niceness,
and back."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from units_api.process import JOB_NICENESS, restore_cpu, yield_cpu

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getscheduler") or os.geteuid() != 0,
    reason="Linux scheduling classes; raising a priority back needs root",
)


@pytest.fixture
def sleeper() -> Iterator[int]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process.pid
    process.kill()
    process.wait()


def test_the_idle_class_and_back(sleeper: int) -> None:
    assert yield_cpu(sleeper, idle=True)
    assert os.sched_getscheduler(sleeper) == os.SCHED_IDLE
    restore_cpu(sleeper)
    assert os.sched_getscheduler(sleeper) == os.SCHED_OTHER


def test_a_lower_niceness_and_back(sleeper: int) -> None:
    assert yield_cpu(sleeper)
    assert os.sched_getscheduler(sleeper) == os.SCHED_OTHER
    assert os.getpriority(os.PRIO_PROCESS, sleeper) == JOB_NICENESS
    restore_cpu(sleeper)
    assert os.getpriority(os.PRIO_PROCESS, sleeper) == 0


def test_a_process_that_is_gone_is_left_alone() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert not yield_cpu(process.pid, idle=True)
    restore_cpu(process.pid)  # no error
