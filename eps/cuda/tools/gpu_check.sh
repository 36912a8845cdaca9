#!/usr/bin/env bash
# GPU check of the CUDA EP, for a machine with an NVIDIA GPU and driver and a copy of this repo.
#
#   eps/cuda/tools/gpu_check.sh [all|build|run]      (default: all)
#
# build  needs a package index (PyPI): a venv with the NVIDIA toolkit wheels, the core wheel, the
#        CUDA EP wheel and the native load check, all under $OUT.
# run    works offline when $OUT/dist and the test dependencies are at hand: installs the two
#        wheels by file into a fresh venv with the nvidia runtime wheels, then
#          1. the native load check (plugin + simulated device + kernels vs CPU references,
#             independent of the core's Python API),
#          2. pytest tests/eps/cuda (ops vs onnx's reference evaluator, models vs the CPU EP).
#        Where the machine has no index, point WHEELHOUSE at a folder with the needed wheels
#        (nvidia-cuda-runtime, nvidia-cublas, numpy, onnx, pytest and their dependencies).
#
# Environment: OUT (default build/cuda-helper/gpu-check), PYTHON (default python3),
# CUDA_ARCHS (default: the CMake default of eps/cuda; e.g. "90-real" for an H100/H200 only),
# JOBS (build parallelism, default 1), WHEELHOUSE (offline pip source for `run`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
mode="${1:-all}"
OUT="${OUT:-$repo/build/cuda-helper/gpu-check}"
PYTHON="${PYTHON:-python3}"
JOBS="${JOBS:-1}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

log() { printf '\n== %s\n' "$*"; }

pip_args=(--no-input --disable-pip-version-check)
if [[ -n "${WHEELHOUSE:-}" ]]; then
  pip_args+=(--no-index --find-links "$WHEELHOUSE")
fi

# The toolkit pins of eps/cuda/pyproject.toml's build-system.requires.
toolkit_reqs() {
  "$PYTHON" - "$repo/eps/cuda/pyproject.toml" <<'EOF'
import sys, tomllib
reqs = tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]
print("\n".join(r for r in reqs if r.startswith("nvidia-")))
EOF
}

do_build() {
  log "build venv ($OUT/build-venv)"
  "$PYTHON" -m venv "$OUT/build-venv"
  local py="$OUT/build-venv/bin/python"
  mapfile -t tk < <(toolkit_reqs)
  "$py" -m pip install -q "${pip_args[@]}" build scikit-build-core cmake ninja "${tk[@]}"

  log "core wheel"
  rm -rf "$OUT/dist" && mkdir -p "$OUT/dist"
  CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$py" -m build --wheel --no-isolation --outdir "$OUT/dist" "$repo/core" \
    -C build-dir="$OUT/core-build"

  log "CUDA EP wheel"
  local arch_args=()
  [[ -n "${CUDA_ARCHS:-}" ]] && arch_args=(-C "cmake.define.MOSAICRT_CUDA_ARCHITECTURES=$CUDA_ARCHS")
  local t0=$SECONDS
  CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$py" -m build --wheel --no-isolation --outdir "$OUT/dist" "$repo/eps/cuda" \
    -C build-dir="$OUT/ep-build" "${arch_args[@]}"
  echo "CUDA EP wheel built in $((SECONDS - t0)) s"
  ls -la "$OUT/dist"

  log "native load check"
  local cmake_args=(-S "$repo/eps/cuda" -B "$OUT/native" -G Ninja -DPython_EXECUTABLE="$py"
                    -DMOSAICRT_EP_CUDA_BUILD_TESTS=ON)
  [[ -n "${CUDA_ARCHS:-}" ]] && cmake_args+=("-DMOSAICRT_CUDA_ARCHITECTURES=$CUDA_ARCHS")
  "$OUT/build-venv/bin/cmake" "${cmake_args[@]}"
  "$OUT/build-venv/bin/cmake" --build "$OUT/native" -j "$JOBS" --target cuda_ep_load_check
}

do_run() {
  local core_whl ep_whl
  core_whl="$(ls "$OUT"/dist/mosaicrt-*.whl 2>/dev/null | head -1)"
  ep_whl="$(ls "$OUT"/dist/mosaicrt_ep_cuda-*.whl 2>/dev/null | head -1)"
  if [[ -z "$core_whl" || -z "$ep_whl" ]]; then
    echo "no wheels in $OUT/dist: run '$0 build' first" >&2
    exit 2
  fi
  log "GPU"
  nvidia-smi -L || echo "nvidia-smi: not available (the tests will say whether the EP sees a GPU)"

  log "test venv ($OUT/test-venv) with $(basename "$core_whl") $(basename "$ep_whl")"
  rm -rf "$OUT/test-venv"
  "$PYTHON" -m venv "$OUT/test-venv"
  local py="$OUT/test-venv/bin/python"
  # Exact files, plus the EP wheel's declared runtime dependencies (nvidia-cuda-runtime, nvidia-cublas).
  "$py" -m pip install -q "${pip_args[@]}" "$core_whl" "$ep_whl" pytest numpy onnx
  "$py" -m pip list 2>/dev/null | grep -i -E "mosaicrt|nvidia|onnx|numpy"

  local status=0
  log "native load check (--expect-gpu)"
  local so
  so="$("$py" -c 'import mosaicrt_ep_cuda as m; print(m.library_path())')"
  if [[ -x "$OUT/native/cuda_ep_load_check" ]]; then
    "$OUT/native/cuda_ep_load_check" "$so" --expect-gpu || status=1
  else
    echo "skipped: $OUT/native/cuda_ep_load_check was not built"
  fi

  log "pytest tests/eps/cuda"
  (cd "$repo/tests/eps/cuda" && "$py" -m pytest -v -rs -p no:cacheprovider .) || status=1

  log "result: $([[ $status == 0 ]] && echo PASS || echo FAIL)"
  return $status
}

case "$mode" in
  build) do_build ;;
  run) do_run ;;
  all) do_build && do_run ;;
  *) echo "usage: $0 [all|build|run]" >&2; exit 2 ;;
esac
