#!/bin/sh
# Run the configuration-parser fuzzer for a bounded time (FUZZ_SECONDS,
# default 15) from the golden inputs of tests/config (good and bad files)
# as seeds.  Fails on any crash, sanitizer report, error without its file
# name, or a printed config that does not load back to the same text.
set -u
B=${B:-build}
. "$(dirname "$0")/../lib/fuzz.sh"
gs_fuzz_init gsfuzzcfg
for f in tests/config/*.in node-agent/gshare.yaml; do
	[ -f "$f" ] && cp "$f" "$dir/seeds/$(basename "$f")"
done
gs_fuzz_run "$B/tests/config/fuzz_config" "${FUZZ_SECONDS:-15}" 4096
