#!/usr/bin/env bash
# CI for edge delivery (called by .ci/run; runs as root on a fresh Debian 12 amd64 machine):
#   0. cargo doc -D warnings of both builds (intra-doc links);
#   1. builds both Debian packages (packaging/build-debs.sh: native amd64 + cross arm64);
#   2. checks their metadata and contents (dpkg-deb --info/--contents), that the packaged
#      binaries are release builds of the right architecture without fault injection, and
#      that the man page is the host binary's `edgenetd --generate man` and formats without
#      warnings (`man --warnings`; lintian's groff check below);
#   2b. runs lintian on both packages: any error (E:) or warning (W:) fails (tags that do not
#      apply are overridden with a reason in packaging/debian/lintian-overrides);
#   2c. the conffile upgrade test (packaging/check-conffile-upgrade.sh, in a throwaway overlay
#      root): an edited /etc/edgenetd/edgenetd.toml survives dpkg -i of <version>-2 over -1;
#   3. installs the amd64 package with dpkg -i: the unit is enabled, not started; the default
#      conffile passes `edgenetd check`; `systemd-analyze verify` passes on the installed unit;
#      `systemd-analyze security --offline=yes` gives an exposure of 2.0 or lower;
#   4. runs the installed binary the way the unit does (unprivileged uid, CAP_NET_ADMIN only)
#      under strace in a network namespace, and checks every system call it made is allowed
#      by the unit's SystemCallFilter (packaging/check-sandbox.sh);
#   5. checks the Prometheus alert rules of docs/operations.md with promtool (check + unit tests);
#   5b. runs the aarch64 smoke test under qemu-user (scripts/arm64/smoke-qemu-user.sh);
#   5c. runs the aarch64 binary on a real arm64 kernel with every controller of the example config
#      (scripts/arm64/smoke-vm.sh, on the repository's scripts/arm64/vm/arm64vm.sh), and the
#      flow offload packet test there (scripts/arm64/test-vm-flow-offload.sh);
#   6. the footprint against the budgets (scripts/check-footprint.sh, after building the x86_64
#      `kubernetes` feature binary it also measures): fails on any figure over budget (binary
#      size, idle RSS of both builds, idle wake-ups, threads);
#   6b. the `kubernetes` feature: its dependencies (no aws-lc, tokio or hyper; the default build's
#      tree is the feature's minus the feature's own crates), its aarch64 release build
#      (stripped) against its 3.3 MB budget, and no trace of it in the default binary;
#   7. purges the package and checks nothing leaked into the host's network.
# Expected time on 2 cores: ~15 min (three release builds dominate).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
[ "$(id -u)" = 0 ] || { echo "packaging/ci.sh must run as root" >&2; exit 1; }

section() { echo; echo "=== edge CI: $*"; }
fail() { echo "edge CI: FAIL: $*" >&2; exit 1; }

section "dependencies"
source scripts/install-deps.sh
need=(dpkg-dev file qemu-user-static systemd strace curl python3 prometheus lintian groff-base man-db)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

section "API docs: every intra-doc link resolves, none to a private item (both builds)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet --features kubernetes,fault-injection

section "build both packages"
packaging/build-debs.sh
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
deb_amd64=target/debian/edgenetd_${version}-1_amd64.deb
deb_arm64=target/debian/edgenetd_${version}-1_arm64.deb
# The same binary as Debian revision 2: the upgrade of the conffile test.
EDGENETD_NO_BUILD=1 EDGENETD_DEB_REVISION=2 packaging/build-debs.sh amd64
deb_amd64_rev2=target/debian/edgenetd_${version}-2_amd64.deb

