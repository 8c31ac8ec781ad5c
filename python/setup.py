"""Builds the tezip Python module with CMake and packs it with what it loads at run time.

The package holds a small install prefix of its own (CMake component `python`):
    tezip/__init__.py, torch.py
    tezip/_tezip.cpython-*.so          RPATH $ORIGIN/lib
    tezip/lib/libtezip.so.0            the core library (no libtorch)
    tezip/lib/libtezip_learned.so      PredNet, loaded on first use (built with -DTEZIP_TORCH=ON)
    tezip/lib/libtezip_mpi.so          the chunk exchange over MPI, loaded on first use (where MPI is found)
    tezip/share/tezip/models/          the shipped models, found from libtezip's folder

Environment:
    TEZIP_CMAKE_ARGS   extra configure arguments, e.g. "-DTEZIP_TORCH=OFF" (no PredNet, builds in a minute)
    TEZIP_BUILD_DIR    build in (or reuse) this CMake build folder instead of a fresh one
    TEZIP_PIP_BUILD_BASE   setuptools' build folder (default: python/build)
    CMAKE_BUILD_PARALLEL_LEVEL   build jobs (default 2)
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build import build
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
# The tezip source tree (CMakeLists.txt): this file's folder's parent for `pip install ./python`,
# the folder itself when the repository root's setup.py runs this one (`pip install .`).
ROOT = HERE if (HERE / "python" / "setup.py").exists() else HERE.parent


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(tezip VERSION ([0-9.]+)", text)
    if match is None:
        raise RuntimeError(f"no project(tezip VERSION ...) in {ROOT / 'CMakeLists.txt'}")
    return match.group(1)


def cache_value(build, name):
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    return None


class Build(build):
    def initialize_options(self):
        super().initialize_options()
        # From the repository root, build/ is CMake's: keep setuptools' files apart.
        default = "build" if ROOT != HERE else "build/pip"
        self.build_base = os.environ.get("TEZIP_PIP_BUILD_BASE", default)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("building tezip needs cmake (Debian: apt install cmake; see ../setup.sh)")
        temp = Path(self.build_temp).resolve()
        build = Path(os.environ.get("TEZIP_BUILD_DIR") or temp / "cmake").resolve()
        if not (build / "CMakeCache.txt").exists() or not os.environ.get("TEZIP_BUILD_DIR"):
            args = [cmake, "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                    f"-DPython3_EXECUTABLE={sys.executable}", "-DTEZIP_PYTHON=ON", "-DTEZIP_TESTS=OFF"]
            args += shlex.split(os.environ.get("TEZIP_CMAKE_ARGS", ""))
            subprocess.run(args, check=True)
        if cache_value(build, "pybind11_DIR") in (None, "pybind11_DIR-NOTFOUND"):
            raise RuntimeError("CMake found no pybind11 (Debian: apt install pybind11-dev python3-dev)")
        targets = ["tezip_python"]
        if cache_value(build, "TEZIP_TORCH") in ("ON", "TRUE", "1"):
            targets.append("tezip_learned")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
        subprocess.run([cmake, "--build", str(build), "-j", jobs, "--target", *targets], check=True)

        stage = temp / "stage"
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.run([cmake, "--install", str(build), "--component", "python", "--prefix", str(stage)],
                       check=True, stdout=subprocess.DEVNULL)
        package = stage / "tezip"
        # A wheel holds no symbolic links: keep each library once, under the name it is loaded by.
        for link in [p for p in package.rglob("*") if p.is_symlink()]:
            target = link.resolve()
            link.unlink()
            shutil.move(str(target), str(link))
        dest = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        dest.mkdir(parents=True, exist_ok=True)
        for item in package.iterdir():
            out = dest / item.name
            if out.is_dir():
                shutil.rmtree(out)
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, out)


setup(
    version=project_version(),
    ext_modules=[CMakeExtension("tezip._tezip")],
    cmdclass={"build": Build, "build_ext": CMakeBuild},
)
