/*
 * test_config.c — unit tests of the table-driven configuration code
 * (common/gs_config.c, common/gs_cfgyaml.c): leaf parsers, defaults,
 * key=value arguments with every rejection path, YAML mappings with
 * file:line errors, and the print → parse round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gs_config.h"

struct tcfg {
	char name[16];
	char path[64];
	uint32_t count;
	uint64_t big;
	int flag;
	uint64_t slice;
	uint32_t color;
};

static const char *const colors[] = { "red", "green", "blue", NULL };

static const struct gs_cfg_key tkeys[] = {
	GS_CFG_KEY_STRING("name", struct tcfg, name, 1, "default",
			  "a name"),
	GS_CFG_KEY_STRING("path", struct tcfg, path, 0, NULL, "a path"),
	GS_CFG_KEY_UINT("count", struct tcfg, count, 1, 100, "7", "count"),
	GS_CFG_KEY_UINT("big", struct tcfg, big, 0, 0, "0", "big"),
	GS_CFG_KEY_BOOL("flag", struct tcfg, flag, "false", "flag"),
	GS_CFG_KEY_DURATION("slice", struct tcfg, slice, 100 * GS_NS_PER_US,
			    10 * GS_NS_PER_S, "4ms", "slice"),
	GS_CFG_KEY_ENUM("color", struct tcfg, color, colors, "green",
			"color"),
	GS_CFG_KEY_END,
};

static void test_defaults(void **state)
{
	struct tcfg c;
	struct gs_error err;

	(void)state;
	memset(&c, 0xaa, sizeof(c));
	assert_int_equal(gs_cfg_defaults(tkeys, &c, &err), 0);
	assert_string_equal(c.name, "default");
	assert_string_equal(c.path, "");
	assert_int_equal(c.count, 7);
	assert_int_equal(c.big, 0);
	assert_int_equal(c.flag, 0);
	assert_int_equal(c.slice, 4 * GS_NS_PER_MS);
	assert_int_equal(c.color, 1);
}

static void test_durations(void **state)
{
	static const struct {
		const char *s;
		uint64_t ns;
	} ok[] = {
		{ "0", 0 },
		{ "4ms", 4000000 },
		{ "1.5s", 1500000000 },
		{ "250us", 250000 },
		{ "7ns", 7 },
		{ "2m", 120000000000 },
		{ "1h", 3600000000000 },
		{ "0.5ms", 500000 },
		{ "0ms", 0 },
	};
	static const char *const bad[] = {
		"", "4", "ms", "4 ms", "4mss", "-1ms", "1.5ns", "1e3ms",
		"99999999999999999999s", "18446744073709551615h", ".ms",
		"4MS", "1..5s",
	};
	char buf[32];
	uint64_t v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 12345;
		assert_int_equal(gs_cfg_parse_duration(ok[i].s, &v), 0);
		assert_int_equal(v, ok[i].ns);
		/* format → parse gives the same value back */
		gs_cfg_format_duration(v, buf, sizeof(buf));
		assert_int_equal(gs_cfg_parse_duration(buf, &v), 0);
		assert_int_equal(v, ok[i].ns);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 12345;
		assert_int_equal(gs_cfg_parse_duration(bad[i], &v), -1);
		assert_int_equal(v, 12345);
	}
	gs_cfg_format_duration(4 * GS_NS_PER_MS, buf, sizeof(buf));
	assert_string_equal(buf, "4ms");
	gs_cfg_format_duration(1500 * GS_NS_PER_MS, buf, sizeof(buf));
	assert_string_equal(buf, "1500ms");
	gs_cfg_format_duration(120 * GS_NS_PER_S, buf, sizeof(buf));
	assert_string_equal(buf, "2m");
}

