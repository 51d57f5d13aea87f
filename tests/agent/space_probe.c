/*
 * space_probe.c — a job stand-in for tests/agent/test_mps.sh: attaches to
 * an allocation, asks for the token (so that the planner counts it busy)
 * and prints the control page's partition every time part_gen changes,
 *   part GEN FIRST COUNT
 * for up to SECONDS (default 20) or until stdin closes.  With `stamp`
 * (test_cogrant.sh) it looks every 0.2 ms, adds the CLOCK_MONOTONIC ns
 * of each change to its line and prints `exit NS` just before it closes
 * its connection.  With `flap` (a job that lies) it says "gate" in its
 * page's job_kind for 200 ms, then rewrites it at every look, libgshare
 * and gate in turn, looking every 0.2 ms.
 * Usage: space_probe SOCKET ALLOC [SECONDS [stamp|flap]]
 */
#include <inttypes.h>
#include <poll.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_ctlpage.h"

static uint64_t mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
	struct gs_client *c = NULL;
	struct gs_error err;
	volatile struct gs_ctlpage *p;
	uint64_t last = UINT64_MAX;
	time_t end;
	void *m;
	int fd = -1, stamp = argc > 4 && strcmp(argv[4], "stamp") == 0;
	int flap = argc > 4 && strcmp(argv[4], "flap") == 0;
	uint32_t looks = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: space_probe SOCKET ALLOC [SECONDS]\n");
		return 2;
	}
	end = time(NULL) + (argc > 3 ? atoi(argv[3]) : 20);
	if (gs_client_connect(argv[1], 5000, &c, &err) < 0 ||
	    gs_client_attach(c, strtoull(argv[2], NULL, 10), &fd, NULL,
			     &err) < 0 ||
	    gs_client_token_want(c, &err) < 0) {
		fprintf(stderr, "space_probe: %s\n", err.msg);
		gs_client_free(c);
		return 1;
	}
	m = mmap(NULL, GS_CTL_SIZE, PROT_READ | (flap ? PROT_WRITE : 0),
		 MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		perror("space_probe: mmap");
		return 1;
	}
	p = m;
	while (time(NULL) < end) {
		struct pollfd in = { 0, POLLIN, 0 };
		uint64_t g = __atomic_load_n(&p->part_gen, __ATOMIC_ACQUIRE);

		if (g != last) {
			if (stamp)
				printf("part %" PRIu64 " %u %u %" PRIu64
				       " %" PRIu64 "\n", g, p->sm_first,
				       p->sm_count, mono(),
				       __atomic_load_n(&p->part_set_ns,
						       __ATOMIC_RELAXED));
			else
				printf("part %" PRIu64 " %u %u\n", g,
				       p->sm_first, p->sm_count);
			fflush(stdout);
			last = g;
		}
		if (flap)
			__atomic_store_n(&p->job_kind,
					 ++looks < 1000u || (looks & 1u) ?
					 (uint32_t)GS_CTL_JOB_GATE :
					 (uint32_t)GS_CTL_JOB_LIBGSHARE,
					 __ATOMIC_RELEASE);
		if (stamp || flap) {
			struct timespec ts = { 0, 200000 };

			if (poll(&in, 1, 0) > 0 &&
			    (in.revents & (POLLIN | POLLHUP))) {
				char b[64];

				if (read(0, b, sizeof(b)) <= 0)
					break;
			}
			nanosleep(&ts, NULL);
			continue;
		}
		if (poll(&in, 1, 10) > 0 && (in.revents & (POLLIN | POLLHUP))) {
			char b[64];

			if (read(0, b, sizeof(b)) <= 0)
				break;
		}
	}
	munmap(m, GS_CTL_SIZE);
	close(fd);
	if (stamp) {
		printf("exit %" PRIu64 "\n", mono());
		fflush(stdout);
	}
	gs_client_free(c);
	return 0;
}
