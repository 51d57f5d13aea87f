/*
 * fuzz_state.c — libFuzzer target for the allocation table decoder
 * (node-agent/state.c).  Any input must decode or be refused with an
 * error, never crash; whatever decodes must survive encode → decode
 * unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gs_state st, back;
	struct gs_error err;
	char *buf;
	size_t len;

	if (gs_state_decode((const char *)data, size, &st, &err) < 0) {
		if (st.n != 0 || st.v != NULL || err.msg[0] == '\0')
			abort();
		return 0;
	}
	if (gs_state_encode(&st, &buf, &len, &err) < 0)
		abort();
	if (gs_state_decode(buf, len, &back, &err) < 0)
		abort();
	if (back.n != st.n || back.next_id != st.next_id ||
	    back.seq != st.seq ||
	    (st.n && memcmp(back.v, st.v, st.n * sizeof(*st.v)) != 0))
		abort();
	gs_state_clear(&back);
	gs_state_clear(&st);
	free(buf);
	return 0;
}
