"""``python -m pipeline release | verify | keys``: argument handling around :mod:`pipeline.release`."""

from __future__ import annotations

import argparse
import configparser
import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

from . import report
from .errors import ReleaseRefused, UsageError, VerificationError
from .index import fetch, list_files, list_projects, start_local_index, stop_local_index
from .layout import Layout
from .matrix import Matrix, Target
from .perf import Thresholds
from .plan import Selection
from .publish import Index
from .signing import (
    KEY_ENV,
    create_dev_key,
    default_trust_files,
    dev_key_path,
    generate_ci_key,
    load_signer,
    load_trust,
)
from .verify import Verdict, verify_file, verify_wheel


def release(matrix: Matrix, sel: Selection, host: Target | None, layout: Layout, args: argparse.Namespace) -> int:
    """Build → test → gate → stage (attest, sign) → verify → publish → tag, each step handed the previous
    step's result (``--no-build``: the build and test steps only check what is already there)."""
    from .cli import raise_for_tests, run_build, run_tests
    from .release import ReleaseOptions, gate, publish, raise_refused

    if args.stop_index:
        stopped = stop_local_index(layout.index_state)
        print("stopped the local index" if stopped else "the local index was not running")
        from .catalog.release import stop_server

        print("stopped the EP catalog server" if stop_server(layout) else "the EP catalog server was not running")
        return 0
    built, _ = run_build(matrix, sel, host, layout, jobs=args.jobs, check_only=args.no_build)
    tested = run_tests(
        matrix, host, layout, [c.wheel for c in built.wheels() if c.wheel], check_only=args.no_build
    )
    if not args.no_build:
        raise_for_tests(tested)
    for v in tested.missing_pythons:
        print(f"note: CPython {v} not found here: its test record is not required by this release")
    override = ("--allow-perf-regression",) if args.allow_perf_regression else ()
    opts = ReleaseOptions(
        tag=not args.no_tag,
        allow_dirty=args.allow_dirty,
        invocation=("python", "-m", "pipeline", "release", *_selection_args(sel), *override),
        perf_thresholds=Thresholds(
            latency=matrix.policy.perf_latency_regression, rss=matrix.policy.perf_rss_regression
        ),
        allow_perf_regression=args.allow_perf_regression,
    )
    external = _external_index(args)
    gated, missing_cells = gate(built, tested, layout, opts, external_index=external is not None)
    for g in gated:
        if g.performance is not None:
            print(f"[performance] {g.artifact.wheel.name}: {g.performance.status} ({g.performance.detail})")
    raise_refused(gated, missing_cells)
    if not gated:
        raise ReleaseRefused("nothing to release: no buildable cell for this machine (see `nox -s matrix`)")
    if not os.environ.get(KEY_ENV) and not dev_key_path().exists():
        created = create_dev_key()
        print(
            f"created development signing key {created.keyid[:16]} at {created.origin} (mode 0600),"
            " trusted on this machine only; consumers trust release/trust-root.json"
        )
    signer = load_signer()
    trust = load_trust(args.trust_root or default_trust_files(layout.root))
    print(f"signing with the {signer.source} key {signer.keyid[:16]} ({signer.origin})")
    index = external or Index.managed(start_local_index(layout.index_state))
    required = [p.version for p in tested.pythons]
    result = publish(gated, layout, signer=signer, trust=trust, index=index, opts=opts, required=required)
    rows = [(r.wheel, r.sha256[:16], r.status, r.tag, r.tag_status) for r in result.rows]
    print(report.table(("wheel", "sha256", "index", "tag", "tag status"), rows))
    catalog = None
    if matrix.has_ep_catalog:  # a winml variant consumes it, or an EP is published in it
        from .catalog.release import publish_eps

        released = [(g.artifact.cell, g.artifact.wheel, g.artifact.sha256) for g in gated]
        catalog = publish_eps(layout, released)
    layout.release_report.parent.mkdir(parents=True, exist_ok=True)
    document = json.loads(result.to_json())
    if catalog is not None:
        document.update(catalog.to_dict())
    layout.release_report.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"release report: {layout.release_report}")
    pins = " ".join(sorted({f"{g.artifact.cell.dist}=={g.artifact.cell.component.version}" for g in gated}))
    if index.local is not None:
        print(
            f"\nthe local index {index.simple_url} keeps running (stop it: nox -s release -- --stop-index)."
            f" Install from it (PyPI serves the dependencies such as numpy):\n"
            f"  pip install --index-url {index.simple_url} --extra-index-url https://pypi.org/simple/ {pins}\n"
            f"check what it serves:\n  nox -s verify -- {index.simple_url}"
        )
    if catalog is None:
        return 0
    print(
        f"\nthe EP catalog {catalog.url} keeps running too ({len(catalog.targets)} certified EP bundle(s)). Point a"
        f" mosaicrt-winml install at it and opt in to EP download (on by default on Windows ≥ the policy's build):\n"
        f"  MOSAICRT_EP_CATALOG_URL={catalog.url} MOSAICRT_DYNAMIC_EP_DOWNLOAD=1 python your_app.py"
    )
    return 0


