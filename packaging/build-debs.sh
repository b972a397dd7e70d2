#!/usr/bin/env bash
# Builds the Debian packages of edgenetd for amd64 and arm64 — one command:
#
#   packaging/build-debs.sh                 # -> target/debian/edgenetd_<version>-1_{amd64,arm64}.deb
#   packaging/build-debs.sh amd64           # only one architecture (amd64 | arm64)
#   EDGENETD_NO_BUILD=1 packaging/build-debs.sh   # package the binaries already in target/
#   EDGENETD_DEB_REVISION=2 packaging/...   # Debian revision <version>-2 (default 1): a rebuild
#                                           # that upgrades an installed <version>-1 (CI's conffile test)
#
# Runs as root on Debian 12 (amd64); installs what it needs (see scripts/arm64/cross-build.sh for
# arm64). The man page is not in the repository: the host's release binary prints it
# (`edgenetd --generate man`, target/debian/edgenetd.8), built first when an arm64-only run
# lacks it. The packages are assembled by hand and built with `dpkg-deb --root-owner-group`
# (no debhelper or cargo-deb to install): the release binary (default features only — never
# `fault-injection`), the systemd unit, the default config as a conffile, docs, and the
# maintainer scripts in packaging/debian/ (enable on install, never start; see postinst).
# Depends: computed by dpkg-shlibdeps from the binary (glibc, libgcc, libnftnl11, libmnl0).
# Both packages pass lintian with no error or warning (packaging/ci.sh checks it); the tags
# that do not apply are overridden, each with its reason, in packaging/debian/lintian-overrides.
#
# Layout:
#   /usr/bin/edgenetd
#   /usr/share/man/man8/edgenetd.8.gz            `edgenetd --generate man` of the host's build (the page is
#                                               architecture-independent; the arm64 binary does not run here)
#   /lib/systemd/system/edgenetd.service
#   /usr/lib/tmpfiles.d/edgenetd.conf            /run/edgenetd: control socket, kubernetes cache
#   /etc/edgenetd/edgenetd.toml                 conffile: a safe default that programs nothing
#   /etc/edgenetd/conf.d/                       merged after the main file, in name order
#   /usr/share/doc/edgenetd/                    README.md, operations.md, UPGRADING.md, copyright, changelog.Debian.gz,
#                                               examples/edgenetd.toml (a complete router),
#                                               examples/prometheus-alerts.yml
#   /usr/share/lintian/overrides/edgenetd
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64)
for a in "${arches[@]}"; do
  case $a in amd64|arm64) ;; *) echo "build-debs: unknown architecture $a (amd64 | arm64)" >&2; exit 2 ;; esac
done

for dir in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
  [ -x "$dir/cargo" ] && export PATH="$dir:$PATH"
done
if ! command -v dpkg-shlibdeps >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev file >/dev/null
fi

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
# Reproducible archives: file times clamped to the last commit's time.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
revision=${EDGENETD_DEB_REVISION:-1}
[[ $revision =~ ^[0-9]+$ ]] || { echo "build-debs: EDGENETD_DEB_REVISION must be a number" >&2; exit 2; }
debver="$version-$revision"
out=target/debian
mkdir -p "$out"

objcopy_for() {
  case $1 in
    amd64) echo objcopy ;;
    arm64) echo aarch64-linux-gnu-objcopy ;;
  esac
}

binary_for() {
  case $1 in
    amd64) echo target/release/edgenetd ;;
    arm64) echo target/aarch64-unknown-linux-gnu/release/edgenetd ;;
  esac
}

build() {
  [ -n "${EDGENETD_NO_BUILD:-}" ] && return 0
  case $1 in
    amd64)
      [ "$(dpkg --print-architecture)" = amd64 ] || { echo "build-debs: amd64 builds natively on amd64 only" >&2; exit 1; }
      source scripts/install-deps.sh
      nice -n 10 cargo build --release --locked ;;
    arm64)
      scripts/arm64/cross-build.sh ;;
  esac
}