section "package contents"
for arch in amd64 arm64; do
  deb=target/debian/edgenetd_${version}-1_${arch}.deb
  dpkg-deb --info "$deb"
  dpkg-deb --contents "$deb"
  [ "$(dpkg-deb -f "$deb" Package)" = edgenetd ] || fail "$deb: Package"
  [ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "$deb: Architecture"
  [ "$(dpkg-deb -f "$deb" Version)" = "${version}-1" ] || fail "$deb: Version"
  depends=$(dpkg-deb -f "$deb" Depends)
  for lib in libc6 libnftnl11 libmnl0; do
    echo "$depends" | grep -q "\b$lib\b" || fail "$deb: Depends lacks $lib: $depends"
  done
  # Both binaries are linked with packed relative relocations (DT_RELR): glibc 2.36.
  echo "$depends" | grep -q "libc6 (>= 2.36)" || fail "$deb: Depends does not ask for glibc 2.36 (DT_RELR): $depends"
  contents=$(dpkg-deb --contents "$deb")
  for path in ./usr/bin/edgenetd ./lib/systemd/system/edgenetd.service ./etc/edgenetd/edgenetd.toml \
              ./etc/edgenetd/conf.d/ ./usr/share/doc/edgenetd/copyright \
              ./usr/share/doc/edgenetd/operations.md ./usr/share/doc/edgenetd/UPGRADING.md \
              ./usr/share/doc/edgenetd/examples/edgenetd.toml \
              ./usr/share/doc/edgenetd/examples/prometheus-alerts.yml \
              ./usr/share/doc/edgenetd/examples/grafana-dashboard.json \
              ./usr/share/doc/edgenetd/changelog.Debian.gz ./usr/share/man/man8/edgenetd.8.gz \
              ./usr/share/lintian/overrides/edgenetd; do
    echo "$contents" | grep -q " $path\$" || fail "$deb: $path missing"
  done
  echo "$contents" | grep -q '^-rwxr-xr-x root/root .* ./usr/bin/edgenetd$' || fail "$deb: /usr/bin/edgenetd mode/owner"
  [ "$(dpkg-deb -I "$deb" conffiles)" = /etc/edgenetd/edgenetd.toml ] || fail "$deb: conffiles"
  for script in postinst prerm postrm; do
    dpkg-deb -I "$deb" "$script" | sh -n || fail "$deb: $script syntax"
  done
  grep -v '^\s*#' <<< "$(dpkg-deb -I "$deb" postinst)" | grep -q 'deb-systemd-invoke start' \
    && fail "$deb: postinst starts the service"
  x=$(mktemp -d)
  dpkg-deb -x "$deb" "$x"
  zcat "$x/usr/share/man/man8/edgenetd.8.gz" | cmp -s - <(target/release/edgenetd --generate man) \
    || fail "$deb: edgenetd.8.gz is not edgenetd --generate man"
  warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$x/usr/share/man/man8/edgenetd.8.gz" 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "$deb: man --warnings: $warnings"
  want="x86-64"; [ "$arch" = arm64 ] && want="ARM aarch64"
  info=$(file -b "$x/usr/bin/edgenetd")
  echo "$info" | grep -q "$want" || fail "$deb: binary is $info"
  echo "$info" | grep -q "not stripped" && fail "$deb: binary not stripped"
  # No fault injection in a package: [[test_controller]] must be an unknown section.
  printf '[[test_controller]]\nname = "t"\n' > "$x/fi.toml"
  run=("$x/usr/bin/edgenetd"); [ "$arch" = arm64 ] && run=(qemu-aarch64-static "$x/usr/bin/edgenetd")
  "${run[@]}" check --config "$x/fi.toml" >/dev/null 2>&1 && fail "$deb: built with fault-injection"
  "${run[@]}" check --config "$x/etc/edgenetd/edgenetd.toml" || fail "$deb: default config rejected"
  rm -rf "$x"
  echo "$deb: ok ($(stat -c %s "$deb") bytes)"
done

section "lintian (no error, no warning)"
for deb in "$deb_amd64" "$deb_arm64"; do
  # --fail-on none: this script decides, from the tags printed (E: error, W: warning,
  # I: info, P: pedantic, O: overridden, N: the override's reason).
  report=$(lintian --fail-on none --display-info --pedantic --show-overrides "$deb" 2>&1) \
    || fail "lintian could not check $deb: $report"
  echo "$report" | grep -v '^running with root privileges' || true
  grep -qE '^[EW]: ' <<< "$report" && fail "lintian: errors or warnings on $deb"
  echo "$deb: lintian ok"
done

section "conffile upgrade (throwaway root): an edit survives dpkg -i of a newer version"
packaging/check-conffile-upgrade.sh "$deb_amd64" "$deb_amd64_rev2"

section "install the amd64 package"
dpkg --purge edgenetd >/dev/null 2>&1 || true
dpkg -i "$deb_amd64"
grep -q '^Status: install ok installed' <<< "$(dpkg -s edgenetd)" || fail "not installed"
[ -L /etc/systemd/system/multi-user.target.wants/edgenetd.service ] || fail "unit not enabled after install"
echo "enabled: $(readlink /etc/systemd/system/multi-user.target.wants/edgenetd.service)"
if [ -d /run/systemd/system ]; then
  systemctl is-active --quiet edgenetd && fail "postinst started the service"
fi
/usr/bin/edgenetd --version
/usr/bin/edgenetd check     # the default --config is /etc/edgenetd/edgenetd.toml

section "upgrade: conffile edits kept, an admin's disable kept"
echo '# local edit' >> /etc/edgenetd/edgenetd.toml
systemctl --root=/ disable edgenetd.service 2>&1
[ -e /etc/systemd/system/multi-user.target.wants/edgenetd.service ] && fail "disable did not work"
dpkg -i "$deb_amd64"      # same version again: dpkg runs the upgrade path (postinst configure OLDVERSION)
tail -n1 /etc/edgenetd/edgenetd.toml | grep -q '^# local edit$' || fail "conffile edit lost on upgrade"
[ -e /etc/systemd/system/multi-user.target.wants/edgenetd.service ] && fail "upgrade re-enabled a disabled service"
systemctl --root=/ enable edgenetd.service 2>&1
echo "ok: edit kept, disabled stayed disabled"

section "systemd-analyze verify"
out=$(systemd-analyze verify /lib/systemd/system/edgenetd.service 2>&1) || fail "verify: $out"
[ -z "$out" ] || fail "verify printed warnings: $out"
echo "ok (no warnings)"

section "systemd-analyze security --offline=yes"
sec=$(systemd-analyze security --offline=yes /lib/systemd/system/edgenetd.service 2>&1) || true
echo "$sec" | grep -E '✗|Overall'
exposure=$(echo "$sec" | sed -n 's/.*Overall exposure level for edgenetd.service: \([0-9.]*\).*/\1/p')
[ -n "$exposure" ] || fail "no exposure level in: $sec"
awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }' || fail "exposure $exposure > 2.0"
echo "exposure $exposure <= 2.0: ok"

