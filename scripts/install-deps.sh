#!/usr/bin/env bash
# Installs what fold needs from Debian 12's packages, when missing. Needs root (or sudo).
set -euo pipefail

packages=(build-essential cmake pkg-config libucx-dev libfabric-dev libhwloc-dev libpmix-dev
          libcriterion-dev openmpi-bin libopenmpi-dev gnuplot-nox iproute2
          clang libclang-rt-14-dev)   # clang + libFuzzer: the codec fuzzers (tests/fuzz)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
