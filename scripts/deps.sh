#!/bin/sh
# Installs the Debian packages attnscope needs to build and test, when missing.
# As root it runs apt-get; otherwise it prints the exact command and fails.
set -eu
PKGS="gcc make pkg-config libcjson-dev libhdf5-dev zlib1g-dev hdf5-tools libncurses-dev libopenblas-dev tmux clang libclang-rt-14-dev libomp-14-dev valgrind python3-h5py python3-numpy"
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y$missing"
if [ "$(id -u)" -eq 0 ]; then
    echo "deps: installing$missing" >&2
    sh -c "$cmd" >&2
else
    echo "deps: missing Debian packages:$missing" >&2
    echo "deps: run as root: sudo sh -c '$cmd'" >&2
    exit 1
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
    echo "deps: nvcc not found: install the CUDA Toolkit (nvcc, cuBLAS) or set CUDA_HOME" >&2
    exit 1
fi
