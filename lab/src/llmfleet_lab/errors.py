"""The one error type the lab raises: what failed, the evidence, and what to do."""

from __future__ import annotations


class LabError(Exception):
    """A lab operation failed; ``detail`` holds evidence (a log tail), ``hint`` the next step."""

    def __init__(self, message: str, *, detail: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.hint = hint
