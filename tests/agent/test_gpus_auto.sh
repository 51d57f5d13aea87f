#!/bin/sh
# `gpus: auto` must never simulate a GPU on a node that has NVIDIA GPUs or
# is labelled as a GPU node: with NVML unusable (here: no
# libnvidia-ml.so.1 on the path), gshared refuses to start and says why;
# on a node without any sign of a GPU it still falls back to one simulated
# GPU, and explicit simulation always works.  The host is faked with
# GSHARE_HOST_ROOT (a tree with sys/bus/pci/devices/* and dev/).
set -u
. "$(dirname "$0")/../lib/agent.sh"
gs_agent_init gsauto
# NVML must not be found, whatever the machine has
nonvml="LD_LIBRARY_PATH=$dir/none"
mkdir -p "$dir/none" "$dir/host/sys/bus/pci/devices/0000:00:02.0" \
    "$dir/empty/sys/bus/pci/devices/0000:00:02.0" "$dir/host/dev"
printf '0x8086\n' > "$dir/empty/sys/bus/pci/devices/0000:00:02.0/vendor"
printf '0x030000\n' > "$dir/empty/sys/bus/pci/devices/0000:00:02.0/class"
gs_agent_conf <<CONF
gpus: auto
CONF
# refused VAR=VALUE...: gshared must exit non-zero within 10 s naming why
refused() {
	want=$1
	shift
	env "$@" $GSHARED -d -f "$dir/gshare.yaml" >"$dir/out" 2>&1 &
	p=$!
	t=0
	while kill -0 $p 2>/dev/null && [ $t -lt 200 ]; do
		sleep 0.05
		t=$((t + 1))
	done
	if kill -0 $p 2>/dev/null; then
		kill -9 $p
		wait $p 2>/dev/null
		bad "gpus: auto with $*: gshared kept running (simulated?)"
		return
	fi
	wait $p
	rc=$?
	if [ $rc -ne 0 ] && grep -q "refusing to simulate" "$dir/out" &&
	    grep -q "$want" "$dir/out"; then
		ok "gpus: auto, $want: refused (rc $rc): $(grep -o 'NVML is not usable.*' "$dir/out" | cut -c1-120)"
	else
		bad "gpus: auto with $*: rc $rc: $(cat "$dir/out")"
	fi
}
# an NVIDIA 3D controller on the PCI bus
d=$dir/host/sys/bus/pci/devices/0000:00:02.0
printf '0x10de\n' > "$d/vendor"
printf '0x030200\n' > "$d/class"
refused "NVIDIA GPU on the PCI bus (0000:00:02.0)" "$nonvml" \
    GSHARE_HOST_ROOT="$dir/host"
# a device node only
rm "$d/vendor"
: > "$dir/host/dev/nvidia0"
refused "/dev/nvidia0" "$nonvml" GSHARE_HOST_ROOT="$dir/host"
# the DaemonSet's label
refused "labelled as a GPU node" "$nonvml" GSHARE_GPU_NODE=1 \
    GSHARE_HOST_ROOT="$dir/empty"
# no sign of a GPU: one simulated GPU, logged
gs_agent_start "gpus: auto, no GPU on the node" "$nonvml" \
    GSHARE_HOST_ROOT="$dir/empty"
if $CTL -s "$sock" status | grep -q "simulated" &&
    grep -q "using one simulated GPU" "$dir/log"; then
	ok "no GPU on the node: one simulated GPU, logged"
else
	bad "no GPU: $($CTL -s "$sock" status 2>&1)"
fi
kill $apid
wait $apid 2>/dev/null
apid=
# explicit simulation on a GPU node
gs_agent_conf <<CONF
gpus:
  simulated: 2
CONF
gs_agent_start "explicit simulation on a labelled node" "$nonvml" \
    GSHARE_GPU_NODE=1 GSHARE_HOST_ROOT="$dir/host"
exit $fail
