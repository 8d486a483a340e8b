#!/usr/bin/env bash
# Builds the Debian package, target/debian/hscm_VERSION-1_ARCH.deb, with cargo-deb
# (installed here if missing): the binary, the systemd units, manual pages, shell
# completions, an example configuration and the Grafana dashboard (docs/service.md).
#
#   bash scripts/package.sh            # from a release build
#   bash scripts/package.sh --debug    # from the debug build (quicker; what the test installs)
#
# Prints the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo-deb >/dev/null || cargo install --quiet --locked cargo-deb@3.8.0 >&2
PROFILE=release
DIR=release
if [ "${1:-}" = "--debug" ]; then PROFILE=dev; DIR=debug; fi
cargo build --quiet --locked --profile "$PROFILE" -p hscm-cli >&2
BIN=target/$DIR/hscm
ASSETS=target/package-assets
rm -rf "$ASSETS"
mkdir -p "$ASSETS/man" "$ASSETS/completions"
"$BIN" man --dir "$ASSETS/man" >/dev/null
"$BIN" completions bash > "$ASSETS/completions/hscm"
"$BIN" completions zsh > "$ASSETS/completions/_hscm"
"$BIN" completions fish > "$ASSETS/completions/hscm.fish"
rm -f target/debian/hscm_*.deb target/debian/hscm-dbgsym_*.ddeb
# --fast: the debug build's binary is large, and xz over it takes minutes.
FAST=()
[ "$PROFILE" = dev ] && FAST=(--fast)
cargo deb --quiet -p hscm-cli --no-build --profile "$PROFILE" "${FAST[@]}" -o target/debian/ >&2
ls target/debian/hscm_*.deb
