"""The EP catalog of the winml variant: a TUF repository of EP bundles, published by the release.

* :mod:`.trust` — the trust configuration (``release/catalog.toml``) and the role keys;
* :mod:`.repository` — the TUF metadata and target files on disk;
* :mod:`.bundle` — an EP wheel + its runtime libraries as one catalog target;
* :mod:`.server` — the detached local server;
* :mod:`.release` — what ``nox -s release`` and the build step call.

The client is ``mosaicrt.catalog`` in the core's Python package.
"""
