#!/bin/sh
# Usage: scripts/bundle.sh BUILD DEST
# Makes DEST a relocatable attnscope: bin/attnscope and bin/attnscope_tests (linked with rpath
# $ORIGIN/../lib), lib/ with every shared library they need that a target machine (Ubuntu 24.04,
# CUDA 13 driver) may lack, and launchers DEST/attnscope and DEST/attnscope_tests.
# Not shipped: the glibc family (libc, libm, libpthread, libdl, librt, libresolv, ld-linux),
# libstdc++ and libgcc_s (every Ubuntu has them, newer; an older copy first on the path would
# break a newer libcublas), and the NVIDIA driver and CUDA toolkit libraries (libcuda,
# libnvidia-*, libcublas*, libcudart*), which the GPU machine provides.
set -eu
[ $# -eq 2 ] || { echo "usage: scripts/bundle.sh BUILD DEST" >&2; exit 2; }
build=$1 dest=$2
for b in attnscope attnscope_tests; do
    [ -x "$build/$b" ] || { echo "bundle: $build/$b is not built (make BUILD=$build)" >&2; exit 2; }
done
if ldd "$build/attnscope" "$build/attnscope_tests" | grep -q "not found"; then
    echo "bundle: a library the binaries need is not found here:" >&2
    ldd "$build/attnscope" "$build/attnscope_tests" | grep "not found" >&2
    exit 3
fi

rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
cp "$build/attnscope" "$build/attnscope_tests" "$dest/bin/"
# the kernel micro-benchmark travels too when it was built (make kbench)
[ -x "$build/attnscope_kbench" ] && cp "$build/attnscope_kbench" "$dest/bin/"
[ -x "$build/attnscope_boundary" ] && cp "$build/attnscope_boundary" "$dest/bin/"

# ldd lists the transitive closure; "name => /path (addr)" lines are the ones resolved to files.
ldd "$build/attnscope" "$build/attnscope_tests" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
while read -r name path; do
    case "$name" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|ld-linux*) continue ;;
    libstdc++.so*|libgcc_s.so*) continue ;;
    libcuda.so*|libnvidia*|libcublas*|libcudart*) continue ;;
    esac
    cp -L "$path" "$dest/lib/$name"
done

# CUPTI, which bench-engine --trace loads with dlopen (ldd does not list it): from the toolkit it was
# built against, since the activity records' layout follows CUPTI's version. Optional: without it,
# only --trace is refused.
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/extras/CUPTI/lib64"; do
    if [ -f "$d/libcupti.so.13" ]; then
        cp -L "$d/libcupti.so.13" "$dest/lib/"
        break
    fi
done

# The launchers: the bundled libraries first, then wherever the machine keeps cuBLAS.
for b in attnscope attnscope_tests; do
    cat > "$dest/$b" <<LAUNCHER
#!/bin/sh
here=\$(cd "\$(dirname "\$0")" && pwd)
lp="\$here/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \\
         /usr/local/lib/python3*/dist-packages/nvidia/cublas/lib /usr/local/lib/python3*/dist-packages/nvidia/cu13/lib \\
         /usr/lib/python3/dist-packages/nvidia/cublas/lib /usr/lib/python3/dist-packages/nvidia/cu13/lib \\
         "\$HOME"/.local/lib/python3*/site-packages/nvidia/cublas/lib "\$HOME"/.local/lib/python3*/site-packages/nvidia/cu13/lib; do
    [ -d "\$d" ] && lp="\$lp:\$d"
done
export LD_LIBRARY_PATH="\$lp\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
LAUNCHER
    if [ "$b" = attnscope_tests ]; then
        # the CLI tests run the bundled binary
        echo 'export ATTNSCOPE_BIN="${ATTNSCOPE_BIN:-$here/attnscope}"' >> "$dest/$b"
    fi
    echo "exec \"\$here/bin/$b\" \"\$@\"" >> "$dest/$b"
    chmod +x "$dest/$b"
done

echo "bundle: $dest: $(ls "$dest/lib" | wc -l) libraries, $(du -sh "$dest" | cut -f1)"
