#!/usr/bin/env bash
# Install the Debian packages the project needs, only when they are missing.
# Called by `make`; needs root (or sudo) on a fresh Debian 12 machine.
set -euo pipefail
need=()
command -v cpp >/dev/null 2>&1 || need+=(cpp)
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing Debian packages: ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
