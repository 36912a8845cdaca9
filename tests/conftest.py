"""The repository's test suite (`nox -s ci`).

``tests/wheel`` is not collected here: it is the wheel suite, which runs inside a fresh venv
against an installed wheel (``nox -s test``). CI still runs it: the slow end-to-end test in
``tests/pipeline/test_e2e_release.py`` builds the host wheels and runs the test step on the core wheel.
"""

# tests/eps/<name>: EP wheel suites; tests/winml: the winml variant's suite — all run in fresh venvs (the
# release test in tests/pipeline/test_e2e_release.py runs the winml suite on the wheel it builds)
collect_ignore = ["wheel", "eps", "winml"]