static void test_sizes(void **state)
{
	static const struct {
		const char *s;
		uint64_t b;
	} ok[] = {
		{ "0", 0 },
		{ "1048576", 1048576 },
		{ "20G", 20ull << 30 },
		{ "20g", 20ull << 30 },
		{ "512MiB", 512ull << 20 },
		{ "512MB", 512ull << 20 },
		{ "4k", 4096 },
		{ "3T", 3ull << 40 },
		{ "100B", 100 },
		{ "16777215T", 16777215ull << 40 },
	};
	static const char *const bad[] = {
		"", "G", "-1G", "1.5G", "20 G", "20GG", "20Gi B", "20X",
		"16777216T", "99999999999999999999", "20iB", "1e3",
	};
	char buf[32];
	uint64_t v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 12345;
		assert_int_equal(gs_cfg_parse_size(ok[i].s, &v), 0);
		assert_int_equal(v, ok[i].b);
		gs_cfg_format_size(v, buf, sizeof(buf));
		assert_int_equal(gs_cfg_parse_size(buf, &v), 0);
		assert_int_equal(v, ok[i].b);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 12345;
		assert_int_equal(gs_cfg_parse_size(bad[i], &v), -1);
		assert_int_equal(v, 12345);
	}
	gs_cfg_format_size(20ull << 30, buf, sizeof(buf));
	assert_string_equal(buf, "20G");
	gs_cfg_format_size(1536ull << 20, buf, sizeof(buf));
	assert_string_equal(buf, "1536M");
	gs_cfg_format_size(1000, buf, sizeof(buf));
	assert_string_equal(buf, "1000");
}

