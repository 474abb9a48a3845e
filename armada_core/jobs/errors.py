"""The error every submission check raises."""

from __future__ import annotations

# Bounds on an error's text: it travels back in gRPC trailing metadata, where a client refuses
# anything over a few kilobytes ("received metadata size exceeds hard limit"), so a message
# must never echo a huge value.
MAX_PATH = 400
MAX_PROBLEM = 1000


class SubmissionError(ValueError):
    """A submission that cannot be accepted; `path` names the offending field."""

    def __init__(self, path: str, problem: str) -> None:
        path = path if len(path) <= MAX_PATH else path[:MAX_PATH] + "..."
        problem = problem if len(problem) <= MAX_PROBLEM else problem[:MAX_PROBLEM] + "..."
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem
