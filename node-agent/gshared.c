/*
 * gshared.c — main of the gshare node agent.
 *
 *   gshared [-d] [-v] [-f FILE]     run (daemonize unless -d)
 *   gshared -n [-f FILE]            check the config, print it normalized
 *
 * Without -f, GS_DEFAULT_CONFIG (/etc/gshare/gshare.yaml unless built with
 * another SYSCONFDIR) is read when it exists, else the built-in defaults
 * are used.  -d stays in the foreground and logs to
 * stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acct_agent.h"
#include "agent.h"
#include "gs_log.h"
#include "health.h"
#include "unman.h"

#ifndef GS_DEFAULT_CONFIG
#define GS_DEFAULT_CONFIG "/etc/gshare/gshare.yaml"
#endif

static void usage(void)
{
	fprintf(stderr, "usage: gshared [-dnv] [-f config]\n"
		"  -d  stay in the foreground, log to stderr\n"
		"  -f  configuration file (default " GS_DEFAULT_CONFIG ")\n"
		"  -n  check the configuration, print it normalized, exit\n"
		"  -v  verbose (debug) logging\n");
	exit(2);
}

int main(int argc, char *argv[])
{
	struct gs_agent_config cfg;
	struct gs_agent *ag;
	struct gs_accounting *acct;
	struct gs_health *health;
	struct gs_unman *unman;
	struct gs_error err;
	const char *path = NULL;
	int ch, fg = 0, check = 0, verbose = 0, rv;

	while ((ch = getopt(argc, argv, "df:hnv")) != -1) {
		switch (ch) {
		case 'd':
			fg = 1;
			break;
		case 'f':
			path = optarg;
			break;
		case 'n':
			check = 1;
			break;
		case 'v':
			verbose++;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	if (path == NULL && access(GS_DEFAULT_CONFIG, F_OK) == 0)
		path = GS_DEFAULT_CONFIG;
	if (path != NULL) {
		if (gs_agent_config_load(path, &cfg, &err) < 0) {
			fprintf(stderr, "gshared: %s\n", err.msg);
			return 1;
		}
	} else {
		gs_agent_config_defaults(&cfg);
	}
	if (check) {
		if (gs_agent_config_print(&cfg, stdout) < 0 ||
		    fflush(stdout) != 0) {
			fprintf(stderr, "gshared: writing: %s\n",
				strerror(errno));
			return 1;
		}
		return 0;
	}
	if (verbose)
		cfg.verbose = 1;
	if (fg) {
		log_init("gshared", GS_LOG_STDERR, NULL, cfg.verbose);
	} else if (log_init("gshared", (enum gs_log_target)cfg.log,
			    cfg.log_file, cfg.verbose) < 0) {
		fprintf(stderr, "gshared: log file %s: %s\n", cfg.log_file,
			strerror(errno));
		return 1;
	}
	if (!fg && daemon(0, 0) < 0) {
		fprintf(stderr, "gshared: daemon: %s\n", strerror(errno));
		return 1;
	}
	ag = gs_agent_new(&cfg, path, &err);
	if (ag == NULL)
		fatalx("%s", err.msg);
	if (gs_accounting_new(ag, &acct, &err) < 0)
		fatalx("%s", err.msg);
	if (gs_health_new(ag, &health, &err) < 0)
		fatalx("%s", err.msg);
	if (gs_unman_new(ag, &unman, &err) < 0)
		fatalx("%s", err.msg);
	gs_accounting_set_unman(acct, unman);
	rv = gs_agent_run(ag, &err);
	if (rv < 0)
		log_warnx("%s", err.msg);
	gs_accounting_set_unman(acct, NULL);
	gs_unman_free(unman);
	gs_health_free(health);
	gs_accounting_free(acct);
	gs_agent_free(ag);
	log_info("stopped");
	log_close();
	return rv < 0 ? 1 : 0;
}
