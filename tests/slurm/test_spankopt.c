/*
 * test_spankopt.c — unit tests of the SPANK plugin's Slurm-free logic
 * (common/gs_spankopt.c): --gshare-* validation, plugstack arguments,
 * gres strings as slurmctld reports them, step names, usage records and
 * the AdminComment merge.  No cluster needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <slurm/slurm.h>

#include "gs_paths.h"
#include "gs_proto.h"
#include "gs_spankopt.h"

static void test_weight(void **state)
{
	struct gs_spank_opts o;
	struct gs_error err;
	static const char *const bad[] = { "", "0", "-1", "+5", "1.5", "abc",
					   "10001", " 5", "5 ", "0x10",
					   "99999999999999999999999" };
	size_t i;

	(void)state;
	gs_spank_opts_init(&o);
	assert_int_equal(o.weight, 0);
	assert_int_equal(gs_spank_opt_weight("1", &o, &err), 0);
	assert_int_equal(o.weight, 1);
	assert_int_equal(gs_spank_opt_weight("10000", &o, &err), 0);
	assert_int_equal(o.weight, 10000);
	assert_int_equal(gs_spank_opt_weight("007", &o, &err), 0);
	assert_int_equal(o.weight, 7);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.weight = 42;
		assert_int_equal(gs_spank_opt_weight(bad[i], &o, &err), -1);
		assert_int_equal(err.code, GS_EINVAL);
		assert_int_equal(o.weight, 42);
		assert_non_null(strstr(err.msg, "--gshare-weight="));
		assert_non_null(strstr(err.msg, "1 to 10000"));
		assert_null(strchr(err.msg, '\n'));
	}
	assert_int_equal(gs_spank_opt_weight(NULL, &o, &err), -1);

	/* site policy: lower is fine, above the shares only up to
	 * max_user_weight (issue 15.1: gshare:30 --gshare-weight=90) */
	o.weight = 0;
	assert_int_equal(gs_spank_weight_allowed(&o, 30, 0, &err), 0);
	o.weight = 30;
	assert_int_equal(gs_spank_weight_allowed(&o, 30, 0, &err), 0);
	o.weight = 5;
	assert_int_equal(gs_spank_weight_allowed(&o, 30, 0, &err), 0);
	o.weight = 90;
	assert_int_equal(gs_spank_weight_allowed(&o, 30, 0, &err), -1);
	assert_int_equal(err.code, GS_EPERM);
	assert_non_null(strstr(err.msg, "--gshare-weight=90: above 30"));
	assert_null(strchr(err.msg, '\n'));
	assert_int_equal(gs_spank_weight_allowed(&o, 30, 100, &err), 0);
	o.weight = 10000;
	assert_int_equal(gs_spank_weight_allowed(&o, 1, 100, &err), -1);
	assert_non_null(strstr(err.msg, "above 100 (max_user_weight)"));
}

static void test_priority_mode(void **state)
{
	struct gs_spank_opts o;
	struct gs_error err;

	(void)state;
	gs_spank_opts_init(&o);
	assert_int_equal(o.priority, GS_PRIO_NORMAL);
	assert_int_equal(o.mode, GS_MODE_TIME);
	assert_int_equal(gs_spank_opt_priority("high", &o, &err), 0);
	assert_int_equal(o.priority, GS_PRIO_HIGH);
	assert_int_equal(gs_spank_opt_priority("low", &o, &err), 0);
	assert_int_equal(o.priority, GS_PRIO_LOW);
	assert_int_equal(gs_spank_opt_priority("normal", &o, &err), 0);
	assert_int_equal(o.priority, GS_PRIO_NORMAL);
	assert_int_equal(gs_spank_opt_priority("urgent", &o, &err), -1);
	assert_string_equal(err.msg, "--gshare-priority=urgent: expected "
				     "low, normal or high");
	assert_int_equal(gs_spank_opt_priority("", &o, &err), -1);
	assert_int_equal(o.priority, GS_PRIO_NORMAL);

	assert_int_equal(gs_spank_opt_mode("space", &o, &err), 0);
	assert_int_equal(o.mode, GS_MODE_SPACE);
	assert_int_equal(gs_spank_opt_mode("time", &o, &err), 0);
	assert_int_equal(o.mode, GS_MODE_TIME);
	assert_int_equal(gs_spank_opt_mode("both", &o, &err), -1);
	assert_string_equal(err.msg,
			    "--gshare-mode=both: expected time or space");
	assert_int_equal(gs_spank_opt_mode(NULL, &o, &err), -1);
}