def _selection_args(sel: Selection) -> list[str]:
    out = []
    for flag, values in (("--target", sel.targets), ("--component", sel.components), ("--variant", sel.variants)):
        for v in values:
            out += [flag, v]
    return out


def _external_index(args: argparse.Namespace) -> Index | None:
    """An index configured the twine way, or None for the managed local index."""
    env_url = os.environ.get("TWINE_REPOSITORY_URL")
    env_repo = os.environ.get("TWINE_REPOSITORY")
    if not (args.repository or args.repository_url or env_url or env_repo):
        return None
    if args.repository_url:
        twine_args: tuple[str, ...] = ("--repository-url", args.repository_url)
        upload_url = args.repository_url
    elif args.repository:
        twine_args = ("--repository", args.repository)
        upload_url = _pypirc_url(args.repository)
    else:
        twine_args = ()
        upload_url = env_url or _pypirc_url(env_repo or "")
    simple = args.index_url or _simple_from_upload(upload_url)
    if simple is None:
        raise UsageError(
            f"cannot tell the simple index URL of {upload_url or args.repository}: pass --index-url"
            " (it is read to know what the index already holds)"
        )
    return Index(simple_url=simple.rstrip("/") + "/", twine_args=twine_args, env={})


def _pypirc_url(name: str) -> str | None:
    if name in ("pypi", ""):
        return "https://upload.pypi.org/legacy/" if name else None
    if name == "testpypi":
        return "https://test.pypi.org/legacy/"
    cfg = configparser.RawConfigParser()
    cfg.read(Path.home() / ".pypirc")
    return cfg.get(name, "repository", fallback=None)


def _simple_from_upload(url: str | None) -> str | None:
    if not url:
        return None
    known = {
        "https://upload.pypi.org/legacy/": "https://pypi.org/simple/",
        "https://test.pypi.org/legacy/": "https://test.pypi.org/simple/",
    }
    if url in known:
        return known[url]
    if "legacy" in url:
        return None
    return url.rstrip("/") + "/simple/"  # pypiserver-style: uploads to /, serves /simple/


# --------------------------------------------------------------------------------------


def verify(args: argparse.Namespace, root: Path) -> int:
    files = args.trust_root or default_trust_files(root if root.is_dir() else None, local=not args.no_local_trust)
    trust = load_trust(files)
    print(f"trust roots: {trust.describe()} ({len(trust.keys)} key(s))")
    verdicts: list[Verdict] = []
    for what in args.what:
        verdicts += _verify_one(what, trust, args.project)
    for v in verdicts:
        print(v.summary())
    if not verdicts:
        raise VerificationError("nothing to verify: no wheel found at " + ", ".join(args.what))
    bad = [v for v in verdicts if not v.ok]
    if bad:
        raise VerificationError(f"{len(bad)} of {len(verdicts)} wheel(s) rejected: " + ", ".join(v.wheel for v in bad))
    print(f"{len(verdicts)} wheel(s) verified")
    return 0


