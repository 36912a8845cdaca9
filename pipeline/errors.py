"""One error type per kind of failure, each with its own exit code.

Every message is one line that says what happened and how to fix it. Low-level
exceptions (OSError, tomllib errors, subprocess failures) are translated into
these at the boundary where they happen; the CLI prints ``error: <message>`` and
exits with :attr:`PipelineError.exit_code`.

Exit code 5 is deliberately unused: pytest uses it for "no tests collected".
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1
    USAGE = 2
    MATRIX = 3
    VERSION = 4
    BUILD = 6
    TEST = 7
    TOOLCHAIN = 8
    ENVIRONMENT = 9
    RELEASE = 10
    VERIFY = 11
    PUBLISH = 12
    CROSSCHECK = 13
    INTERNAL = 70


class PipelineError(Exception):
    """Base class; subclasses set the exit code."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(PipelineError):
    """Bad command-line input (unknown target/component name, conflicting flags)."""

    exit_code = ExitCode.USAGE


class MatrixError(PipelineError):
    """matrix/*.toml is malformed, inconsistent, or violates the platform policy."""

    exit_code = ExitCode.MATRIX

    def __init__(self, file: str, key: str, problem: str) -> None:
        self.file = file
        self.key = key
        self.problem = problem
        where = f"{file}: {key}" if key else file
        super().__init__(f"{where}: {problem}")


class VersionError(PipelineError):
    """A component's VERSION file is missing or not MAJOR.MINOR.PATCH."""

    exit_code = ExitCode.VERSION


class BuildError(PipelineError):
    """One or more build cells failed (details in the build report)."""

    exit_code = ExitCode.BUILD


class TestFailure(PipelineError):
    """One or more wheels failed their tests."""

    __test__ = False  # not a pytest test class
    exit_code = ExitCode.TEST


class ToolchainError(PipelineError):
    """An explicitly requested cell cannot be built on this machine."""

    exit_code = ExitCode.TOOLCHAIN


class EnvironmentProblem(PipelineError):
    """A tool the pipeline needs (conan, build, auditwheel, a Python) is missing."""

    exit_code = ExitCode.ENVIRONMENT


class ReleaseRefused(PipelineError):
    """The release gate refused one or more artifacts (untested, failed, changed without a new VERSION, ...)."""

    exit_code = ExitCode.RELEASE


class VerificationError(PipelineError):
    """A wheel's signature, provenance, SBOM or test attestation does not check out against the trust root."""

    exit_code = ExitCode.VERIFY


class PublishError(PipelineError):
    """The package index cannot be reached, refused an upload, or holds something that conflicts."""

    exit_code = ExitCode.PUBLISH


class CrosscheckFailure(PipelineError):
    """A cross target failed a crosscheck (toolchain, build, machine type, Arm kernels or native tests)."""

    exit_code = ExitCode.CROSSCHECK


def suggest(word: str, choices: Iterable[str]) -> str:
    """Return " (did you mean 'x'?)" for the closest choice, or "" when none is close."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{matches[0]}'?)" if matches else ""


def choices_hint(word: str, choices: Iterable[str]) -> str:
    """A suggestion if one is close, else the list of valid values."""
    options = sorted(choices)
    hint = suggest(word, options)
    return hint or f" (valid: {', '.join(options) if options else 'none'})"