static void test_mem(void **state)
{
	struct gs_spank_opts o;
	struct gs_error err;

	(void)state;
	gs_spank_opts_init(&o);
	assert_int_equal(o.mem, 0);
	assert_int_equal(gs_spank_opt_mem("20G", &o, &err), 0);
	assert_int_equal(o.mem, 20ull << 30);
	assert_int_equal(gs_spank_opt_mem("512MiB", &o, &err), 0);
	assert_int_equal(o.mem, 512ull << 20);
	assert_int_equal(gs_spank_opt_mem("1M", &o, &err), 0);
	assert_int_equal(gs_spank_opt_mem("16T", &o, &err), 0);
	assert_int_equal(o.mem, 16ull << 40);
	assert_int_equal(gs_spank_opt_mem("1023K", &o, &err), -1);
	assert_string_equal(err.msg, "--gshare-mem=1023K: expected a size "
			    "from 1M to 16T, such as 20G or 512M (units K, M, "
			    "G, T: powers of 1024)");
	assert_int_equal(gs_spank_opt_mem("17T", &o, &err), -1);
	assert_int_equal(gs_spank_opt_mem("1.5G", &o, &err), -1);
	assert_int_equal(gs_spank_opt_mem("-1G", &o, &err), -1);
	assert_int_equal(gs_spank_opt_mem("", &o, &err), -1);
	assert_int_equal(gs_spank_opt_mem(NULL, &o, &err), -1);
	assert_int_equal(o.mem, 16ull << 40);	/* unchanged by errors */
}

static void test_preload(void **state)
{
	struct gs_spank_opts o;
	struct gs_spank_conf c;
	struct gs_error err;
	char buf[64];
	char *args[] = { "preload=no" };

	(void)state;
	gs_spank_opts_init(&o);
	assert_int_equal(o.no_preload, 0);		/* on by default */
	assert_int_equal(gs_spank_opt_preload("no", &o, &err), 0);
	assert_int_equal(o.no_preload, 1);
	assert_int_equal(gs_spank_opt_preload("yes", &o, &err), 0);
	assert_int_equal(o.no_preload, 0);
	assert_int_equal(gs_spank_opt_preload("off", &o, &err), -1);
	assert_string_equal(err.msg,
			    "--gshare-preload=off: expected yes or no");
	assert_int_equal(gs_spank_opt_preload(NULL, &o, &err), -1);

	/* per site: the plugstack.conf argument */
	assert_int_equal(gs_spank_conf_parse(&c, 0, NULL, &err), 0);
	assert_string_equal(c.preload, gs_gate_lib);
	/* LIBDIR/gshare/libgshare-gate.so, from the build (gs_paths.h) */
	assert_true(gs_gate_lib[0] == '/');
	assert_non_null(strstr(gs_gate_lib, "/gshare/libgshare-gate.so"));
	assert_string_equal(strstr(gs_gate_lib, "/gshare/libgshare-gate.so"),
			    "/gshare/libgshare-gate.so");
	assert_int_equal(gs_spank_conf_parse(&c, 1, args, &err), 0);
	assert_string_equal(c.preload, "no");

	/* the gate goes first; an existing LD_PRELOAD is kept after it */
	assert_int_equal(gs_preload_join(NULL, "/g.so", buf, sizeof(buf),
					 &err), 0);
	assert_string_equal(buf, "/g.so");
	assert_int_equal(gs_preload_join("", "/g.so", buf, sizeof(buf),
					 &err), 0);
	assert_string_equal(buf, "/g.so");
	assert_int_equal(gs_preload_join("/a.so /b.so", "/g.so", buf,
					 sizeof(buf), &err), 0);
	assert_string_equal(buf, "/g.so:/a.so /b.so");
	/* already named (twice would load it once anyway): unchanged */
	assert_int_equal(gs_preload_join("/a.so:/g.so", "/g.so", buf,
					 sizeof(buf), &err), 0);
	assert_string_equal(buf, "/a.so:/g.so");
	/* a prefix of an entry is not the entry */
	assert_int_equal(gs_preload_join("/g.so.1", "/g.so", buf,
					 sizeof(buf), &err), 0);
	assert_string_equal(buf, "/g.so:/g.so.1");
	assert_int_equal(gs_preload_join("/a.so", "/g.so", buf, 8, &err),
			 -1);
}

