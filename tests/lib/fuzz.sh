# tests/lib/fuzz.sh — sourced by the fuzz runners (POSIX sh): a libFuzzer
# binary run for a bounded time over a seed corpus in a temporary
# directory, which is removed on any exit.
#
#   . tests/lib/fuzz.sh
#   gs_fuzz_init NAME                 $dir=/tmp/NAME.XXXXXX, $dir/seeds
#   printf ... > "$dir/seeds/x"       the script's own seeds
#   gs_fuzz_run BINARY SECONDS MAXLEN returns the fuzzer's exit status
#
# On failure the end of the fuzzer's log and a dump of every crash, leak
# or timeout input are printed.
#
# The run starts from a fixed random seed (FUZZ_SEED, default 1), so
# `make test` tries the same inputs in the same order on every machine,
# up to how far it gets in its time, and a failure reproduces with the
# seed it printed.  FUZZ_SEED=0 lets libFuzzer pick a new seed every run (long
# exploratory runs: FUZZ_SEED=0 FUZZ_SECONDS=600 tests/config/fuzz.sh).

gs_fuzz_init() {	# NAME
	dir=$(mktemp -d "/tmp/$1.XXXXXX") || exit 1
	trap 'rm -rf "$dir"' EXIT INT TERM
	mkdir "$dir/seeds"
}

gs_fuzz_run() {	# BINARY SECONDS MAXLEN
	case $1 in
	/*) fz=$1 ;;
	*) fz=$(pwd)/$1 ;;
	esac
	[ -x "$fz" ] || { echo "FAIL $1 not built (make fuzz)" >&2; return 1; }
	(cd "$dir" && "$fz" -seed="${FUZZ_SEED:-1}" -max_total_time="$2" \
		-rss_limit_mb=2048 -max_len="$3" -print_final_stats=1 "$dir/seeds" \
		>"$dir/log" 2>&1)
	frc=$?
	grep -m1 'Seed:' "$dir/log"
	tail -n 8 "$dir/log"
	if [ $frc != 0 ]; then
		grep -v '^#' "$dir/log" | tail -n 60
		for f in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-*; do
			[ -e "$f" ] && { echo "input $f:"; od -A d -t x1z "$f" | head -40; }
		done
	fi
	return $frc
}
