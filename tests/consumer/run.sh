#!/usr/bin/env bash
# ctest install_consumer: installs the build tree into a temporary prefix, checks the installed
# layout, makes an archive with the installed CLI, then builds tests/consumer against the prefix
# twice (find_package(tezip), then pkg-config) and runs it on that archive.
#   run.sh BUILD_DIR SOURCE_DIR CMAKE CXX_COMPILER LEARNED(ON|OFF) MPI(ON|OFF)
set -euo pipefail
build=$1 source=$2 cmake=$3 cxx=$4 learned=$5 mpi=$6
work=$(mktemp -d "${TMPDIR:-/tmp}/tezip-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
unset TEZIP_MODEL_PATH TEZIP_LEARNED_MODULE
mkdir -p "$work/prefix"
prefix=$(realpath "$work/prefix")

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=
for d in lib lib64 lib/*-linux-gnu; do [ -e "$prefix/$d/libtezip.so" ] && { libdir=$d; break; }; done
[ -n "$libdir" ] || { echo "no libtezip.so under $prefix"; cat "$work/install.log"; exit 1; }
expect=("$libdir/libtezip.so" "$libdir/libtezip.so.0" "bin/tezip" "include/tezip/loader/reader.hpp"
        "include/tezip/loader/stream.hpp" "share/tezip/models/prednet-small.tzm" "share/tezip/models/prednet-small.md"
        "$libdir/cmake/tezip/tezipConfig.cmake" "$libdir/cmake/tezip/tezipConfigVersion.cmake" "$libdir/pkgconfig/tezip.pc")
[ "$learned" = ON ] && expect+=("$libdir/libtezip_learned.so")
[ "$mpi" = ON ] && expect+=("$libdir/libtezip_mpi.so")
for f in "${expect[@]}"; do [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }; done
[ "$(readlink "$prefix/$libdir/libtezip.so.0")" = "$(basename "$(ls "$prefix/$libdir"/libtezip.so.0.*)")" ] || { echo "libtezip.so.0 is not a link to the versioned file"; exit 1; }
if find "$prefix/include" -name '*.hpp' -print0 | xargs -0 grep -l '#include <torch' ; then echo "an installed header includes torch"; exit 1; fi
# The modules' dlopen tables are internal (io/images/module_table.hpp): not in the public headers.
if grep -rl 'struct ImageModule' "$prefix/include"; then echo "an installed header defines the images module's table"; exit 1; fi
[ ! -e "$prefix/include/tezip/io/images" ] || { echo "io/images/ (the images module) is installed"; exit 1; }
[ ! -e "$prefix/include/tezip/loader/mpi" ] || { echo "loader/mpi/ (the MPI module) is installed"; exit 1; }

# The installed CLI runs from the prefix alone (RPATH $ORIGIN/../lib), without the build tree.
archive="$work/sample.tzp"
env -u LD_LIBRARY_PATH "$prefix/bin/tezip" compress "$source/datasets/sample/castle16" -o "$archive" --gop 4 -q
"$prefix/bin/tezip" info "$archive" >/dev/null
# A PredNet archive (the installed default model, exact arithmetic): made and decoded with no
# libtorch at all ($TEZIP_LEARNED_MODULE points nowhere); the consumer checks none is mapped.
prednet="$work/prednet.tzp"
TEZIP_LEARNED_MODULE="$work/none.so" env -u LD_LIBRARY_PATH "$prefix/bin/tezip" compress "$source/datasets/sample/mire" \
  -o "$prednet" --predictor prednet --gop 8 -q
TEZIP_LEARNED_MODULE="$work/none.so" "$prefix/bin/tezip" verify "$prednet" --against "$source/datasets/sample/mire" -q

echo "== find_package(tezip)"
"$cmake" -S "$source/tests/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/consumer" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/consumer/tezip_consumer" "$archive" "$prefix"
"$work/consumer/tezip_consumer" "$prednet"

echo "== pkg-config tezip"
flags=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs tezip)
"$cxx" -std=c++20 -O1 "$source/tests/consumer/main.cpp" -o "$work/consumer_pc" $flags -Wl,-rpath,"$prefix/$libdir"
"$work/consumer_pc" "$archive" "$prefix"
"$work/consumer_pc" "$prednet"
