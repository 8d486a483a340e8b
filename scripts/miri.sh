#!/usr/bin/env bash
# Miri over the code that shares memory between threads through raw pointers: the
# tiered volume's DRAM hit path (crates/hscm-tier/src/dram/index.rs). Miri needs a
# nightly toolchain with its component; this installs both where missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal --component miri,rust-src
fi
cargo +nightly miri test -p hscm-tier --lib dram::index --target-dir target/miri
