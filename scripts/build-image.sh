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

rm -rf build/wheels
mkdir -p build/wheels/dependencies build/wheels/service
"$VENV/bin/python" -m pip wheel --quiet --wheel-dir build/wheels/dependencies .
mv build/wheels/dependencies/siesta_runtime-*.whl build/wheels/service/
"$VENV/bin/python" -c 'import docker; from runtime.imagebuild import ensure_base_image; ensure_base_image(docker.from_env(), print)'
docker build --tag "siesta/runtime:$TAG" --label siesta.service-image=true .
echo "built siesta/runtime:$TAG"
