"""pipeline.perf: machine fingerprints, benchmark records, baselines and the comparison the release gate makes.

The release-level checks (a real release refusing a regression, accepting one within the threshold, the override
recorded in the provenance) are in test_release.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import perf

X86 = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu vme sse4_1 sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni hypervisor
processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu vme sse4_1 sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni hypervisor
"""
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes asimddp i8mm sve\nCPU implementer\t: 0x41\n"
MACHINE = perf.this_machine(X86)
LIMITS = perf.Thresholds(latency=0.10, rss=0.25)


def record(version: str, *figures: tuple[str, int, float, float | None], sha: str = "", machine: perf.Machine = MACHINE
           ) -> perf.BenchRecord:  # fmt: skip
    return perf.BenchRecord(
        wheel=f"mosaicrt-{version}-py3-none-manylinux_2_28_x86_64.whl",
        sha256=sha or version.replace(".", "") * 8,
        dist="mosaicrt",
        version=version,
        machine=machine,
        figures=tuple(
            perf.Figure(model=m, threads=t, median_ms=ms, min_ms=ms * 0.9, peer_ms=ms, peak_rss_mb=rss)
            for m, t, ms, rss in figures
        ),
        created="2026-12-01T00:00:00+00:00",
    )


def test_machine_keeps_the_dispatch_isa_and_its_fingerprint_follows_it() -> None:
    assert MACHINE.cpu == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    assert MACHINE.isa == ("avx", "avx2", "avx512_vnni", "avx512bw", "avx512f", "fma", "sse4_1", "sse4_2")
    assert perf.this_machine(X86).fingerprint == MACHINE.fingerprint
    assert perf.this_machine(X86.replace(" avx512_vnni", "")).fingerprint != MACHINE.fingerprint
    assert perf.this_machine(X86.replace(" hypervisor", "")).fingerprint == MACHINE.fingerprint  # not dispatch-relevant
    arm = perf.this_machine(ARM)
    assert arm.isa == ("asimd", "asimddp", "i8mm", "sve") and arm.cpu  # no model name: the platform's, or unknown


def test_record_round_trips_and_binds_to_sha_and_machine(tmp_path: Path) -> None:
    rec = record("0.1.0", ("resnet", 1, 50.0, 300.0), ("resnet", 2, 30.0, None))
    path = perf.write_record(tmp_path, rec)
    assert path == tmp_path / rec.sha256 / f"{MACHINE.fingerprint}.json"
    assert perf.read_record(tmp_path, rec.sha256, MACHINE.fingerprint) == rec
    assert perf.read_record(tmp_path, rec.sha256, "0" * 16) is None
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a readable benchmark record"):
        perf.read_record(tmp_path, rec.sha256, MACHINE.fingerprint)


def test_compare_names_model_threads_both_figures_and_the_threshold() -> None:
    base = record("0.1.0", ("resnet", 1, 50.0, 300.0), ("resnet", 2, 30.0, 300.0), ("squeeze", 2, 5.0, 100.0))
    same = record("0.2.0", ("resnet", 1, 54.9, 370.0), ("resnet", 2, 33.0, 300.0), ("squeeze", 2, 4.0, 100.0))
    assert perf.compare(same, base, LIMITS) == []  # +9.8 %, +10 % exactly, faster; RSS +23 %
    slow = record("0.2.0", ("resnet", 1, 50.0, 300.0), ("resnet", 2, 36.0, 400.0))
    found = [r.describe() for r in perf.compare(slow, base, LIMITS)]
    assert found == [
        "resnet at 2 threads: median latency 36.000 ms vs 30.000 ms in 0.1.0 (+20.0 %, threshold 10 %)",
        "resnet at 2 threads: peak RSS 400.000 MB vs 300.000 MB in 0.1.0 (+33.3 %, threshold 25 %)",
        "squeeze at 2 threads was benchmarked for 0.1.0 on this machine but not for this wheel",
    ]


def test_check_uses_the_last_release_below_from_the_same_machine(tmp_path: Path) -> None:
    def verdict(rec: perf.BenchRecord, *, override: bool = False, machine: perf.Machine = MACHINE) -> perf.PerfVerdict:
        return perf.check(tmp_path, dist="mosaicrt", version=rec.version, sha256=rec.sha256, machine=machine,
                          thresholds=LIMITS, override=override)  # fmt: skip

    first = record("0.1.0", ("resnet", 2, 30.0, None))
    perf.write_record(tmp_path, first)
    assert verdict(first).status == "no baseline" and verdict(first).problems == []
    assert perf.remember_release(tmp_path, first.sha256) == [
        tmp_path / "released" / "mosaicrt" / "0.1.0" / f"{MACHINE.fingerprint}.json"
    ]
    older = record("0.0.9", ("resnet", 2, 10.0, None))  # a lower release: not the baseline of 0.2.0
    perf.write_record(tmp_path, older)
    perf.remember_release(tmp_path, older.sha256)

    unbenchmarked = record("0.2.0")
    v = verdict(unbenchmarked)
    assert v.status == "not benchmarked" and "run `nox -s bench`" in v.problems[0]
    assert verdict(unbenchmarked, override=True).status == "overridden"

    slow = record("0.2.0", ("resnet", 2, 34.0, None))
    perf.write_record(tmp_path, slow)
    v = verdict(slow)
    assert (v.status, v.baseline_version) == ("regressed", "0.1.0")
    assert "resnet at 2 threads: median latency 34.000 ms vs 30.000 ms in 0.1.0 (+13.3 %, threshold 10 %)" in (
        v.problems[0]
    )
    assert "--allow-perf-regression" in v.problems[0]
    over = verdict(slow, override=True)
    assert over.status == "overridden" and over.problems == [] and over.to_dict()["regressions"]

    ok = record("0.2.0", ("resnet", 2, 32.0, None), sha="b" * 64)
    perf.write_record(tmp_path, ok)
    assert verdict(ok).status == "passed"

    elsewhere = perf.this_machine(ARM)  # another machine's baseline says nothing about this one
    assert verdict(slow, machine=elsewhere).status == "no baseline"


def test_wheel_identity() -> None:
    assert perf.wheel_identity("mosaicrt_winml-0.3.1-py3-none-win_amd64.whl") == ("mosaicrt-winml", "0.3.1")
    with pytest.raises(ValueError, match="not a wheel file name"):
        perf.wheel_identity("mosaicrt.tar.gz")
