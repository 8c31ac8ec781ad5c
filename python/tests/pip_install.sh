#!/usr/bin/env bash
# ctest python_pip_install: `pip install --no-build-isolation ./python` into a fresh virtual
# environment (Debian's python3 with --system-site-packages: numpy, setuptools, torch), offline;
# then, from outside the source tree and without PYTHONPATH: import tezip (no libtorch mapped,
# torch not imported), and the module's tests against the installed package.
#   pip_install.sh SOURCE_DIR BUILD_DIR PYTHON TEZIP_BINARY LEARNED(ON|OFF)
set -euo pipefail
source=$1 build=$2 python=$3 binary=$4 learned=$5
work=$(mktemp -d "${TMPDIR:-/tmp}/tezip-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH

"$python" -m venv --system-site-packages "$work/venv"
py="$work/venv/bin/python"
# TEZIP_BUILD_DIR: reuse this build tree's CMake configuration (a fresh build of the learned module
# takes minutes); the package is still assembled by `cmake --install --component python`.
TEZIP_BUILD_DIR="$build" TEZIP_PIP_BUILD_BASE="$work/setuptools" \
  "$py" -m pip install --no-build-isolation --no-index --disable-pip-version-check -q "$source/python" \
  >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; exit 1; }

cd "$work"
"$py" - "$work/venv" "$learned" <<'PY'
import os, sys, time
venv, learned = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
import tezip
took = time.perf_counter() - t0
import importlib.metadata
assert importlib.metadata.version("tezip") == tezip.__version__, "package and module versions differ"
package = os.path.dirname(tezip.__file__)
assert package.startswith(venv), f"tezip imported from {package}, not from the virtual environment"
maps = open("/proc/self/maps").read()
assert "libtorch" not in maps, "import tezip mapped libtorch"
assert "libmpi" not in maps, "import tezip mapped Open MPI (the MPI module loads on first use of comm=)"
assert "torch" not in sys.modules, "import tezip imported torch"
assert os.path.join(package, "lib", "libtezip.so.0") in maps, "the module does not use the packaged libtezip"
assert os.path.isfile(os.path.join(package, "share", "tezip", "models", "prednet-small.tzm"))
if learned == "ON":
    assert os.path.isfile(os.path.join(package, "lib", "libtezip_learned.so"))
if tezip.built_with_mpi:
    assert os.path.isfile(os.path.join(package, "lib", "libtezip_mpi.so"))
rss = [l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]
libs = len({l.split()[-1] for l in maps.splitlines() if ".so" in l})
print(f"import tezip: {took * 1000:.0f} ms, RSS {int(rss) // 1024} MB, {libs} shared objects; from {package}")
PY
TEZIP_BINARY="$binary" "$py" "$source/python/tests/test_tezip.py"
# tezip.torch brings the user's torch (here Debian's python3-torch), at Python level.
"$py" -c "import tezip, sys; assert 'torch' not in sys.modules; import tezip.torch; assert 'torch' in sys.modules; print('tezip.torch with torch', sys.modules['torch'].__version__)"
