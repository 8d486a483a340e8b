#!/usr/bin/env bash
# Installs what hscm needs to build and test, on a fresh Debian-based machine.
# Idempotent: installs only what is missing.
set -euo pipefail

need_apt=()
command -v cc >/dev/null || need_apt+=(build-essential)
command -v chattr >/dev/null || need_apt+=(e2fsprogs)   # immutable-file test
command -v curl >/dev/null || need_apt+=(curl)
# Real NBD clients for the NBD export's tests (and nbdkit for its benchmark).
command -v nbdinfo >/dev/null || need_apt+=(libnbd-bin)   # nbdinfo, nbdcopy, nbdfuse
command -v nbdsh >/dev/null || need_apt+=(python3-libnbd)
command -v qemu-io >/dev/null || need_apt+=(qemu-utils)
command -v fio >/dev/null || need_apt+=(fio)
command -v bindfs >/dev/null || need_apt+=(bindfs)   # FUSE passthrough baseline of hscm bench fs
command -v nbdkit >/dev/null || need_apt+=(nbdkit)
command -v nft >/dev/null || need_apt+=(nftables)   # packet loss on the mirror tests' links (this kernel has no sch_netem)
# nbdkit's S3 plugin (Python, on the system's boto3) for the S3 home test; moto's local
# S3 server comes from PyPI (scripts/moto-env.sh).
dpkg -s nbdkit-plugin-python >/dev/null 2>&1 || need_apt+=(nbdkit-plugin-python)
/usr/bin/python3 -c "import boto3" 2>/dev/null || need_apt+=(python3-boto3)
# nbdkit's cc plugin compiles the write-through bound of `hscm bench nbd` against this.
[ -f /usr/include/nbdkit-plugin.h ] || need_apt+=(nbdkit-plugin-dev)
command -v fusermount3 >/dev/null || need_apt+=(fuse3)
command -v sqlite3 >/dev/null || need_apt+=(sqlite3)   # WAL databases through hscm mount
command -v git >/dev/null || need_apt+=(git)   # git clone through hscm mount (mount_truth.rs)
command -v openssl >/dev/null || need_apt+=(openssl)   # test certificates for hscm nbd --tls
# hscm nbd --tls-psk runs on the system's OpenSSL (the openssl crate links libssl).
[ -f /usr/include/openssl/ssl.h ] || need_apt+=(libssl-dev)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
command -v setpriv >/dev/null || need_apt+=(util-linux)   # another user's view of a mount
command -v rsync >/dev/null || need_apt+=(rsync)   # modes kept by rsync -aA through hscm mount
command -v systemd-analyze >/dev/null || need_apt+=(systemd)   # `systemd-analyze verify` of dist/systemd
command -v dpkg-deb >/dev/null || need_apt+=(dpkg-dev)   # the Debian package's install test
command -v lintian >/dev/null || need_apt+=(lintian)   # the package's policy check (package_test.py)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: Rust (cargo >= 1.85) is required; install it with rustup: https://rustup.rs" >&2
    exit 1
  fi
fi
if command -v rustup >/dev/null; then
  cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
  cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
fi

# The file system suites `hscm mount` is tested with (crates/hscm-cli/tests/mount_suites.rs).
for suite in pjdfstest fsx; do
  command -v "$suite" >/dev/null || cargo install --quiet --locked "$suite"
done
