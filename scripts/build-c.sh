#!/usr/bin/env bash
# Builds the ring's C library and puts it, with its header, where a C build line can
# find it:
#
#   bash scripts/build-c.sh [--debug] [PREFIX]      (PREFIX defaults to target/c)
#
# leaves PREFIX/lib/libhscm_ring.so, PREFIX/lib/libhscm_ring.a and
# PREFIX/include/hscm_ring.h. Then, from the repository's root:
#
#   cc -O2 -Itarget/c/include crates/hscm-ring/c/example.c -Ltarget/c/lib -lhscm_ring -o ring-example
#   LD_LIBRARY_PATH=target/c/lib ./ring-example NAME
#
# (Cargo itself leaves a library that is also a dependency of the hscm binary only
# under target/*/deps, which is why this script exists.)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
if [ "${1:-}" = "--debug" ]; then profile=debug; shift; fi
prefix=${1:-target/c}
export PATH="$HOME/.cargo/bin:$PATH"
flags=(--locked -p hscm-ring)
[ "$profile" = release ] && flags+=(--release)
cargo build "${flags[@]}"
mkdir -p "$prefix/lib" "$prefix/include"
cp "target/$profile/libhscm_ring.so" "target/$profile/libhscm_ring.a" "$prefix/lib/"
cp crates/hscm-ring/include/hscm_ring.h "$prefix/include/"
echo "build-c: $prefix/lib/libhscm_ring.{so,a} and $prefix/include/hscm_ring.h"
