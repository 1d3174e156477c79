#!/usr/bin/env bash
# Generates the Python stubs of E2B's envd API (process.Process, filesystem.Filesystem)
# from proto/envd/ into the package api/e2b/protocol/ (api/e2b/protocol/README.md).
#
# The generators run in a throwaway venv (never the project's), pinned to the versions
# that match the runtime pins in pyproject.toml (connectrpc 0.12, protobuf-py 0.6) and
# that the e2b SDK 2.63 generated its own copy with. Re-running it reproduces the
# committed files exactly; the generated files are not to be edited by hand.
#   scripts/gen-envd-stubs.sh            # regenerate
#   GEN_VENV=/tmp/x scripts/gen-envd-stubs.sh   # reuse/choose the generator venv
set -euo pipefail
cd "$(dirname "$0")/.."

GRPCIO_TOOLS=1.85.1       # only for its bundled protoc (python -m grpc_tools.protoc)
PROTOC_GEN_PY=0.6.0       # messages (*_pb.py), bufbuild's protobuf-py
PROTOC_GEN_CONNECTRPC=0.12.1  # services (*_connect.py), connectrpc (connect-py)

GEN_VENV=${GEN_VENV:-/tmp/siesta-gen-envd-stubs-venv}
PYTHON=${PYTHON:-python3.11}
if [ ! -x "$GEN_VENV/bin/python" ]; then
    "$PYTHON" -m venv "$GEN_VENV"
fi
"$GEN_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "grpcio-tools==$GRPCIO_TOOLS" \
    "protoc-gen-py==$PROTOC_GEN_PY" \
    "protoc-gen-connectrpc==$PROTOC_GEN_CONNECTRPC"

OUT=api/e2b/protocol
PROTOS=(process/process.proto filesystem/filesystem.proto)

# The proto file names stay "process/process.proto" and "filesystem/filesystem.proto"
# (-I proto/envd), as in E2B's own descriptors. map_imports makes the generated files
# import each other by absolute path inside our package
# (from api.e2b.protocol.process import process_pb) instead of relatively.
# Generated into a scratch folder: the generators also write an __init__.py for the root
# (api/e2b/protocol/__init__.py is ours, with api/e2b/protocol/README.md).
OPTS="map_imports=**:api.e2b.protocol"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
"$GEN_VENV/bin/python" -m grpc_tools.protoc \
    -I proto/envd \
    "--plugin=protoc-gen-py=$GEN_VENV/bin/protoc-gen-py" \
    "--plugin=protoc-gen-connectrpc=$GEN_VENV/bin/protoc-gen-connectrpc" \
    "--py_opt=$OPTS" "--py_out=$SCRATCH" \
    "--connectrpc_opt=$OPTS" "--connectrpc_out=$SCRATCH" \
    "${PROTOS[@]}"

# Each proto's folder is replaced whole, so that a file the generators no longer make
# does not linger.
for proto in "${PROTOS[@]}"; do
    dir=$(dirname "$proto")
    rm -rf "${OUT:?}/$dir"
    cp -R "$SCRATCH/$dir" "$OUT/$dir"
    ls "$OUT/$dir"/*.py
done
