"""Developer tool: run the onnx backend node cases through mosaicrt and print results.

    MOSAICRT_LIBRARY=build/dev/libmosaicrt.so PYTHONPATH=core/python python3 tools/run_node_tests.py -k conv
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "wheel"))

from node_cases import run_all


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", default="", help="only cases whose name contains this substring")
    parser.add_argument("-q", action="store_true", help="print only failures and totals")
    parser.add_argument("--by-op", action="store_true", help="print pass/total per operator")
    args = parser.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    per_op: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for r in run_all(args.k):
        counts[r.status] += 1
        for op in r.ops:
            per_op[op][r.status] += 1
        if (r.status != "pass" or not args.q) and not (args.q and r.status == "unsupported"):
            print(f"{r.status.upper():12s} {r.name}  {r.detail[:300]}", flush=True)
    if args.by_op:
        for op in sorted(per_op):
            c = per_op[op]
            print(f"{op:32s} pass {c['pass']:4d}  fail {c['fail']:4d}  unsupported {c['unsupported']:4d}")
    total = sum(counts.values())
    print(f"TOTAL {total}: pass {counts['pass']}, fail {counts['fail']}, unsupported {counts['unsupported']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
