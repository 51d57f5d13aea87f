#!/bin/sh
# Run the device plugin's fuzzer (resource names, device IDs, preferred
# allocation, Allocate checks, PodResources reconciliation) for a bounded
# time (FUZZ_SECONDS, default 10) from seeds shaped like what kubelet
# sends: a size byte, then one ID per line.
set -u
B=${B:-build}
. "$(dirname "$0")/../lib/fuzz.sh"
gs_fuzz_init gsfuzz-dp
i=0
for size in '\001' '\002' '\003' '\007'; do
	for ids in 'gshare.io/gpu-share\nGPU-a::0\nGPU-a::1' \
		   'GPU-a::0\nGPU-b::99\nGPU-a::7\nGPU-b::3' \
		   'example.com/gpu\nGPU-b::00\nGPU-b::-1\nGPU-a::100' \
		   'kubernetes.io/x\nGPU-a::\n::3\nGPU-a::2::1' \
		   'default\npod-0\nGPU-a::4\nGPU-a::5\nctr'; do
		printf "$size$ids" > "$dir/seeds/s$i"
		i=$((i + 1))
	done
done
gs_fuzz_run "$B/fuzz/fuzz_dp" "${FUZZ_SECONDS:-10}" 1024
