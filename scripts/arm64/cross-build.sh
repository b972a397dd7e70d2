#!/usr/bin/env bash
# Cross-builds the release binary for aarch64-unknown-linux-gnu on a Debian 12 (amd64) machine,
# installing what it needs first (as root): the aarch64 cross linker, the arm64 builds of
# libnftnl/libmnl (multiarch), and the Rust target. Idempotent: a second run only rebuilds
# what changed.
#
#   scripts/arm64/cross-build.sh            # -> target/aarch64-unknown-linux-gnu/release/edgenetd
#   EDGENETD_SKIP_DEPS=1 packaging/...          # do not touch apt/rustup (already installed)
#   CARGO_TARGET_DIR=target/kubernetes scripts/arm64/cross-build.sh --features kubernetes
#                                               # extra arguments go to cargo build; a target
#                                               # dir of its own keeps the default binary
#
# The binary links dynamically against glibc, libnftnl11 and libmnl0 of the target, exactly
# what the arm64 .deb declares (Debian ships no static libmnl).
set -euo pipefail
cd "$(dirname "$0")/../.."

target=aarch64-unknown-linux-gnu

if [ -z "${EDGENETD_SKIP_DEPS:-}" ]; then
  source scripts/install-deps.sh   # host build deps and cargo on PATH
  need=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross libnftnl-dev:arm64 libmnl-dev:arm64 pkg-config)
  missing=()
  for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
      dpkg --add-architecture arm64
    fi
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  grep -qx "$target" <<< "$(rustup target list --installed)" || rustup target add "$target"
else
  for dir in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    [ -x "$dir/cargo" ] && export PATH="$dir:$PATH"
  done
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export PKG_CONFIG_ALLOW_CROSS=1
export PKG_CONFIG_LIBDIR_aarch64_unknown_linux_gnu=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
# Two link-time choices make the binary a fifth smaller (figures: docs/operations.md,
# "Footprint"):
# - It is linked by the LLVM linker that ships with the Rust toolchain (rust-lld, through its
#   gcc-ld wrapper), for one thing GNU ld 2.40 cannot do on aarch64: pack the relative
#   relocations (DT_RELR). A position-independent binary has one per absolute pointer
#   (vtables, string tables); RELA spends 24 bytes on each, RELR about a bit: 115 kB less.
#   The binary then needs glibc 2.36 or newer (Debian 12), which dpkg-shlibdeps writes into
#   the package's Depends from the GLIBC_ABI_DT_RELR version it references.
# - The DWARF unwind tables are dropped (packaging/link/discard-unwind-tables.ld): the
#   release profile aborts on panic and is stripped, so nothing unwinds and a backtrace
#   would have no names anyway; they were 430 kB.
host=$(rustc -vV | sed -n 's/^host: //p')
gcc_ld="$(rustc --print sysroot)/lib/rustlib/$host/bin/gcc-ld"
[ -x "$gcc_ld/ld.lld" ] || { echo "cross-build: $gcc_ld/ld.lld missing (the toolchain's rust-lld)" >&2; exit 1; }
link=(-B"$gcc_ld" -fuse-ld=lld -Wl,-z,pack-relative-relocs -Wl,--no-eh-frame-hdr
      -Wl,-T,"$PWD/packaging/link/discard-unwind-tables.ld")
flags=""
for a in "${link[@]}"; do flags+=" -C link-arg=$a"; done
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="${flags# } ${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS:-}"
nice -n 10 cargo build --release --locked --target "$target" "$@"

bin=${CARGO_TARGET_DIR:-target}/$target/release/edgenetd
file "$bin" 2>/dev/null || true
echo "built $bin ($(stat -c %s "$bin") bytes)"
