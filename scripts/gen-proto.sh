#!/bin/sh
# Regenerate ina_api/jobs_pb2.py and jobs_pb2_grpc.py from ina_api/jobs.proto (`make proto`), with the
# grpcio-tools pyproject.toml names under [tool.ina.codegen], in .venv-proto (its own protobuf 4).
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
version=$($PYTHON -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["tool"]["ina"]["codegen"]["grpcio-tools"])')
if ! .venv-proto/bin/python -c "import grpc_tools" 2>/dev/null; then
    $PYTHON -m venv .venv-proto
    .venv-proto/bin/pip install -q "grpcio-tools==$version"
fi
.venv-proto/bin/python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. ina_api/jobs.proto
echo "regenerated ina_api/jobs_pb2.py and ina_api/jobs_pb2_grpc.py with grpcio-tools $version"
