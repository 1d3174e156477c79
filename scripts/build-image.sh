#!/usr/bin/env bash
# Builds the service image (Dockerfile at the root) as siesta/runtime:${TAG:-1}.
#
# Wheels are built here, on the host, where pip can reach the package index;
# the image installs them with --no-index (pip inside a container cannot verify
# the index's certificate on our machines, and nothing of pip's setup belongs in
# an image). The base is the local debian:bookworm-slim, created if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
TAG=${TAG:-1}

# All of build/: setuptools builds in it too, and a file left there from an earlier
# build (a module since moved) would otherwise ride along into the wheel.
rm -rf build
mkdir -p build/wheels/dependencies build/wheels/service
"$VENV/bin/python" -m pip wheel --quiet --no-deps --wheel-dir build/wheels/service .
# The server's wheel carries the public contract (clients/python/siesta_contract).
"$VENV/bin/python" -c 'import sys, zipfile
if "siesta_contract/__init__.py" not in zipfile.ZipFile(sys.argv[1]).namelist():
    sys.exit("build-image: the service wheel lacks siesta_contract")' \
    build/wheels/service/siesta_runtime-*.whl
# The dependencies as the image's Python (Debian bookworm's 3.11.2) needs them: its
# own environment markers, wheels only (nothing is compiled in the image).
"$VENV/bin/python" -m pip download --quiet --dest build/wheels/dependencies \
    --only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 \
    --platform manylinux2014_x86_64 --platform manylinux_2_31_x86_64 --platform any \
    build/wheels/service/siesta_runtime-*.whl \
    'async-timeout>=4.0.3'  # redis needs it below Python 3.11.3; pip judges markers by ours
rm -f build/wheels/dependencies/siesta_runtime-*.whl
"$VENV/bin/python" -c 'import docker; from runtime.images.build import ensure_base_image; ensure_base_image(docker.from_env(), print)'
docker build --force-rm --tag "siesta/runtime:$TAG" --label siesta.service-image=true .
echo "built siesta/runtime:$TAG"
