"""Print the install prefix of a pip-installed oneDNN development package (for CMAKE_PREFIX_PATH).

The onednn-devel* wheels put their files into the environment's data scheme
(<prefix>/include, <prefix>/lib/cmake/dnnl), which may be an isolated build overlay rather
than sys.prefix: the prefix is found from the distribution's own file list.
"""

import importlib.metadata
import sys
from pathlib import Path

for name in sys.argv[1:]:
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        continue
    for f in dist.files or ():
        if f.name == "dnnl-config.cmake":
            # <prefix>/lib/cmake/dnnl/dnnl-config.cmake
            print(Path(str(dist.locate_file(f))).resolve().parents[3].as_posix())
            sys.exit(0)
sys.exit(1)