static void test_conf_defaults(void **state)
{
	struct gs_spank_conf c;
	struct gs_error err;

	(void)state;
	assert_int_equal(gs_spank_conf_parse(&c, 0, NULL, &err), 0);
	assert_string_equal(c.agent, GS_DEFAULT_SOCKET);
	assert_string_equal(c.gres, "gshare");
	assert_int_equal(c.timeout_ns, 2 * GS_NS_PER_S);
	assert_int_equal(c.on_agent_down, GS_SPANK_DOWN_FAIL);
	assert_string_equal(c.state_dir, "/run/gshare/spank");
	assert_int_equal(c.admin_comment, 1);
	assert_string_equal(c.sacct, "/usr/bin/sacct");
	assert_string_equal(c.sacctmgr, "/usr/bin/sacctmgr");
}

static void test_conf_args(void **state)
{
	struct gs_spank_conf c;
	struct gs_error err;
	char *good[] = { "agent=/tmp/x/gshared.sock", "required_gres=share",
			 "timeout=250ms", "on_agent_down=unmanaged",
			 "state_dir=/var/tmp/gs", "admin_comment=no" };

	(void)state;
	assert_int_equal(gs_spank_conf_parse(&c, 6, good, &err), 0);
	assert_string_equal(c.agent, "/tmp/x/gshared.sock");
	assert_string_equal(c.gres, "share");
	assert_int_equal(c.timeout_ns, 250 * GS_NS_PER_MS);
	assert_int_equal(c.on_agent_down, GS_SPANK_DOWN_UNMANAGED);
	assert_string_equal(c.state_dir, "/var/tmp/gs");
	assert_int_equal(c.admin_comment, 0);
}

/* Each bad argument is refused with a message naming it; conf is left
 * untouched. */
static void test_conf_bad(void **state)
{
	static const struct {
		const char *arg;
		const char *want;
	} cases[] = {
		{ "agnet=/x", "agnet" },
		{ "agent", "expected key=value" },
		{ "agent=", "agent" },
		{ "agent=relative.sock", "not an absolute path" },
		{ "timeout=5", "timeout" },
		{ "timeout=1ms", "timeout" },
		{ "timeout=2h", "timeout" },
		{ "on_agent_down=maybe", "on_agent_down" },
		{ "admin_comment=perhaps", "admin_comment" },
		{ "state_dir=run", "not an absolute path" },
		{ "required_gres=", "required_gres" },
		{ "agent=/run/%x.sock", "unknown '%x'" },
		{ "agent=/run/%", "unknown" },
		{ "sacct=sacct", "sacct: 'sacct' is not an absolute path" },
		{ "sacctmgr=bin/x", "sacctmgr: 'bin/x'" },
	};
	struct gs_spank_conf c;
	struct gs_error err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[1] = { (char *)cases[i].arg };

		memset(&c, 0x5a, sizeof(c));
		assert_int_equal(gs_spank_conf_parse(&c, 1, argv, &err), -1);
		assert_int_equal(err.code, GS_ECONFIG);
		if (strstr(err.msg, cases[i].want) == NULL)
			fail_msg("'%s': message '%s' lacks '%s'", cases[i].arg,
				 err.msg, cases[i].want);
		assert_int_equal((unsigned char)c.agent[0], 0x5a);
	}
}

