"""mosaicrt's build-and-release pipeline: the library behind the nox sessions.

Public entry points: :func:`pipeline.matrix.load_matrix` (the frozen matrix),
:func:`pipeline.plan.plan` (cells on this host), :func:`pipeline.build.build`,
:func:`pipeline.wheeltest.test_wheels`, and the CLI ``python -m pipeline``.
"""
