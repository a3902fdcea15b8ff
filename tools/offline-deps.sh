#!/usr/bin/env bash
# Gathers, on a Debian machine with apt and pip, what building shapejit (and its Python package)
# needs on a machine without package registries or the -dev packages:
#   .deps/usr/include   fmt, xxHash, CLI11, nlohmann-json and doctest headers, unpacked from
#                       Debian packages (all header-only as shapejit uses them)
#   .whl/               meson-python and pyproject-metadata wheels (pure Python), for `pip install .`
# Copy both folders with the tree, then there (python3 holding nanobind, numpy, meson and ninja):
#   meson setup build -Ddeps_include=$PWD/.deps/usr/include -Dpython_interpreter=$(command -v python3)
#   ninja -C build && bash tests/run.sh build
# or, for the installed package:
#   pip install --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
#   pip install --no-build-isolation --no-deps -Csetup-args=-Ddeps_include=$PWD/.deps/usr/include .
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .deps
mkdir -p .deps/debs .whl
(cd .deps/debs && apt-get download libfmt-dev libxxhash-dev libcli11-dev nlohmann-json3-dev doctest-dev)
for deb in .deps/debs/*.deb; do dpkg-deb -x "$deb" .deps; done
rm -rf .deps/debs
python3 -m pip download -q --no-deps --only-binary=:all: -d .whl meson-python pyproject-metadata
du -sh .deps .whl
