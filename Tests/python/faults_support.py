"""Helpers the fault tests share: a process's descriptors and RSS, bounded waits."""

from __future__ import annotations

import os
import time


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def wait_for(predicate, timeout: float, what: str, interval: float = 0.05):
    """Re-checks `predicate` until it holds; fails after `timeout` (a guard, not the expected path)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
