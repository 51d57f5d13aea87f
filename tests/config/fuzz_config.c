/*
 * fuzz_config.c — libFuzzer target for gshared's configuration parser
 * (libyaml events → node tree → table-driven keys → validation).
 *
 * Any input must either be refused with a message that names the file
 * and line ("fuzz.yaml:N: ...", or "fuzz.yaml: ..." for a document that
 * is not a mapping) or load.  A loaded config printed by
 * gs_agent_config_print must load back, and print the same text again:
 * the normalized file is a fixed point (what `gshared -n` promises).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* gs_agent_config_print into a heap buffer; NULL on failure. */
static char *print_config(const struct gs_agent_config *c, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (f == NULL)
		return NULL;
	if (gs_agent_config_print(c, f) < 0) {
		fclose(f);
		free(buf);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gs_agent_config c, again;
	struct gs_error err;
	char *p1, *p2;
	size_t n1 = 0, n2 = 0;

	memset(&err, 0, sizeof(err));
	if (gs_agent_config_load_string((const char *)data, size, "fuzz.yaml",
					&c, &err) < 0) {
		if (strncmp(err.msg, "fuzz.yaml", 9) != 0 || err.code == 0) {
			fprintf(stderr, "error without its file: %d '%s'\n",
				err.code, err.msg);
			abort();
		}
		return 0;
	}
	p1 = print_config(&c, &n1);
	if (p1 == NULL)
		abort();
	if (gs_agent_config_load_string(p1, n1, "printed.yaml", &again,
					&err) < 0) {
		fprintf(stderr, "printed config does not load: %s\n%s",
			err.msg, p1);
		abort();
	}
	p2 = print_config(&again, &n2);
	if (p2 == NULL || n1 != n2 || memcmp(p1, p2, n1) != 0) {
		fprintf(stderr, "not a fixed point:\n%s---\n%s", p1,
			p2 ? p2 : "(null)");
		abort();
	}
	free(p1);
	free(p2);
	return 0;
}