# raise_dep DEPENDS PACKAGE MINVERSION: DEPENDS with PACKAGE's (>= V) raised to at least
# MINVERSION, or the clause added when absent.
raise_dep() {
  local deps=$1 pkg=$2 min=$3 cur
  cur=$(sed -n "s/.*\b$pkg (>= \([^)]*\)).*/\1/p" <<< "$deps")
  if [ -z "$cur" ]; then
    if grep -q "\b$pkg\b" <<< "$deps"; then
      sed "s/\b$pkg\b[^,]*/$pkg (>= $min)/" <<< "$deps"
    else
      echo "$deps, $pkg (>= $min)"
    fi
  elif dpkg --compare-versions "$cur" lt "$min"; then
    sed "s/\b$pkg (>= [^)]*)/$pkg (>= $min)/" <<< "$deps"
  else
    echo "$deps"
  fi
}

# The man page, from the host's release binary: the same flag table and prose as the packaged
# binaries (one commit), whatever the architecture. Built when missing (an arm64-only run).
man_page() {
  local host=target/release/edgenetd
  if [ ! -x "$host" ] && [ -z "${EDGENETD_NO_BUILD:-}" ]; then
    source scripts/install-deps.sh
    nice -n 10 cargo build --release --locked
  fi
  [ -x "$host" ] || { echo "build-debs: $host missing: the man page is generated with it" >&2; exit 1; }
  [ "$("$host" --version)" = "edgenetd $version" ] \
    || { echo "build-debs: $host is $("$host" --version), not edgenetd $version" >&2; exit 1; }
  "$host" --generate man > "$out/edgenetd.8"
  [ -s "$out/edgenetd.8" ] || { echo "build-debs: $host --generate man printed nothing" >&2; exit 1; }
}

package() {
  local arch=$1 bin stage deps
  bin=$(binary_for "$arch")
  [ -x "$bin" ] || { echo "build-debs: $bin missing" >&2; exit 1; }
  case $arch in
    amd64) file -b "$bin" | grep -q "x86-64" ;;
    arm64) file -b "$bin" | grep -q "ARM aarch64" ;;
  esac || { echo "build-debs: $bin is not a $arch binary: $(file -b "$bin")" >&2; exit 1; }
  file -b "$bin" | grep -q "stripped" && ! file -b "$bin" | grep -q "not stripped" \
    || { echo "build-debs: $bin is not stripped (release profile: strip = true)" >&2; exit 1; }

  stage=$out/stage-$arch
  rm -rf "$stage"
  install -d -m 0755 "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" \
    "$stage/etc/edgenetd/conf.d" "$stage/usr/share/doc/edgenetd/examples" \
    "$stage/usr/share/man/man8" "$stage/usr/share/lintian/overrides" "$stage/usr/lib/tmpfiles.d"
  install -m 0755 "$bin" "$stage/usr/bin/edgenetd"
  # What dh_strip does beyond `strip`: the compilers' version strings (.comment) go too.
  "$(objcopy_for "$arch")" --remove-section=.comment "$stage/usr/bin/edgenetd"
  gzip -9n -c "$out/edgenetd.8" > "$stage/usr/share/man/man8/edgenetd.8.gz"
  chmod 0644 "$stage/usr/share/man/man8/edgenetd.8.gz"
  install -m 0644 packaging/debian/lintian-overrides "$stage/usr/share/lintian/overrides/edgenetd"
  install -m 0644 systemd/edgenetd.service "$stage/lib/systemd/system/edgenetd.service"
  install -m 0644 packaging/tmpfiles/edgenetd.conf "$stage/usr/lib/tmpfiles.d/edgenetd.conf"
  install -m 0644 packaging/edgenetd.toml "$stage/etc/edgenetd/edgenetd.toml"
  install -m 0644 README.md "$stage/usr/share/doc/edgenetd/README.md"
  install -m 0644 docs/operations.md "$stage/usr/share/doc/edgenetd/operations.md"
  install -m 0644 UPGRADING.md "$stage/usr/share/doc/edgenetd/UPGRADING.md"
  install -m 0644 packaging/debian/copyright "$stage/usr/share/doc/edgenetd/copyright"
  install -m 0644 config/edgenetd.toml "$stage/usr/share/doc/edgenetd/examples/edgenetd.toml"
  # The alert rules published in operations.md, as a file to drop into Prometheus.
  awk '/^### Alert rules to copy/{f=1} f&&/^```yaml/{g=1;next} g&&/^```/{exit} g' docs/operations.md \
    > "$stage/usr/share/doc/edgenetd/examples/prometheus-alerts.yml"
  [ -s "$stage/usr/share/doc/edgenetd/examples/prometheus-alerts.yml" ] || { echo "build-debs: no alert rules in docs/operations.md" >&2; exit 1; }
  chmod 0644 "$stage/usr/share/doc/edgenetd/examples/prometheus-alerts.yml"
  # More documentation and examples (dashboards, ...) go here, one `install -m 0644` each.
  install -m 0644 packaging/grafana/edgenetd.json "$stage/usr/share/doc/edgenetd/examples/grafana-dashboard.json"
  cat > "$stage/usr/share/doc/edgenetd/changelog.Debian" <<CHANGELOG
