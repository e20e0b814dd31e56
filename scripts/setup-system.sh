#!/usr/bin/env bash
# Install the Debian packages the project needs, only when they are missing.
# Called by `make`; needs root (or sudo) on a fresh Debian 12 machine.
set -euo pipefail
PATH="$PATH:/usr/sbin:/sbin"  # ip and ethtool live there; a non-root PATH may lack it
need=()
command -v cpp >/dev/null 2>&1 || need+=(cpp)
# The built-in target's native fast path builds each P4 program's C with the system compiler.
{ command -v gcc && echo '#include <stdint.h>' | gcc -fsyntax-only -x c -; } >/dev/null 2>&1 || need+=(gcc libc6-dev)
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
# bmv2-env: Mininet (Debian's, for /usr/bin/python3 and so the venv) and what it runs on hosts.
{ command -v mnexec && /usr/bin/python3 -c 'import mininet.net'; } >/dev/null 2>&1 || need+=(mininet)
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || need+=(iproute2)
command -v ethtool >/dev/null 2>&1 || need+=(ethtool)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing Debian packages: ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