static void test_expand(void **state)
{
	struct gs_error err;
	char out[32];

	(void)state;
	assert_int_equal(gs_spank_expand_path("/run/%n/a.sock", "n1", out,
					      sizeof(out), &err),
			 0);
	assert_string_equal(out, "/run/n1/a.sock");
	assert_int_equal(gs_spank_expand_path("/x/%n.%n%%", "ab", out,
					      sizeof(out), &err),
			 0);
	assert_string_equal(out, "/x/ab.ab%");
	assert_int_equal(gs_spank_expand_path("/plain", "n1", out,
					      sizeof(out), &err),
			 0);
	assert_string_equal(out, "/plain");
	assert_int_equal(gs_spank_expand_path("/x/%q", "n1", out, sizeof(out),
					      &err),
			 -1);
	assert_int_equal(gs_spank_expand_path("/x/%n", "a-very-very-long-"
					      "node-name-indeed", out,
					      sizeof(out), &err),
			 -1);
	assert_non_null(strstr(err.msg, "too long"));
	/* exactly fits: 31 chars + NUL */
	assert_int_equal(gs_spank_expand_path("/%n",
					      "abcdefghijklmnopqrstuvwxyz1234",
					      out, sizeof(out), &err),
			 0);
	assert_int_equal(strlen(out), 31);
}

static void test_gres(void **state)
{
	static const struct {
		const char *tres;
		int rv;
		uint64_t count;
	} cases[] = {
		{ "gres:gshare:30", 1, 30 },
		{ "gres/gshare:30", 1, 30 },
		{ "gres/gshare=30", 1, 30 },
		{ "gshare:30", 1, 30 },
		{ "gres:gshare", 1, 1 },
		{ "gres:gpu:a100:1,gres:gshare:30", 1, 30 },
		{ "gres:gshare:30;gres:gpu:1", 1, 30 },
		{ "gres:gshare:h100:20,gres:gshare:a100:10", 1, 30 },
		{ "gres:gshare:h100", 1, 1 },
		{ "gres:gshare:1k", 1, 1024 },
		{ "gres:gpu:2", 0, 0 },
		{ "gres:gsharex:30", 0, 0 },
		{ "gres:gshar:30", 0, 0 },
		{ "cpu=4,mem=100", 0, 0 },
		{ "", 0, 0 },
		{ ",,", 0, 0 },
		{ "gres:gshare:", -1, 0 },
		{ "gres:gshare:h100:", -1, 0 },
		{ "gres:gshare::5", -1, 0 },
		{ "gres:gshare:3x0", -1, 0 },
		{ "gres/gshare=", -1, 0 },
		{ "gres:gshare:99999999999999", -1, 0 },
		{ "gres:gshare:999999999999g", -1, 0 },
		{ "gres:gshare:4194304k", -1, 0 },
		{ "gres:gshare:4194303k", 1, 4294966272ull },
		{ "gres:gshare:4000000000,gres:gshare:t:4000000000", -1, 0 },
	};
	struct gs_error err;
	uint64_t count;
	size_t i;
	int rv;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		count = 777;
		rv = gs_gres_count(cases[i].tres, "gshare", &count, &err);
		if (rv != cases[i].rv)
			fail_msg("'%s': rv %d, want %d (%s)", cases[i].tres,
				 rv, cases[i].rv, err.msg);
		if (rv == 1 && count != cases[i].count)
			fail_msg("'%s': count %llu, want %llu", cases[i].tres,
				 (unsigned long long)count,
				 (unsigned long long)cases[i].count);
		if (rv != 1)
			assert_int_equal(count, 777);
	}
	assert_int_equal(gs_gres_count(NULL, "gshare", &count, &err), 0);
	assert_int_equal(gs_gres_count("gres:x:1", "", &count, &err), -1);
	assert_int_equal(gs_gres_count("gres:share:7", "share", &count, &err),
			 1);
	assert_int_equal(count, 7);
}

