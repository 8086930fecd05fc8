#!/usr/bin/env bash
# Builds the melctl Python wheel for this platform: one abi3 wheel (CPython 3.9 and
# later) holding the extension module, the package and the `melctl` command (the CLI's own
# code inside the extension: `melctl ...` and `python -m melctl ...` after `pip install`).
# maturin checks the wheel's manylinux compliance and tags it with the oldest policy it
# meets (the glibc symbols it uses); HDF5 is linked in statically.
#
#   scripts/wheel.sh [--dev] [OUT_DIR]     (default OUT_DIR: target/wheels)
#
# --dev builds with the workspace's dev profile, sharing `cargo test`'s compiled units:
# CI uses it to check the packaging (files, tags, the console script, no libpython link)
# in minutes. Without it: the release profile (fat LTO), what users install.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
if [ "${1:-}" = "--dev" ]; then
    profile=dev
    shift
fi
out=${1:-target/wheels}
python3 -m maturin --version >/dev/null 2>&1 \
    || python3 -m pip install --quiet --disable-pip-version-check "maturin>=1.9.4,<2"
rm -f "$out"/melctl-*.whl
python3 -m maturin build --manifest-path python/Cargo.toml --profile "$profile" \
    --out "$out" --locked >&2
wheel=$(ls "$out"/melctl-*.whl)
case "$wheel" in
    *-abi3-manylinux*|*-abi3-macosx*|*-abi3-win*) ;;
    *) echo "wheel.sh: $wheel is not an abi3 wheel with a portable platform tag" >&2; exit 1 ;;
esac
echo "$wheel"
