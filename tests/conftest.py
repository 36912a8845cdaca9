"""The repository's test suite (`nox -s ci`).

``tests/wheel`` is not collected here: it is the wheel suite, which runs inside a fresh venv
against an installed wheel (``nox -s test``). CI still runs it: the slow end-to-end test in
``tests/pipeline/test_e2e.py`` builds the core wheel and runs the test step on it.
"""

collect_ignore = ["wheel", "eps"]  # tests/eps/<name>: EP wheel suites, also run in fresh venvs