static void test_gres_detail(void **state)
{
	static const struct {
		const char *detail;
		const char *name;
		int rv;
		int gpu;
	} cases[] = {
		{ "shard:60(IDX:1)", "shard", 1, 1 },
		{ "shard:60(IDX:0)", "shard", 1, 0 },
		{ "gpu:a100:1(IDX:0),shard:30(IDX:3)", "shard", 1, 3 },
		{ "gpu:1(IDX:2),shard:30(IDX:0-1)", "gpu", 1, 2 },
		{ "shard:30(IDX:0,2)", "shard", 1, 0 },
		{ "shard:a100:30(IDX:5)", "shard", 1, 5 },
		{ "gshare(CNT:60)", "gshare", 0, -1 },
		{ "gshare:60", "gshare", 0, -1 },
		{ "gpu:1(IDX:0)", "shard", 0, -1 },
		{ "xshard:1(IDX:4)", "shard", 0, -1 },
		{ "", "shard", 0, -1 },
		{ "shard:60(IDX:)", "shard", -1, -1 },
		{ "shard:60(IDX:x)", "shard", -1, -1 },
		{ "shard:60(IDX:99999999999)", "shard", -1, -1 },
	};
	struct gs_error err;
	size_t i;
	int gpu, rv;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gpu = -1;
		rv = gs_gres_detail_gpu(cases[i].detail, cases[i].name, &gpu,
					&err);
		if (rv != cases[i].rv || gpu != cases[i].gpu)
			fail_msg("'%s' (%s): rv %d gpu %d, want %d %d",
				 cases[i].detail, cases[i].name, rv, gpu,
				 cases[i].rv, cases[i].gpu);
	}
	assert_int_equal(gs_gres_detail_gpu(NULL, "shard", &gpu, &err), 0);
	assert_int_equal(gs_gres_detail_gpu("shard:1(IDX:0)", "", &gpu, &err),
			 -1);
}

static void test_array_spec(void **state)
{
	(void)state;
	assert_true(gs_spank_array_spec_ok("32_0"));
	assert_true(gs_spank_array_spec_ok("1234567890_4294967295"));
	assert_false(gs_spank_array_spec_ok("32"));
	assert_false(gs_spank_array_spec_ok("_1"));
	assert_false(gs_spank_array_spec_ok("32_"));
	assert_false(gs_spank_array_spec_ok("32_1;x"));
	assert_false(gs_spank_array_spec_ok("32_1 "));
	assert_false(gs_spank_array_spec_ok("12345678901_1"));
	assert_false(gs_spank_array_spec_ok("32_1_2"));
	assert_false(gs_spank_array_spec_ok(""));
	assert_false(gs_spank_array_spec_ok(NULL));
}

static void test_step_names(void **state)
{
	char b[32];

	(void)state;
	/* our copies of Slurm's special step ids must match slurm.h */
	assert_int_equal(GS_SLURM_STEP_BATCH, SLURM_BATCH_SCRIPT);
	assert_int_equal(GS_SLURM_STEP_EXTERN, SLURM_EXTERN_CONT);
	assert_int_equal(GS_SLURM_STEP_PENDING, SLURM_PENDING_STEP);
	assert_int_equal(GS_SLURM_STEP_INTERACTIVE, SLURM_INTERACTIVE_STEP);
	gs_spank_step_name(SLURM_BATCH_SCRIPT, b, sizeof(b));
	assert_string_equal(b, "batch");
	gs_spank_step_name(SLURM_EXTERN_CONT, b, sizeof(b));
	assert_string_equal(b, "extern");
	gs_spank_step_name(SLURM_INTERACTIVE_STEP, b, sizeof(b));
	assert_string_equal(b, "interactive");
	gs_spank_step_name(0, b, sizeof(b));
	assert_string_equal(b, "0");
	gs_spank_step_name(4242, b, sizeof(b));
	assert_string_equal(b, "4242");
}

