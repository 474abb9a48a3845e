"""The one error type for invalid retry configuration."""

from __future__ import annotations


class RetryConfigError(ValueError):
    """Invalid policy, classification or settings input.

    ``path`` names the offending field in the YAML spelling (``spec.rules[2].onExitCodes``) so
    that the CLI and the server can point users at the exact line they must change.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)
