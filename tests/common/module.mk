# tests/common — cmocka unit tests of common/ (config, protocol, client).

COMMON_TESTS := test_config test_proto test_client
COMMON_TEST_BINS := $(COMMON_TESTS:%=$(B)/tests/common/%)
UNIT_TESTS += $(COMMON_TEST_BINS)

$(B)/tests/common/%: $(B)/tests/common/%.o $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(GSCOMMON_LDLIBS)

# the codec test injects allocation failures
$(B)/tests/common/test_proto: LDFLAGS += -Wl,--wrap=calloc,--wrap=realloc