static void test_record(void **state)
{
	struct gs_spank_record r = { 12345678901234ull, 30, 1500000000ull,
				     2000000001ull, 0 },
			       back;
	struct gs_error err;
	char buf[256], small[16];
	static const char *const bad[] = {
		"",
		"gshare-record 2 id=1 shares=1 gpu_ns=1 held_ns=1\n",
		"gshare-record 1 id=1 shares=1 gpu_ns=1\n",
		"gshare-record 1 id=1 shares=1 gpu_ns=x held_ns=1\n",
		"gshare-record 1 id=1 shares=1 gpu_ns=1 held_ns=1 extra=2\n",
		"gshare-record 1 id=1 shares=99999999999 gpu_ns=1 held_ns=1\n",
		"gshare-record 1 id=99999999999999999999999 shares=1 gpu_ns=1 "
		"held_ns=1\n",
		"gshare-record 1 shares=1 id=1 gpu_ns=1 held_ns=1\n",
	};
	size_t i;

	(void)state;
	assert_true(gs_spank_record_format(&r, buf, sizeof(buf), &err) > 0);
	assert_string_equal(buf, "gshare-record 1 id=12345678901234 shares=30"
				 " gpu_ns=1500000000 held_ns=2000000001\n");
	assert_int_equal(gs_spank_record_parse(buf, &back, &err), 0);
	assert_int_equal(back.id, r.id);
	assert_int_equal(back.shares, r.shares);
	assert_int_equal(back.gpu_ns, r.gpu_ns);
	assert_int_equal(back.held_ns, r.held_ns);
	assert_int_equal(gs_spank_record_format(&r, small, sizeof(small),
						&err),
			 -1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (gs_spank_record_parse(bad[i], &back, &err) != -1)
			fail_msg("accepted '%s'", bad[i]);
	}
	assert_int_equal(gs_spank_record_parse(NULL, &back, &err), -1);
}

/* The most device memory a step held rides along when there is one;
 * records and segments without it stay as before. */
static void test_record_mem(void **state)
{
	struct gs_spank_record r, back;
	struct gs_spank_totals t;
	struct gs_error err;
	char buf[256], seg[256];

	(void)state;
	memset(&r, 0, sizeof(r));
	r.id = 7;
	r.shares = 30;
	r.gpu_ns = 1;
	r.held_ns = 2;
	r.mem_max = 21474836480ull;
	assert_true(gs_spank_record_format(&r, buf, sizeof(buf), &err) > 0);
	assert_string_equal(buf, "gshare-record 1 id=7 shares=30 gpu_ns=1 "
				 "held_ns=2 mem_max=21474836480\n");
	assert_int_equal(gs_spank_record_parse(buf, &back, &err), 0);
	assert_int_equal(back.mem_max, r.mem_max);
	assert_int_equal(back.held_ns, 2);
	/* one byte short of the newline: refused, nothing half-written */
	assert_int_equal(gs_spank_record_format(&r, buf, strlen(
		"gshare-record 1 id=7 shares=30 gpu_ns=1 held_ns=2 "
		"mem_max=21474836480\n"), &err), -1);
	/* a record of before: no memory */
	assert_int_equal(gs_spank_record_parse("gshare-record 1 id=7 "
					       "shares=30 gpu_ns=1 held_ns=2\n",
					       &back, &err), 0);
	assert_int_equal(back.mem_max, 0);
	assert_int_equal(gs_spank_record_parse("gshare-record 1 id=7 "
					       "shares=30 gpu_ns=1 held_ns=2 "
					       "mem_max=x\n", &back, &err), -1);
	assert_int_equal(gs_spank_record_parse("gshare-record 1 id=7 "
					       "shares=30 gpu_ns=1 held_ns=2 "
					       "mem_max=1 x=2\n", &back, &err),
			 -1);
	memset(&t, 0, sizeof(t));
	gs_spank_totals_add(&t, &r);
	r.mem_max = 1ull << 30;
	gs_spank_totals_add(&t, &r);
	assert_int_equal(t.mem_max, 21474836480ull);
	assert_true(gs_spank_comment_segment("n1", &t, seg, sizeof(seg),
					     &err) > 0);
	assert_string_equal(seg, "gshare[n1]:gpu_s=0.000,held_s=0.000,"
				 "share=30,allocs=2,mem_max=21474836480");
}

