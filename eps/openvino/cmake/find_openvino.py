"""Print where the `openvino` wheel of this Python keeps its C headers and libraries, and its version.

Output (one per line): the include folder, the libopenvino_c file name, the release (e.g. 2026.4.1).
Exit 1 with a message when the wheel is not installed.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path


def main() -> int:
    try:
        dist = importlib.metadata.distribution("openvino")
    except importlib.metadata.PackageNotFoundError:
        print("the openvino wheel is not installed in this Python", file=sys.stderr)
        return 1
    header = next((f for f in dist.files or () if str(f).endswith("openvino/c/openvino.h")), None)
    c_lib = next((f for f in dist.files or () if f.name.startswith("libopenvino_c.so")), None)
    if header is None or c_lib is None:
        print("the openvino wheel has no C API headers or libopenvino_c", file=sys.stderr)
        return 1
    include = Path(str(dist.locate_file(header))).resolve().parents[2]
    print(include)
    print(c_lib.name)
    print(dist.version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