section "sandbox: unprivileged uid, CAP_NET_ADMIN only, system calls within the filter"
packaging/check-sandbox.sh /usr/bin/edgenetd

section "Prometheus alert rules in docs/operations.md"
packaging/prometheus/check-alerts.sh

section "aarch64 smoke test (qemu-user)"
scripts/arm64/smoke-qemu-user.sh

section "aarch64 on a real arm64 kernel (qemu-system, every controller of the example config)"
vm=${ARM64VM:-scripts/arm64/vm/arm64vm.sh}
if [ -x "$vm" ]; then
  ARM64VM=$vm scripts/arm64/smoke-vm.sh "$deb_arm64"
  section "flow offload on a real arm64 kernel (qemu-system, ~100 s)"
  ARM64VM=$vm scripts/arm64/test-vm-flow-offload.sh "$deb_arm64"
else
  echo "ci: the arm64vm tool is not at $vm (ARM64VM)" >&2
  exit 1
fi

section "footprint"
CARGO_TARGET_DIR=target/kubernetes nice -n 10 cargo build --release --locked --quiet --features kubernetes
# Over budget fails CI, but only after the checks below (and the purge) have run too.
footprint_over=
scripts/check-footprint.sh --no-build || footprint_over=1

section "kubernetes feature: dependencies, aarch64 size (budget 3.3 MB)"
packaging/check-kubernetes-size.sh

section "purge"
dpkg --purge edgenetd
[ -e /usr/bin/edgenetd ] && fail "/usr/bin/edgenetd left after purge"
[ -e /etc/edgenetd ] && fail "/etc/edgenetd left after purge"
[ -e /etc/systemd/system/multi-user.target.wants/edgenetd.service ] && fail "enable symlink left after purge"
echo "purged"

if grep -q edgenetd <<< "$(nft list tables 2>/dev/null)"; then fail "an edgenetd table exists in the host namespace"; fi
[ -z "$(ip route show proto 190 table all 2>/dev/null)" ] || fail "routes with protocol 190 in the host namespace"
[ -z "$footprint_over" ] || fail "a footprint figure is over its budget (scripts/check-footprint.sh above)"
echo; echo "edge CI: ok"