static void test_job_dir(void **state)
{
	struct gs_error err;
	char buf[32];

	(void)state;
	assert_int_equal(gs_spank_job_dir("/run/gs", 42, "n1", buf,
					  sizeof(buf), &err),
			 0);
	assert_string_equal(buf, "/run/gs/42.n1");
	assert_int_equal(gs_spank_job_dir("/run/gs", 42, "../x", buf,
					  sizeof(buf), &err),
			 -1);
	assert_int_equal(gs_spank_job_dir("/run/gs", 42, "", buf, sizeof(buf),
					  &err),
			 -1);
	assert_int_equal(gs_spank_job_dir("/run/gs", 42, "..", buf,
					  sizeof(buf), &err),
			 -1);
	assert_int_equal(gs_spank_job_dir("/a/very/long/state/directory", 42,
					  "n1", buf, sizeof(buf), &err),
			 -1);
}

/* Linked with -Wl,--wrap=malloc: fail_mallocs > 0 makes that many of
 * the next allocations fail. */
static int fail_mallocs;
void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n)
{
	if (fail_mallocs > 0) {
		fail_mallocs--;
		return NULL;
	}
	return __real_malloc(n);
}

static void test_comment_oom(void **state)
{
	struct gs_error err;
	char *out = (char *)&err;

	(void)state;
	fail_mallocs = 1;
	assert_int_equal(gs_spank_comment_merge("x;gshare[n1]:old", "n1",
						"gshare[n1]:new", &out, &err),
			 -1);
	assert_int_equal(err.code, GS_ENOMEM);
	assert_ptr_equal(out, (char *)&err);	/* untouched on failure */
	fail_mallocs = 0;
	assert_int_equal(gs_spank_comment_merge("x;gshare[n1]:old", "n1",
						"gshare[n1]:new", &out, &err),
			 0);
	assert_string_equal(out, "x;gshare[n1]:new");
	free(out);
}

static void test_comment(void **state)
{
	struct gs_spank_totals t = { 0, 0, 0, 0, 0 };
	struct gs_spank_record a = { 1, 30, 1234567890ull, 2000000000ull, 0 };
	struct gs_spank_record b = { 2, 10, 1000000ull, 5000000ull, 0 };
	struct gs_error err;
	char seg[256], seg2[256];
	char *out;

	(void)state;
	gs_spank_totals_add(&t, &a);
	gs_spank_totals_add(&t, &b);
	assert_int_equal(t.allocs, 2);
	assert_int_equal(t.max_shares, 30);
	assert_true(gs_spank_comment_segment("n1", &t, seg, sizeof(seg),
					     &err) > 0);
	assert_string_equal(seg, "gshare[n1]:gpu_s=1.235,held_s=2.005,"
				 "share=30,allocs=2");
	assert_int_equal(gs_spank_comment_segment("n[1]", &t, seg2,
						  sizeof(seg2), &err),
			 -1);
	assert_int_equal(gs_spank_comment_segment("n1", &t, seg2, 8, &err),
			 -1);

	assert_int_equal(gs_spank_comment_merge(NULL, "n1", seg, &out, &err),
			 0);
	assert_string_equal(out, seg);
	free(out);
	assert_int_equal(gs_spank_comment_merge("", "n1", seg, &out, &err),
			 0);
	assert_string_equal(out, seg);
	free(out);
	/* other text and other nodes are kept; our node is replaced once */
	assert_int_equal(gs_spank_comment_merge(
				 "admin note;gshare[n1]:gpu_s=9;"
				 "gshare[n2]:gpu_s=1;gshare[n1]:gpu_s=8",
				 "n1", "gshare[n1]:X", &out, &err),
			 0);
	assert_string_equal(out,
			    "admin note;gshare[n1]:X;gshare[n2]:gpu_s=1");
	free(out);
	assert_int_equal(gs_spank_comment_merge("gshare[n2]:Y", "n1",
						"gshare[n1]:Z", &out, &err),
			 0);
	assert_string_equal(out, "gshare[n2]:Y;gshare[n1]:Z");
	free(out);
	/* a node whose name extends ours is not ours */
	assert_int_equal(gs_spank_comment_merge("gshare[n10]:Y", "n1",
						"gshare[n1]:a-much-longer-"
						"segment",
						&out, &err),
			 0);
	assert_string_equal(out,
			    "gshare[n10]:Y;gshare[n1]:a-much-longer-segment");
	free(out);	/* sacctmgr stored the comment lower-cased: node GPU01 finds its
	 * segment "gshare[gpu01]" and replaces it instead of adding one */
	assert_int_equal(gs_spank_comment_merge("gshare[gpu01]:old;"
						"gshare[gpu02]:y",
						"GPU01", "gshare[GPU01]:new",
						&out, &err),
			 0);
	assert_string_equal(out, "gshare[GPU01]:new;gshare[gpu02]:y");
	free(out);
}

