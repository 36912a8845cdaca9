"""pipeline/fuzz.py: the dictionary, seeds and log parsing; and (slow) the real targets, each fuzzed
for a few seconds after replaying every committed regression input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline import fuzz
from pipeline.errors import UsageError

from .conftest import REPO

# A libFuzzer session's tail, as libFuzzer 14 prints it.
LOG = """\
INFO: Seed: 1234
#2	INITED cov: 812 ft: 1203 corp: 150/61Kb exec/s: 0 rss: 60Mb
#4096	pulse  cov: 830 ft: 1290 corp: 160/63Kb lim: 4096 exec/s: 2048 rss: 70Mb
#10000	DONE   cov: 845 ft: 1330 corp: 171/66Kb lim: 4096 exec/s: 1111 rss: 72Mb
Done 10000 runs in 9 second(s)
stat::number_of_executed_units: 10000
stat::average_exec_per_sec:     1111
"""


def test_parse_fuzzer_log_takes_the_final_numbers() -> None:
    assert fuzz.parse_fuzzer_log(LOG) == (10000, 845, 1330, 171)
    assert fuzz.parse_fuzzer_log("") == (0, 0, 0, 0)


def test_dictionary_has_every_field_key_in_libfuzzer_syntax() -> None:
    text = fuzz.dictionary_text()
    entries = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all(re.fullmatch(r'[A-Za-z0-9_.]+="(\\x[0-9a-f]{2})+"', e) for e in entries), entries[:3]
    # ModelProto.graph: field 7, length-delimited -> 0x3a; TensorProto.raw_data: 9/LEN -> 0x4a;
    # a two-byte key: ModelProto.functions (25 << 3 | 2 = 202 -> 0xca 0x01)
    assert 'ModelProto_graph_2="\\x3a"' in entries
    assert 'TensorProto_raw_data_2="\\x4a"' in entries
    assert 'ModelProto_functions_2="\\xca\\x01"' in entries


def test_run_target_seed_layout() -> None:
    seed = fuzz.Seed(name="s", model=b"MODEL", feed=b"\x01\x02")
    run = next(t for t in fuzz.TARGETS if t.name == "run")
    decode = next(t for t in fuzz.TARGETS if t.name == "decode")
    assert seed.for_target(run) == b"\x05\x00\x00\x00MODEL\x01\x02"
    assert seed.for_target(decode) == b"MODEL"


def test_unknown_target_is_a_usage_error_with_a_suggestion() -> None:
    with pytest.raises(UsageError, match="did you mean 'session'"):
        fuzz.select_targets(["sesion"])


def test_format_table_shows_crashes() -> None:
    ok = fuzz.FuzzResult(target="decode", execs=100, seconds=2.0, coverage=5, features=7, corpus=3, crashes=(),
                         exit_code=0, log="l")
    bad = fuzz.FuzzResult(target="run", execs=10, seconds=1.0, coverage=5, features=7, corpus=3,
                          crashes=("/x/crash-abc",), exit_code=1, log="l")
    table = fuzz.format_table([ok, bad])
    assert "decode" in table and "crash-abc" in table and ok.ok and not bad.ok


def _clang_or_skip() -> None:
    try:
        fuzz.ensure_clang(install=True)  # root with apt-get (CI): installed, saying so
    except Exception as exc:  # the message names the apt-get command
        pytest.skip(str(exc))


@pytest.mark.slow
@pytest.mark.sanitizer  # its clang ASan+UBSan build: `nox -s hardening` (and `nox -s fuzz` for long runs)
def test_every_target_replays_regressions_and_fuzzes_clean(tmp_path: Path) -> None:
    """CI's bounded run: each target 4 s from the test models' seeds (the onnx node cases, ~25 s to
    generate, seed the long runs of `nox -s fuzz`) after replaying the committed regression inputs."""
    _clang_or_skip()
    # The folder `nox -s fuzz` uses: its build is incremental and shared with test_hardening.py.
    work = REPO / "build" / "fuzz"
    report = tmp_path / "fuzz.json"
    results = fuzz.run_fuzz(REPO, work, seconds=4, node_case_limit=0, report=report)
    assert [r.target for r in results] == list(fuzz.TARGET_NAMES)
    for r in results:
        assert r.ok, f"{r.target}: {r.crashes} (log {r.log})"
        assert r.execs > 0 and r.coverage > 100, r
    saved = json.loads(report.read_text())
    assert [t["target"] for t in saved["targets"]] == list(fuzz.TARGET_NAMES)
