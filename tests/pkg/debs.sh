#!/bin/sh
# The Debian packages: built once (make deb, from the already-built tree),
# lintian-clean (no errors, no warnings), the expected packages with
# their files, every dependency satisfiable on this Debian, and the life
# cycle of each package in a scratch root (dpkg --root, maintainer scripts
# run chrootless under DPKG_ROOT): install, upgrade to a newer version,
# remove, purge.  The usage store survives upgrade and remove, and goes
# with purge.  With libgshare built (nvcc present), the dev package lets
# a program compile and link with `pkg-config --cflags --libs gshare`.
set -eu
. tests/pkg/lib.sh
B=${B:-build}
D=$B/deb
V=$(cat VERSION)
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

start=$(date +%s)
make --no-print-directory deb >"$tmp/deb.log" 2>&1 ||
	{ cat "$tmp/deb.log"; fail "make deb"; }
ok "make deb ($(($(date +%s) - start)) s)"

# -- which packages ------------------------------------------------------
want="gshare gshare-device-plugin slurm-spank-gshare"
if [ -e "$B/runtime/libgshare.so.1" ]; then
	want="$want libgshare1 libgshare-dev"
else
	echo "note: no libgshare here (no nvcc): libgshare1/-dev not built"
fi
if [ -e "$B/runtime/gate/libgshare-gate.so" ]; then
	want="$want gshare-gate"
else
	echo "note: no launch gate library built here: gshare-gate not built"
fi
deb() { echo "$D/${1}_${V}_$(dpkg --print-architecture).deb"; }
for p in $want; do
	[ -f "$(deb "$p")" ] || fail "package $p not built"
done
n=$(find "$D" -maxdepth 1 -name '*.deb' ! -name '*-dbgsym_*' | wc -l)
[ "$n" = "$(echo "$want" | wc -w)" ] || fail "$n packages built, want: $want"
ok "packages: $want"

# -- lintian -------------------------------------------------------------
lintian --fail-on error,warning "$D"/*.changes >"$tmp/lintian" 2>&1 ||
	{ cat "$tmp/lintian"; fail "lintian reports errors or warnings"; }
ok "lintian: no errors, no warnings"

# -- files ---------------------------------------------------------------
has() { # has PACKAGE PATH [MODE]
	line=$(dpkg-deb -c "$(deb "$1")" | awk -v p="./$2" '$6 == p')
	[ -n "$line" ] || fail "$1 lacks $2"
	if [ $# -gt 2 ]; then
		case $line in "$3 root/root "*) ;;
		*) fail "$1: $2: $line (want $3 root/root)" ;; esac
	fi
}
has gshare usr/sbin/gshared -rwxr-xr-x
has gshare usr/bin/gsharectl -rwxr-xr-x
has gshare usr/bin/gsacct -rwxr-xr-x
has gshare usr/bin/gshare-simjob -rwxr-xr-x
has gshare etc/gshare/gshare.yaml -rw-r--r--
has gshare lib/systemd/system/gshared.service
has gshare usr/share/man/man8/gshared.8.gz
has gshare usr/share/man/man1/gsacct.1.gz
has gshare-device-plugin usr/sbin/gshare-device-plugin -rwxr-xr-x
has gshare-device-plugin usr/share/gshare/crds/daemonset.yaml
has gshare-device-plugin usr/share/man/man8/gshare-device-plugin.8.gz
has slurm-spank-gshare "usr/lib/$MA/gshare/spank_gshare.so" -rw-r--r--
has slurm-spank-gshare usr/share/man/man8/spank_gshare.8.gz
case $want in *libgshare1*)
	has libgshare1 "usr/lib/$MA/libgshare.so.1" -rw-r--r--
	has libgshare-dev "usr/lib/$MA/libgshare.so"
	has libgshare-dev "usr/lib/$MA/pkgconfig/gshare.pc"
	has libgshare-dev usr/include/gshare.h
	has libgshare-dev usr/share/man/man3/libgshare.3.gz
	readelf -d "$B/runtime/libgshare.so.1" >/dev/null
	dpkg-deb --fsys-tarfile "$(deb libgshare1)" |
		tar -xOf - "./usr/lib/$MA/libgshare.so.1" >"$tmp/lib.so"
	readelf -d "$tmp/lib.so" | grep -q 'SONAME.*libgshare.so.1' ||
		fail "libgshare1: no SONAME libgshare.so.1"
	! readelf -d "$tmp/lib.so" | grep -Eq 'RPATH|RUNPATH' ||
		fail "libgshare1: the library carries an rpath"
	;;
esac
case $want in *gshare-gate*)
	has gshare-gate "usr/lib/$MA/gshare/libgshare-gate.so" ;;
esac
[ "$(dpkg-deb -f "$(deb gshare)" Version)" = "$V" ] ||
	fail "gshare's version is not VERSION ($V)"
dpkg-deb -e "$(deb gshare)" "$tmp/ctl"
grep -qx /etc/gshare/gshare.yaml "$tmp/ctl/conffiles" ||
	fail "gshare.yaml is not a conffile"
ok "files, modes, conffile, version $V"

# -- dependencies ----------------------------------------------------------
# Every dependency on another package must be met by what this Debian
# installs (the build's own packages are among them: build deps); ours
# must point at the same version.
slurm=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins 2>/dev/null ||
	true)
for p in $want; do
	dpkg-deb -f "$(deb "$p")" Depends | tr ',' '\n' | sed 's/^ *//' |
	while read -r dep; do
		[ -n "$dep" ] || continue
		name=${dep%% *}
		rel=$(echo "$dep" | sed -n 's/.*(\(.*\)).*/\1/p')
		op=${rel%% *}; ver=${rel#* }
		case $name in
		gshare|gshare-*|libgshare*)
			[ "$ver" = "$V" ] || fail "$p: $dep: not version $V"
			continue ;;
		esac
		have=$(dpkg-query -W -f='${Version}' "$name" 2>/dev/null) ||
			fail "$p: depends on $name, which is not installed here"
		[ -z "$rel" ] && continue
		case $op in
		'>=') o=ge ;; '<<') o=lt ;; '=') o=eq ;; '<=') o=le ;; '>>') o=gt ;;
		*) fail "$p: $dep: operator $op" ;;
		esac
		dpkg --compare-versions "$have" "$o" "$ver" ||
			fail "$p: $dep: installed $name is $have"
	done
