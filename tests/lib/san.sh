# tests/lib/san.sh — sourced by the scripts that run an integration test
# against the ASan+UBSan gshared `make test` builds under build/san
# (SAN_TEST_BINS).  From the repository root:
#
#   . tests/lib/san.sh
#   gs_san_exec [VAR=VALUE...] CMD...   exec CMD with GSHARED pointing at
#                                       the sanitized agent and the
#                                       sanitizers' options set
#
# A sanitizer report kills the agent (UBSan does not recover), which the
# test sees as a failed stop or a job that never settles.

GS_SAN_GSHARED=build/san/node-agent/gshared

gs_san_exec() {
	[ -x "$GS_SAN_GSHARED" ] ||
		{ echo "FAIL $GS_SAN_GSHARED not built (make test builds it)" >&2; exit 1; }
	exec env GSHARED="$GS_SAN_GSHARED" \
		ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:abort_on_error=0" \
		UBSAN_OPTIONS=print_stacktrace=1 "$@"
}