static void test_uint_bool(void **state)
{
	uint64_t v;
	int b;

	(void)state;
	assert_int_equal(gs_cfg_parse_uint("18446744073709551615", &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(gs_cfg_parse_uint("18446744073709551616", &v), -1);
	assert_int_equal(gs_cfg_parse_uint("-1", &v), -1);
	assert_int_equal(gs_cfg_parse_uint("1x", &v), -1);
	assert_int_equal(gs_cfg_parse_uint("", &v), -1);
	assert_int_equal(gs_cfg_parse_uint(" 1", &v), -1);
	assert_int_equal(gs_cfg_parse_bool("Yes", &b), 0);
	assert_int_equal(b, 1);
	assert_int_equal(gs_cfg_parse_bool("off", &b), 0);
	assert_int_equal(b, 0);
	assert_int_equal(gs_cfg_parse_bool("2", &b), -1);
}

static void expect_set_error(const char *key, const char *value,
			     const char *msg)
{
	struct tcfg c, before;
	struct gs_error err;

	gs_cfg_defaults(tkeys, &c, NULL);
	before = c;
	assert_int_equal(gs_cfg_set(tkeys, &c, key, value, "f.yaml:3", &err),
			 -1);
	assert_int_equal(err.code, GS_ECONFIG);
	assert_string_equal(err.msg, msg);
	/* a failed set leaves the object unchanged */
	assert_memory_equal(&c, &before, sizeof(c));
}

static void test_set_errors(void **state)
{
	(void)state;
	expect_set_error("nope", "1", "f.yaml:3: nope: unknown key");
	expect_set_error("name", "", "f.yaml:3: name: must not be empty");
	expect_set_error("name", "0123456789abcdef",
			 "f.yaml:3: name: too long (16 bytes, at most 15)");
	expect_set_error("count", "0",
			 "f.yaml:3: count: 0 out of range 1..100");
	expect_set_error("count", "101",
			 "f.yaml:3: count: 101 out of range 1..100");
	expect_set_error("count", "ten",
			 "f.yaml:3: count: 'ten' is not a non-negative "
			 "integer");
	expect_set_error("flag", "maybe",
			 "f.yaml:3: flag: 'maybe' is not a boolean "
			 "(true/false, yes/no, on/off, 1/0)");
	expect_set_error("slice", "4",
			 "f.yaml:3: slice: '4' is not a duration (number "
			 "and unit ns/us/ms/s/m/h, e.g. 4ms)");
	expect_set_error("slice", "50us",
			 "f.yaml:3: slice: 50us out of range 100us..10s");
	expect_set_error("slice", "11s",
			 "f.yaml:3: slice: 11s out of range 100us..10s");
	expect_set_error("color", "pink",
			 "f.yaml:3: color: 'pink' is not one of: red, green, "
			 "blue");
	expect_set_error("count", NULL, "f.yaml:3: count: missing value");
}

static void test_set_ok(void **state)
{
	struct tcfg c;
	struct gs_error err;

	(void)state;
	gs_cfg_defaults(tkeys, &c, NULL);
	assert_int_equal(gs_cfg_set(tkeys, &c, "name", "012345678901234",
				    NULL, &err), 0);
	assert_string_equal(c.name, "012345678901234");
	assert_int_equal(gs_cfg_set(tkeys, &c, "big", "18446744073709551615",
				    NULL, &err), 0);
	assert_true(c.big == UINT64_MAX);
	assert_int_equal(gs_cfg_set(tkeys, &c, "color", "blue", NULL, &err),
			 0);
	assert_int_equal(c.color, 2);
	/* no where: "key: message" */
	assert_int_equal(gs_cfg_set(tkeys, &c, "count", "x", NULL, &err), -1);
	assert_string_equal(err.msg,
			    "count: 'x' is not a non-negative integer");
}

static void test_args(void **state)
{
	struct tcfg c;
	struct gs_error err;
	char *good[] = { "count=9", "flag=yes", "slice=1ms", "path=/a=b",
			 "color=red" };
	char *bad1[] = { "count=9", "flag" };
	char *bad2[] = { "=1" };
	char *bad3[] = { "count=9", "bogus=1" };
	char *bad4[] = { "count=200" };

	(void)state;
	gs_cfg_defaults(tkeys, &c, NULL);
	assert_int_equal(gs_cfg_parse_args(tkeys, &c, 5, good, &err), 0);
	assert_int_equal(c.count, 9);
	assert_int_equal(c.flag, 1);
	assert_int_equal(c.slice, GS_NS_PER_MS);
	assert_string_equal(c.path, "/a=b");
	assert_int_equal(c.color, 0);
	assert_int_equal(gs_cfg_parse_args(tkeys, &c, 2, bad1, &err), -1);
	assert_string_equal(err.msg, "argument 2: 'flag': expected key=value");
	assert_int_equal(gs_cfg_parse_args(tkeys, &c, 1, bad2, &err), -1);
	assert_string_equal(err.msg, "argument 1: '=1': expected key=value");
	assert_int_equal(gs_cfg_parse_args(tkeys, &c, 2, bad3, &err), -1);
	assert_string_equal(err.msg, "argument 2: bogus: unknown key");
	assert_int_equal(gs_cfg_parse_args(tkeys, &c, 1, bad4, &err), -1);
	assert_string_equal(err.msg,
			    "argument 1: count: 200 out of range 1..100");
	assert_int_equal(err.code, GS_ECONFIG);
	assert_int_equal(gs_cfg_parse_args(tkeys, &c, 0, NULL, &err), 0);
}

/* print (YAML and args styles) → parse gives the same struct back. */
static void test_round_trip(void **state)
{
	struct tcfg a, b;
	struct gs_error err;
	struct gs_ynode *root = NULL;
	char *text = NULL, *argv[16], *line, *save = NULL;
	size_t len = 0;
	FILE *f;
	int argc = 0;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	gs_cfg_defaults(tkeys, &a, NULL);
	assert_int_equal(gs_cfg_set(tkeys, &a, "path",
				    "/tmp/with space: \"q\" \\ #x", NULL, &err),
			 0);
	assert_int_equal(gs_cfg_set(tkeys, &a, "name", "yes", NULL, &err), 0);
	assert_int_equal(gs_cfg_set(tkeys, &a, "slice", "1.5s", NULL, &err),
			 0);

	f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_int_equal(gs_cfg_print(tkeys, &a, GS_CFG_YAML, NULL, f), 0);
	fclose(f);
	assert_int_equal(gs_yaml_load_string(text, len, "rt", &root, &err), 0);
	gs_cfg_defaults(tkeys, &b, NULL);
	assert_int_equal(gs_cfg_apply_yaml(tkeys, &b, root, "rt", NULL, NULL,
					   &err), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	gs_ynode_free(root);
	free(text);

	text = NULL;
	f = open_memstream(&text, &len);
	assert_int_equal(gs_cfg_print(tkeys, &a, GS_CFG_ARGS, NULL, f), 0);
	fclose(f);
	for (line = strtok_r(text, "\n", &save); line != NULL && argc < 16;
	     line = strtok_r(NULL, "\n", &save))
		argv[argc++] = line;
	memset(&b, 0, sizeof(b));
	gs_cfg_defaults(tkeys, &b, NULL);
	assert_int_equal(gs_cfg_parse_args(tkeys, &b, argc, argv, &err), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	free(text);
}

static void expect_yaml_error(const char *text, const char *msg)
{
	struct gs_ynode *root = NULL;
	struct gs_error err;
	struct tcfg c;
	int rv;

	gs_cfg_defaults(tkeys, &c, NULL);
	rv = gs_yaml_load_string(text, strlen(text), "t.yaml", &root, &err);
	if (rv == 0) {
		rv = gs_cfg_apply_yaml(tkeys, &c, root, "t.yaml", NULL, NULL,
				       &err);
		gs_ynode_free(root);
	}
	assert_int_equal(rv, -1);
	assert_int_equal(err.code, GS_ECONFIG);
	if (strcmp(err.msg, msg) != 0)
		fail_msg("got '%s', want '%s'", err.msg, msg);
}

static void test_yaml_errors(void **state)
{
	(void)state;
	expect_yaml_error("count: 3\nbogus: 1\n",
			  "t.yaml:2: bogus: unknown key");
	expect_yaml_error("count: 3\n\ncount: 4\n",
			  "t.yaml:3: count: duplicate key (first at line 1)");
	expect_yaml_error("count: [1, 2]\n",
			  "t.yaml:1: count: expected a single value");
	expect_yaml_error("- a\n- b\n", "t.yaml:1: expected a mapping");
	expect_yaml_error("a: &x 1\nb: *x\n",
			  "t.yaml:1: anchors are not supported");
	/* tags anywhere: value, key, mapping, list, document */
	expect_yaml_error("count: !!int 3\n",
			  "t.yaml:1: tags are not supported "
			  "(tag:yaml.org,2002:int)");
	expect_yaml_error("!!str count: 3\n",
			  "t.yaml:1: tags are not supported "
			  "(tag:yaml.org,2002:str)");
	expect_yaml_error("count: !!map {a: 1}\n",
			  "t.yaml:1: tags are not supported "
			  "(tag:yaml.org,2002:map)");
	expect_yaml_error("count: !x [1]\n",
			  "t.yaml:1: tags are not supported (!x)");
	expect_yaml_error("--- !x\ncount: 3\n",
			  "t.yaml:1: tags are not supported (!x)");
	expect_yaml_error("&k count: 3\n",
			  "t.yaml:1: anchors are not supported");
	expect_yaml_error("count: 3\n---\ncount: 4\n",
			  "t.yaml:2: only one YAML document is allowed");
	expect_yaml_error("count: 3\nslice: 1\n",
			  "t.yaml:2: slice: '1' is not a duration (number "
			  "and unit ns/us/ms/s/m/h, e.g. 4ms)");
	expect_yaml_error("count: [\n", "t.yaml:2: did not find expected "
			  "node content");
	expect_yaml_error("count:\n", "t.yaml:1: count: '' is not a "
			  "non-negative integer");
}

static void test_yaml_tree(void **state)
{
	const char *text = "a: 1\nb:\n  c: x\n  d: [1, 2]\n";
	struct gs_ynode *root = NULL;
	const struct gs_ynode *b, *d;
	struct gs_error err;

	(void)state;
	assert_int_equal(gs_yaml_load_string(text, strlen(text), "t", &root,
					     &err), 0);
	assert_int_equal(root->kind, GS_YNODE_MAP);
	b = gs_ynode_get(root, "b");
	assert_non_null(b);
	assert_int_equal(b->kind, GS_YNODE_MAP);
	assert_int_equal(b->key_line, 2);
	assert_string_equal(gs_ynode_get(b, "c")->value, "x");
	d = gs_ynode_get(b, "d");
	assert_int_equal(d->kind, GS_YNODE_SEQ);
	assert_string_equal(d->child->value, "1");
	assert_string_equal(d->child->next->value, "2");
	assert_null(gs_ynode_get(root, "zz"));
	gs_ynode_free(root);

	/* empty input (or only comments): an empty mapping at line 0, so
	 * that callers can tell it from an explicit {} */
	assert_int_equal(gs_yaml_load_string("", 0, "t", &root, &err), 0);
	assert_int_equal(root->kind, GS_YNODE_MAP);
	assert_null(root->child);
	assert_int_equal(root->line, 0);
	gs_ynode_free(root);
	assert_int_equal(gs_yaml_load_string("# c\n\n", 5, "t", &root, &err),
			 0);
	assert_int_equal(root->line, 0);
	gs_ynode_free(root);
	assert_int_equal(gs_yaml_load_string("{}\n", 3, "t", &root, &err), 0);
	assert_int_equal(root->kind, GS_YNODE_MAP);
	assert_null(root->child);
	assert_int_equal(root->line, 1);
	gs_ynode_free(root);

	assert_int_equal(gs_yaml_load_file("/nonexistent/x.yaml", &root,
					   &err), -1);
	assert_int_equal(err.code, GS_EIO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_uint_bool),
		cmocka_unit_test(test_set_errors),
		cmocka_unit_test(test_set_ok),
		cmocka_unit_test(test_args),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_yaml_errors),
		cmocka_unit_test(test_yaml_tree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