done
dpkg-deb -f "$(deb slurm-spank-gshare)" Depends | grep -q 'slurm-wlm-basic-plugins (<< ' ||
	fail "slurm-spank-gshare does not bound the Slurm release"
ok "dependencies met here (Slurm $slurm)"

# -- life cycle in a scratch root -----------------------------------------
R=$tmp/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/etc"
touch "$R/var/lib/dpkg/status" "$R/var/lib/dpkg/available"
printf 'root:x:0:\n' >"$R/etc/group"
printf 'root:*::\n' >"$R/etc/gshadow"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$R/etc/passwd"
printf 'root:*:19000:0:99999:7:::\n' >"$R/etc/shadow"
chmod 640 "$R/etc/shadow" "$R/etc/gshadow"
dp() {
	dpkg --root="$R" --force-script-chrootless --force-depends \
		--force-not-root --log=/dev/null "$@" >"$tmp/dpkg.log" 2>&1 ||
		{ cat "$tmp/dpkg.log"; fail "dpkg $*"; }
}
status() { dpkg-query --root="$R" -W -f='${db:Status-Abbrev}${Version}' "$1" \
	2>/dev/null | tr -d ' '; }

# install every package
debs=""
for p in $want; do debs="$debs $(deb "$p")"; done
# shellcheck disable=SC2086
dp -i $debs
for p in $want; do
	[ "$(status "$p")" = "ii$V" ] || fail "$p: status $(status "$p")"
done
gid=$(awk -F: '$1 == "gshare" { print $3 }' "$R/etc/group")
[ -n "$gid" ] || fail "postinst: no group gshare"
[ "$gid" -lt 1000 ] || fail "group gshare: gid $gid is not a system gid"
[ "$(stat -c '%a %u %g' "$R/usr/bin/gsacct")" = "2755 0 $gid" ] ||
	fail "gsacct: $(stat -c '%a %u %g' "$R/usr/bin/gsacct"), want 2755 0 $gid"
dpkg-statoverride --root="$R" --list /usr/bin/gsacct >/dev/null ||
	fail "no statoverride for gsacct"
[ -L "$R/etc/systemd/system/multi-user.target.wants/gshared.service" ] ||
	fail "gshared.service is not enabled"
grep -q '^ExecStart=/usr/sbin/gshared -d -f /etc/gshare/gshare.yaml$' \
	"$R/lib/systemd/system/gshared.service" || fail "gshared.service paths"
ok "install: group gshare ($gid), gsacct 2755 root:gshare, unit enabled"

# the installed programs run (configuration checks, help)
"$R/usr/sbin/gshared" -n -f "$R/etc/gshare/gshare.yaml" >"$tmp/n" 2>&1 ||
	{ cat "$tmp/n"; fail "gshared -n with the packaged gshare.yaml"; }
"$R/usr/sbin/gshare-device-plugin" -n >"$tmp/n" 2>&1 ||
	{ cat "$tmp/n"; fail "gshare-device-plugin -n"; }
"$R/usr/bin/gsharectl" 2>&1 | grep -q '^usage: gsharectl' ||
	fail "gsharectl (usage)"