static void test_spool(void **state)
{
	struct gs_spank_spool r, q;
	struct gs_error err;
	char line[512];
	int n;
	static const char *const bad[] = {
		"",
		"gshare-spool 2 job=1 node=n1 nodes=1 seg=gshare[n1]:x\n",
		"gshare-spool 1 job=1 node=n1 nodes=1\n",
		"gshare-spool 1 job=x node=n1 nodes=1 seg=gshare[n1]:x\n",
		"gshare-spool 1 job=1_ node=n1 nodes=1 seg=gshare[n1]:x\n",
		"gshare-spool 1 job=1 node=n/1 nodes=1 seg=gshare[n1]:x\n",
		"gshare-spool 1 job=1 node=n1 nodes=0 seg=gshare[n1]:x\n",
		"gshare-spool 1 job=1 node=n1 nodes=-1 seg=gshare[n1]:x\n",
		"gshare-spool 1 job=1 node=n1 nodes=1 seg=other\n",
		"gshare-spool 1 job=1 node=n1 nodes=1 seg=gshare[n1]:x;y\n",
		"gshare-spool 1 job=1 node=n1 nodes=1 seg=gshare[n1]:x y\n",
		"gshare-spool 1 job=1 node=n1 nodes=1 seg=gshare[n1]:x\nmore",
		"gshare-spool 1 job=1  node=n1 nodes=1 seg=gshare[n1]:x\n",
	};
	size_t i;

	(void)state;
	memset(&r, 0, sizeof(r));
	snprintf(r.job, sizeof(r.job), "32_7");
	snprintf(r.node, sizeof(r.node), "GPU01");
	r.nodes = 2;
	snprintf(r.seg, sizeof(r.seg),
		 "gshare[GPU01]:gpu_s=1.000,held_s=2.000,share=30,allocs=1");
	n = gs_spank_spool_format(&r, line, sizeof(line), &err);
	assert_true(n > 0);
	assert_string_equal(line, "gshare-spool 1 job=32_7 node=GPU01 nodes=2 "
				  "seg=gshare[GPU01]:gpu_s=1.000,held_s=2.000,"
				  "share=30,allocs=1\n");
	assert_int_equal(gs_spank_spool_parse(line, &q, &err), 0);
	assert_memory_equal(&q, &r, sizeof(r));
	assert_int_equal(gs_spank_spool_format(&r, line, 20, &err), -1);
	snprintf(r.job, sizeof(r.job), "1;x");
	assert_int_equal(gs_spank_spool_format(&r, line, sizeof(line), &err),
			 -1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (gs_spank_spool_parse(bad[i], &q, &err) != -1)
			fail_msg("accepted '%s'", bad[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_weight),
		cmocka_unit_test(test_priority_mode),
		cmocka_unit_test(test_mem),
		cmocka_unit_test(test_record_mem),
		cmocka_unit_test(test_preload),
		cmocka_unit_test(test_conf_defaults),
		cmocka_unit_test(test_conf_args),
		cmocka_unit_test(test_conf_bad),
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_gres),
		cmocka_unit_test(test_gres_detail),
		cmocka_unit_test(test_array_spec),
		cmocka_unit_test(test_step_names),
		cmocka_unit_test(test_record),
		cmocka_unit_test(test_job_dir),
		cmocka_unit_test(test_comment),
		cmocka_unit_test(test_spool),
		cmocka_unit_test(test_comment_oom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
