#!/bin/sh
# Validate crds/ offline: install kubernetes-models from the npm registry
# into build/k8s-npm, check every manifest (must pass), every broken
# manifest under tests/k8s/manifests/bad and a broken copy of the real
# DaemonSet (must fail, each with its message), and the ConfigMap's agent
# and plugin configurations with the programs' own -n.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
B=${B:-build}
npmdir=$top/$B/k8s-npm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "manifests: FAIL: $*"; exit 1; }

command -v node >/dev/null || fail "node not found (Debian package nodejs)"
command -v npm >/dev/null || fail "npm not found (Debian package npm)"
mkdir -p "$npmdir"
cp "$top/tests/k8s/manifests/package.json" "$npmdir/package.json"
echo "manifests: npm install kubernetes-models (node $(node --version))"
(cd "$npmdir" && npm install --no-audit --no-fund --loglevel=error \
	>"$tmp/npm.log" 2>&1) || { cat "$tmp/npm.log"; fail "npm install"; }
export NODE_PATH="$npmdir/node_modules"
v="node $top/tests/k8s/manifests/validate.js --crd $top/crds/gsharepolicy-crd.yaml"

# 1. The real manifests.
$v --dump-config "$tmp/cfg" "$top"/crds/*.yaml || fail "crds/ does not validate"
n=$($v "$top"/crds/*.yaml | grep -c '^ok')
[ "$n" -ge 9 ] || fail "expected at least 9 documents, saw $n"

# 2. Broken manifests must fail, each for its own reason.
for f in "$top"/tests/k8s/manifests/bad/*.yaml; do
	if $v "$f" >"$tmp/out" 2>&1; then
		cat "$tmp/out"; fail "$(basename "$f") was accepted"
	fi
	grep -q '^FAIL' "$tmp/out" || { cat "$tmp/out"; fail "$f: no FAIL line"; }
	echo "manifests: refused as expected: $(sed -n 's/^FAIL //p' "$tmp/out" | head -1)"
done

# 3. Break the real DaemonSet in two ways: a wrong type, a lost volume.
sed 's/hostPID: true/hostPID: "yes"/' "$top/crds/daemonset.yaml" >"$tmp/ds1.yaml"
! $v "$tmp/ds1.yaml" >"$tmp/out" 2>&1 || fail "hostPID: \"yes\" accepted"
grep -q 'hostPID must be boolean' "$tmp/out" || { cat "$tmp/out"; fail "wrong message"; }
sed 's/name: agent-socket$/name: agent-sockets/' "$top/crds/daemonset.yaml" |
	awk '/volumes:/{v=1} v&&/name: agent-sockets/{sub(/agent-sockets/,"agent-socket")} {print}' >"$tmp/ds2.yaml"
! $v "$tmp/ds2.yaml" >"$tmp/out" 2>&1 || fail "undeclared volume accepted"
grep -q 'undeclared volume agent-sockets' "$tmp/out" || { cat "$tmp/out"; fail "wrong message"; }
sed 's/weight: 200/weight: 20000/' "$top/crds/example-gsharepolicy.yaml" >"$tmp/p.yaml"
! $v "$tmp/p.yaml" >/dev/null 2>&1 || fail "weight 20000 accepted"

# 4. The ConfigMap's configurations, checked by the programs themselves.
"$top/$B/k8s-plugin/gshare-device-plugin" -n -f "$tmp/cfg/device-plugin.yaml" \
	>"$tmp/dp.out" || fail "device-plugin.yaml rejected by gshare-device-plugin -n"
grep -q '^resource: gshare.io/gpu-share' "$tmp/dp.out" || fail "plugin -n output"
printf 'bogus_key: 1\n' >>"$tmp/cfg/device-plugin.yaml"
! "$top/$B/k8s-plugin/gshare-device-plugin" -n -f "$tmp/cfg/device-plugin.yaml" \
	>/dev/null 2>&1 || fail "unknown key accepted by the plugin"
gshared=$top/$B/node-agent/gshared
if [ -x "$gshared" ]; then
	"$gshared" -n -f "$tmp/cfg/gshare.yaml" >"$tmp/ag.out" ||
		fail "gshare.yaml rejected by gshared -n"
	echo "manifests: ConfigMap gshare.yaml accepted by gshared -n"
elif grep -qs gshared "$top/node-agent/module.mk"; then
	fail "$gshared not built"
else
	echo "manifests: SKIP gshare.yaml check: this tree has no gshared"
fi
echo "manifests: ConfigMap device-plugin.yaml accepted by gshare-device-plugin -n"
echo "manifests: PASS"
