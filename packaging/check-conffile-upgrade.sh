#!/usr/bin/env bash
# Conffile upgrade test: an administrator's edit of /etc/edgenetd/edgenetd.toml survives
# `dpkg -i` of a newer package, as dpkg's conffile rules promise.
#
#   packaging/check-conffile-upgrade.sh OLD.deb NEW.deb     # NEW's version above OLD's (amd64)
#
# Everything happens in a throwaway root: a private mount namespace with an overlay of the
# host's root file system whose writes go to a tmpfs, /run replaced by an empty tmpfs (no
# systemd to talk to, so the maintainer scripts never reach the host's service manager: they
# take their "systemd is not running" path, as in a chroot or an image build). dpkg installs,
# upgrades and purges there; the host's dpkg database, /etc and /usr are not touched, and the
# whole root disappears when the script exits. Needs root, and /var and /usr on the root file
# system (the overlay sees that one file system only).
#
# Steps: install OLD; edit the conffile; install NEW, whose shipped conffile is unchanged:
# dpkg keeps the edit without asking (stdin is /dev/null: a question would fail the run);
# install a third package, NEW repacked with a changed shipped conffile, with
# --force-confdef --force-confold (what unattended upgrades use): the edit is kept and the
# new default lands beside it as edgenetd.toml.dpkg-dist; `edgenetd check` accepts the
# edited file; purge removes /etc/edgenetd.
set -euo pipefail

fail() { echo "check-conffile-upgrade: FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "must run as root"
[ $# = 2 ] || { echo "usage: $0 OLD.deb NEW.deb" >&2; exit 2; }
old=$(realpath "$1")
new=$(realpath "$2")
old_version=$(dpkg-deb -f "$old" Version)
new_version=$(dpkg-deb -f "$new" Version)
dpkg --compare-versions "$new_version" gt "$old_version" \
  || fail "NEW ($new_version) is not newer than OLD ($old_version)"

if [ -z "${EDGENETD_THROWAWAY_ROOT:-}" ]; then
  exec unshare --mount --propagation private env EDGENETD_THROWAWAY_ROOT=1 "$0" "$old" "$new"
fi

# --- from here on: inside the private mount namespace ---
scratch=$(mktemp -d)
mount -t tmpfs -o mode=0755 tmpfs "$scratch"
mkdir "$scratch/upper" "$scratch/work" "$scratch/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$scratch/upper,workdir=$scratch/work" "$scratch/root"
root=$scratch/root
mount --rbind /dev "$root/dev"
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
[ -s "$root/var/lib/dpkg/status" ] || fail "no dpkg database in the overlay (is /var on its own file system?)"

cp "$old" "$root/tmp/old.deb"
cp "$new" "$root/tmp/new.deb"

# The third package: NEW with one more line in its shipped conffile and a higher version.
changed_version="$new_version+conffile"
unpacked=$root/tmp/changed
dpkg-deb -R "$new" "$unpacked"
echo '# a line the packager added' >> "$unpacked/etc/edgenetd/edgenetd.toml"
sed -i "s/^Version: .*/Version: $changed_version/" "$unpacked/DEBIAN/control"
(cd "$unpacked" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z \
   | xargs -0 md5sum) > "$unpacked/DEBIAN/md5sums"
dpkg-deb --root-owner-group --build "$unpacked" "$root/tmp/changed.deb" >/dev/null
rm -rf "$unpacked"

# The steps, run by the throwaway root's own shell.
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  old_version="$old_version" new_version="$new_version" changed_version="$changed_version" \
  sh -eu <<'STEPS' || fail "see above"
conf=/etc/edgenetd/edgenetd.toml
edit='# local edit: the administrator'"'"'s'
step() { echo "check-conffile-upgrade: $*"; }
bad() { echo "check-conffile-upgrade: FAIL: $*" >&2; exit 1; }
installed() { dpkg-query -W -f='${Version} ${Status}' edgenetd; }
leftovers() { ls /etc/edgenetd/ | grep '\.dpkg-' || true; }

# Start from no edgenetd (a copy installed on the host is purged here, in the throwaway root only).
dpkg --purge edgenetd >/dev/null 2>&1 </dev/null || true
step "install $old_version"
dpkg -i /tmp/old.deb </dev/null
[ "$(installed)" = "$old_version install ok installed" ] || bad "after install: $(installed)"
shipped=$(md5sum < "$conf" | cut -d' ' -f1)
dpkg-query -W -f='${Conffiles}\n' edgenetd | grep -q "^ $conf $shipped\$" \
  || bad "dpkg does not record $conf as a conffile with the shipped hash"
[ "$(stat -c '%U:%G %a' "$conf")" = "root:root 644" ] || bad "$conf: $(stat -c '%U:%G %a' "$conf")"
[ -L /etc/systemd/system/multi-user.target.wants/edgenetd.service ] || bad "the unit is not enabled"

step "edit $conf, then upgrade to $new_version (shipped conffile unchanged: no question)"
echo "$edit" >> "$conf"
dpkg -i /tmp/new.deb </dev/null
[ "$(installed)" = "$new_version install ok installed" ] || bad "after upgrade: $(installed)"
[ "$(tail -n1 "$conf")" = "$edit" ] || bad "the edit was lost on upgrade"
[ -z "$(leftovers)" ] || bad "unexpected files: $(leftovers)"

step "upgrade to $changed_version (shipped conffile changed) with --force-confdef --force-confold"
dpkg --force-confdef --force-confold -i /tmp/changed.deb </dev/null
[ "$(installed)" = "$changed_version install ok installed" ] || bad "after upgrade: $(installed)"
[ "$(tail -n1 "$conf")" = "$edit" ] || bad "the edit was lost on an upgrade that changed the shipped file"
grep -q '^# a line the packager added$' "$conf" && bad "the packager's new default replaced the edited file"
[ "$(tail -n1 "$conf.dpkg-dist")" = '# a line the packager added' ] \
  || bad "the new default is not beside it as $conf.dpkg-dist"
/usr/bin/edgenetd check || bad "edgenetd check rejects the edited configuration"

step "purge"
dpkg --purge edgenetd </dev/null
[ ! -e /etc/edgenetd ] || bad "/etc/edgenetd left after purge: $(ls -A /etc/edgenetd)"
[ ! -e /usr/bin/edgenetd ] || bad "/usr/bin/edgenetd left after purge"
step "ok: the edit survived both upgrades; purge removed everything"
STEPS