"$R/usr/bin/gsacct" --help >/dev/null 2>&1 || fail "gsacct --help"
ok "installed programs run (gshared -n, gshare-device-plugin -n, usage, --help)"

# the launch gate's default path in both plugins is where the package
# puts it (the SPANK plugin exports no symbol to ask: its string; the
# device plugin prints its configuration)
gate=/usr/lib/$MA/gshare/libgshare-gate.so
strings -a "$R/usr/lib/$MA/gshare/spank_gshare.so" | grep -Fqx "$gate" ||
	fail "spank_gshare.so: default preload is not $gate"
! strings -a "$R/usr/lib/$MA/gshare/spank_gshare.so" |
	grep -q '^/usr/local/.*libgshare-gate' ||
	fail "spank_gshare.so names a gate under /usr/local"
"$R/usr/sbin/gshare-device-plugin" -n >"$tmp/n" 2>&1
grep -qx "preload_source: $gate" "$tmp/n" ||
	{ cat "$tmp/n"; fail "gshare-device-plugin: preload_source is not $gate"; }
case $want in *gshare-gate*)
	[ -f "$R$gate" ] || fail "gshare-gate did not install $gate" ;;
esac
ok "default launch gate of both plugins: $gate (the packaged one)"

case $want in *libgshare-dev*) gs_pc_link "$R" ;; esac

# state the agent would have written; an administrator's edit
mkdir -p "$R/var/lib/gshare"
echo store >"$R/var/lib/gshare/usage.db"
echo table >"$R/var/lib/gshare/allocs.0"
echo "# site edit" >>"$R/etc/gshare/gshare.yaml"

# upgrade to the same package with a higher version
V2=$V+test1
dpkg-deb -R "$(deb gshare)" "$tmp/up"
sed -i "s/^Version: .*/Version: $V2/" "$tmp/up/DEBIAN/control"
dpkg-deb -b "$tmp/up" "$tmp/gshare-up.deb" >/dev/null
dp -i "$tmp/gshare-up.deb"
[ "$(status gshare)" = "ii$V2" ] || fail "upgrade: status $(status gshare)"
[ "$(cat "$R/var/lib/gshare/usage.db")" = store ] ||
	fail "upgrade lost the usage store"
[ -f "$R/var/lib/gshare/allocs.0" ] || fail "upgrade lost the allocation table"
grep -q '^# site edit$' "$R/etc/gshare/gshare.yaml" ||
	fail "upgrade lost the edit of gshare.yaml"
[ "$(stat -c '%a %g' "$R/usr/bin/gsacct")" = "2755 $gid" ] ||
	fail "upgrade: gsacct is $(stat -c '%a %g' "$R/usr/bin/gsacct")"
[ "$(grep -c '^gshare:' "$R/etc/group")" = 1 ] || fail "upgrade: group twice"
ok "upgrade $V -> $V2 keeps the usage store, the edited conffile, gsacct"

# remove: programs go, state and configuration stay
dp -r gshare
[ "$(status gshare)" = "rc$V2" ] || fail "remove: status $(status gshare)"
[ ! -e "$R/usr/sbin/gshared" ] || fail "remove left gshared"
[ -f "$R/var/lib/gshare/usage.db" ] || fail "remove deleted the usage store"
[ -f "$R/etc/gshare/gshare.yaml" ] || fail "remove deleted the conffile"
ok "remove keeps the usage store and gshare.yaml"

# purge: state, configuration, statoverride and unit state go; group stays
dp -P gshare
case $(status gshare) in
''|un*|pn*) ;; *) fail "purge: status $(status gshare)" ;; esac
[ ! -e "$R/var/lib/gshare" ] || fail "purge left /var/lib/gshare"
[ ! -e "$R/etc/gshare/gshare.yaml" ] || fail "purge left gshare.yaml"
! dpkg-statoverride --root="$R" --list /usr/bin/gsacct >/dev/null ||
	fail "purge left the statoverride of gsacct"
[ ! -e "$R/etc/systemd/system/multi-user.target.wants/gshared.service" ] ||
	fail "purge left the unit enabled"
grep -q '^gshare:' "$R/etc/group" || fail "purge removed the group"
ok "purge removes /var/lib/gshare, gshare.yaml, the statoverride; keeps the group"

# the other packages remove and purge cleanly too
others=$(echo "$want" | tr ' ' '\n' | grep -vx gshare | tr '\n' ' ')
# shellcheck disable=SC2086
dp -P $others
left=$(find "$R" -type f ! -path "$R/var/lib/dpkg/*" ! -path "$R/etc/*" |
	head -n 5)
[ -z "$left" ] || fail "purge left files: $left"
ok "purge of $others leaves no files"
echo "PASS ($(($(date +%s) - start)) s)"
