# tests/fuzz — libFuzzer targets (clang -fsanitize=fuzzer).  `make fuzz`
# builds them; `make test` runs each for a bounded time (tests/fuzz/run.sh).

FUZZ_PROTO := $(B)/tests/fuzz/fuzz_proto
FUZZERS += $(FUZZ_PROTO)
TEST_HELPERS += $(FUZZ_PROTO)
INTEG_TESTS += tests/fuzz/run.sh

FUZZ_CFLAGS := -std=gnu11 -D_GNU_SOURCE -g -O1 -Icommon \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined

$(FUZZ_PROTO): tests/fuzz/fuzz_proto.c common/gs_proto.c common/gs_error.c \
	    common/gs_proto.h common/gs_error.h
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) -o $@ tests/fuzz/fuzz_proto.c \
	    common/gs_proto.c common/gs_error.c