edgenetd ($debver) unstable; urgency=medium

  * Built from the edgenetd repository, commit $commit.

 -- edgenetd maintainers <edgenetd@example.invalid>  $(date -R -u -d "@$SOURCE_DATE_EPOCH")
CHANGELOG
  gzip -9n "$stage/usr/share/doc/edgenetd/changelog.Debian"
  install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$stage/DEBIAN/"
  echo /etc/edgenetd/edgenetd.toml > "$stage/DEBIAN/conffiles"

  # Shared-library dependencies from the binary itself (works for the cross binary too:
  # the arm64 libraries' shlibs/symbols files come from multiarch).
  local shl=$out/shlibdeps-$arch
  rm -rf "$shl"; mkdir -p "$shl/debian"
  printf 'Source: edgenetd\n\nPackage: edgenetd\nArchitecture: any\n' > "$shl/debian/control"
  local libdir=/usr/lib/x86_64-linux-gnu
  [ "$arch" = arm64 ] && libdir=/usr/lib/aarch64-linux-gnu
  deps=$(cd "$shl" && dpkg-shlibdeps -O -l"$libdir" "$root/$stage/usr/bin/edgenetd" 2>/dev/null \
           | sed -n 's/^shlibs:Depends=//p')
  [ -n "$deps" ] || { echo "build-debs: dpkg-shlibdeps found no dependencies for $bin" >&2; exit 1; }
  # The nftables code is built for libnftnl >= 1.2.0 and libmnl >= 1.0.4 (the crates'
  # feature levels `nftnl-1-2-0`, `mnl-1-0-4`): raise what the symbols alone ask for.
  deps=$(raise_dep "$deps" libnftnl11 1.2.0)
  deps=$(raise_dep "$deps" libmnl0 1.0.4)
  # Packed relative relocations (DT_RELR) need glibc 2.36; the binary says so with the
  # version GLIBC_ABI_DT_RELR, which has no symbols, so dpkg-shlibdeps asks only for 2.34.
  # (a process substitution: under pipefail, readelf killed by SIGPIPE after grep matched
  # would read as no match)
  if grep -q GLIBC_ABI_DT_RELR < <(readelf -V "$stage/usr/bin/edgenetd"); then
    deps=$(raise_dep "$deps" libc6 2.36)
  fi
  rm -rf "$shl"

  local size
  size=$(du -k -s --exclude=DEBIAN "$stage" | cut -f1)
  cat > "$stage/DEBIAN/control" <<CONTROL
Package: edgenetd
Version: $debver
Architecture: $arch
Maintainer: edgenetd maintainers <edgenetd@example.invalid>
Installed-Size: $size
Depends: $deps
Suggests: nftables
Section: net
Priority: optional
Description: network daemon for edge routers: firewall, load-balancing, routes
 edgenetd keeps the Linux kernel's firewall (nftables), load-balanced virtual
 services (nftables) and static/policy routes (rtnetlink) in line with a desired
 state written in TOML (/etc/edgenetd/edgenetd.toml and conf.d/), one sync loop
 each. It runs under systemd with a watchdog, reloads on SIGHUP or file change,
 and serves /healthz, /livez, /readyz and Prometheus /metrics.
 .
 The service is enabled on installation but not started; the shipped
 configuration programs nothing until edited.
CONTROL
  (cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z \
     | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
  chmod 0644 "$stage/DEBIAN/md5sums" "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles"

  local deb=$out/edgenetd_${debver}_${arch}.deb
  dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
  rm -rf "$stage"
  echo "built $deb ($(stat -c %s "$deb") bytes; Depends: $deps)"
}

for a in "${arches[@]}"; do build "$a"; done
man_page
for a in "${arches[@]}"; do package "$a"; done
