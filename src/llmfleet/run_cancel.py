"""Ctrl-C during a run: the first asks ansible-runner to stop ansible, the second kills it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from llmfleet.run_display import RunProgress


@contextlib.contextmanager
def sigint_to_cancel(progress: RunProgress) -> Iterator[None]:
    """First Ctrl-C asks ansible-runner to stop the run; a second one raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        # no printing here: the handler may interrupt the main thread inside a console.print
        if progress.cancel_requested:
            _kill_group(progress.ansible_pid)
            raise KeyboardInterrupt
        progress.cancel_requested = True

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _kill_group(pid: int | None) -> None:
    """SIGKILL ansible-playbook's process group (its own session, never ours)."""
    if pid is None:
        return
    with contextlib.suppress(OSError):
        group = os.getpgid(pid)
        if group != os.getpgrp():
            os.killpg(group, signal.SIGKILL)
