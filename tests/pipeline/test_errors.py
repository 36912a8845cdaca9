"""pipeline.errors: one exit code per kind, suggestions from difflib."""

from __future__ import annotations

from pipeline import errors


def test_exit_codes_are_distinct_and_skip_pytests_5() -> None:
    kinds = [
        errors.UsageError,
        errors.MatrixError,
        errors.VersionError,
        errors.BuildError,
        errors.TestFailure,
        errors.ToolchainError,
        errors.EnvironmentProblem,
    ]
    codes = [k.exit_code for k in kinds]
    assert len(set(codes)) == len(codes)
    assert 5 not in [int(c) for c in errors.ExitCode]
    assert all(c != 0 for c in codes)


def test_matrix_error_format() -> None:
    e = errors.MatrixError("matrix/targets.toml", "target.x.arch", "bad")
    assert str(e) == "matrix/targets.toml: target.x.arch: bad"
    assert str(errors.MatrixError("matrix/a.toml", "", "file is missing")) == "matrix/a.toml: file is missing"


def test_suggestions() -> None:
    assert errors.suggest("pth", ["path", "kind"]) == " (did you mean 'path'?)"
    assert errors.suggest("zzz", ["path", "kind"]) == ""
    assert errors.choices_hint("zzz", ["b", "a"]) == " (valid: a, b)"
