#!/usr/bin/env bash
# Installs what building and testing edgenetd needs on a fresh Debian machine (as root).
# Idempotent: packages already present are left alone. `--test` adds what only the tests need
# (prometheus brings promtool, which checks the /metrics output; groff-base formats the man
# page in tests/repo/man_page.rs; python3-kubernetes, the official client, checks that the tests'
# fake Kubernetes API server speaks the real protocol; python3-pyftpdlib is the FTP server of
# the conntrack helper tests; iputils-ping resolves the service tests' IPv6 neighbours before
# their first connection). `--fuzz` adds a minimal nightly
# toolchain and cargo-fuzz (scripts/test-fuzz.sh); both steps are quick when already present.
# `--nspawn` adds what scripts/test-systemd.sh needs (mmdebstrap builds a Debian 12
# root, systemd-nspawn boots it with systemd as PID 1). Flags combine: `--test --nspawn`.
set -euo pipefail

need=(nftables iproute2 libnftnl-dev libmnl-dev pkg-config python3 util-linux procps curl)
fuzz=0
for flag in "$@"; do
  case $flag in
    --test) need+=(prometheus groff-base python3-kubernetes python3-pyftpdlib iputils-ping) ;;
    --nspawn) need+=(mmdebstrap systemd-container) ;;
    --fuzz) fuzz=1 ;;
  esac
done
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  for dir in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    [ -x "$dir/cargo" ] && export PATH="$dir:$PATH"
  done
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo not found: install Rust 1.85 or newer with rustup" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

if [ "$fuzz" = 1 ]; then
  rustup run nightly rustc --version >/dev/null 2>&1 ||
    rustup toolchain install nightly --profile minimal
  command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
fi