def _verify_one(what: str, trust: Any, projects: list[str]) -> list[Verdict]:
    if not what.startswith(("http://", "https://")):
        path = Path(what)
        if not path.is_file():
            raise UsageError(f"{what}: no such wheel file (or give an http(s) URL)")
        return [verify_file(path, trust)]
    if urllib.parse.urlparse(what).path.endswith(".whl"):
        name = urllib.parse.unquote(urllib.parse.urlparse(what).path.rsplit("/", 1)[-1])
        data = fetch(what)
        if data is None:
            raise UsageError(f"{what}: not found")
        return [verify_wheel(name, data, fetch(what.split("#", 1)[0] + ".asc"), trust)]
    out = []
    for project in projects or list_projects(what):
        listing = list_files(what, project)
        for name, entry in sorted(listing.items()):
            if not name.endswith(".whl"):
                continue
            data = fetch(entry.url) or b""
            bundle = listing.get(name + ".asc")
            out.append(verify_wheel(name, data, fetch(bundle.url) if bundle else None, trust))
    return out


def keys(args: argparse.Namespace, root: Path) -> int:
    if args.create_dev:
        created = create_dev_key()
        print(f"created development key {created.keyid} at {created.origin} (mode 0600), trusted on this machine")
        return 0
    if args.generate_ci:
        seed, entry = generate_ci_key()
        print("CI signing key — store as the secret MOSAICRT_SIGNING_KEY (never commit it):")
        print(f"  {seed}")
        print("its public entry — add it to release/trust-root.json under \"keys\":")
        print(json.dumps(entry, indent=2))
        return 0
    signer = load_signer()
    trust = load_trust(default_trust_files(root))
    listed = trust.find(signer.keyid)
    print(f"signing key: {signer.source} {signer.keyid} ({signer.origin})")
    print(f"trusted by: {listed.root if listed else 'no trust root: releases signed with it are refused'}")
    print(f"trust roots: {trust.describe()}")
    print("public entry for a trust file:")
    print(json.dumps(signer.trust_entry("ci release key" if signer.source == "ci" else "development key"), indent=2))
    return 0


def catalog(args: argparse.Namespace, layout: Layout) -> int:
    """``python -m pipeline catalog ACTION``: the EP catalog outside a release."""
    from securesystemslib.signer import CryptoSigner
    from tuf.api.metadata import Root, Targets

    from .catalog.release import catalog_dir, open_repository
    from .catalog.repository import ensure_root, sign_root
    from .catalog.server import running_catalog, start_catalog_server, stop_catalog_server
    from .catalog.trust import RoleSigner, role_signers
    from .signing import parse_private_key

    repo = open_repository(layout)
    if args.action == "stop":
        print("stopped the EP catalog server" if stop_catalog_server(catalog_dir(layout)) else "it was not running")
        return 0
    if args.action == "sign-root":
        if args.root_key:
            signers = [RoleSigner("root", CryptoSigner(parse_private_key(p.read_text(), origin=str(p))), str(p))
                       for p in args.root_key]  # fmt: skip
        else:
            signers = role_signers("root", repo.config.role("root").threshold, create=True)
        online = {r: [s.signer.public_key for s in role_signers(r, repo.config.role(r).threshold, create=True)]
                  for r in ("targets", "snapshot", "timestamp")}  # fmt: skip
        version, written = sign_root(repo, root_signers=signers, online=online)
        print(f"catalog root v{version} {'written' if written else 'unchanged (same keys, not near expiry)'}:"
              f" {repo.path_of('root')}")
        return 0
    if args.action == "serve":
        ensure_root(repo)
        server = start_catalog_server(catalog_dir(layout), repo.folder, port=repo.config.local_port)
        print(f"MOSAICRT_EP_CATALOG_URL={server.url}")
        return 0
    root = repo.load("root", Root)
    if root is None:
        print(f"no EP catalog yet at {repo.folder} (nox -s release creates it)")
        return 0
    running = running_catalog(catalog_dir(layout))
    served = running.url if running else "(not running)"
    print(f"EP catalog {repo.folder}: root v{root.signed.version}, served at {served}")
    for role in ("certified", "uncertified"):
        md = repo.load(role, Targets)
        for path, t in sorted(md.signed.targets.items()) if md else []:
            if not path.endswith("/index.json"):
                print(f"  {role:11} {path}  {t.length} bytes  sha256 {t.hashes['sha256'][:16]}…")
    return 0
