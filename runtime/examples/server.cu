/*
 * server.cu — event-driven I/O through RPC slots (GLoop §3–4).
 *
 * Part 1, file read: each logical block of `load` asks the host for its
 * 256 KiB chunk of a file (gs_io_read at an offset), returns, and runs
 * again as a continuation once the chunk is in device memory, where it
 * checksums it.
 *
 * Part 2, a server-style eater: W worker blocks each read one 64-byte
 * request from a pipe (gs_io_read with off < 0), compute the answer,
 * write it, and ask for the next request.  While every worker waits for a
 * request the job gives the GPU back (IOWAIT).  A host thread plays the
 * clients.  The plain twin reads the pipe on the host and launches one
 * kernel per batch of requests.
 */
#include <algorithm>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "ex_common.h"

#define CHUNK (256u * 1024u)
#define ST 256
#define WORK 2000u	/* recurrence iterations per request */
#define STOP 0xffffffffu

struct req {
	unsigned int id, seed;
	unsigned int pad[14];
};

struct load_args {
	int fd;
	unsigned char *buf;
	unsigned long long *sums;
	long long *res;
};

GS_KERNEL_EX(load, struct load_args, p, GS_KF_IO)
{
	unsigned int lb = gs_block_linear();
	unsigned char *mine = p.buf + (size_t)lb * CHUNK;

	if (gs_continuation() == 0) {
		gs_io_read(p.fd, (long long)lb * CHUNK, CHUNK, mine, 1);
		return;
	}
	/* continuation: the chunk is in device memory */
	const unsigned int *w = (const unsigned int *)mine;
	unsigned long long s = 0;
	for (unsigned int i = threadIdx.x; i < CHUNK / 4; i += blockDim.x)
		s += w[i];
	atomicAdd(&p.sums[lb], s);
	if (threadIdx.x == 0)
		p.res[lb] = gs_io_result();
}

static __device__ __forceinline__ unsigned int answer(unsigned int seed)
{
	unsigned int x = seed ^ (threadIdx.x * 2654435761u);
	for (unsigned int i = 0; i < WORK; i++)
		x = x * 1664525u + 1013904223u;
	for (int o = 16; o > 0; o >>= 1)
		x ^= __shfl_xor_sync(0xffffffffu, x, o);
	return x;	/* same in every lane: xor over the warp */
}

static __device__ __forceinline__ void
respond(const struct req *r, unsigned int *resp, unsigned int *count)
{
	__shared__ unsigned int acc;
	if (threadIdx.x == 0)
		acc = 0;
	__syncthreads();
	unsigned int v = answer(r->seed);
	if ((threadIdx.x & 31) == 0)
		atomicXor(&acc, v);
	__syncthreads();
	if (threadIdx.x == 0) {
		resp[r->id] = acc;
		atomicAdd(&count[r->id], 1u);
	}
}

struct serve_args {
	int fd;
	struct req *reqs;	/* one per worker */
	unsigned int *resp, *count;
	unsigned int *bad;
};

GS_KERNEL_EX(serve, struct serve_args, p, GS_KF_IO)
{
	unsigned int lb = gs_block_linear();
	struct req *r = &p.reqs[lb];

	if (gs_continuation() != 0) {
		if (gs_io_result() != (long long)sizeof(struct req)) {
			if (threadIdx.x == 0)
				atomicAdd(p.bad, 1u);
			return;		/* EOF or short read: worker ends */
		}
		if (r->id == STOP)
			return;
		respond(r, p.resp, p.count);
	}
	gs_io_read(p.fd, -1, sizeof(struct req), r, 1);
}

__global__ void serve_plain(const struct req *reqs, unsigned int *resp,
			    unsigned int *count)
{
	respond(&reqs[blockIdx.x], resp, count);
}

static unsigned int cpu_answer(unsigned int seed)
{
	unsigned int acc = 0;
	for (unsigned int w = 0; w < ST / 32; w++) {
		unsigned int v = 0;
		for (unsigned int l = 0; l < 32; l++) {
			unsigned int x = seed ^ ((w * 32 + l) * 2654435761u);
			for (unsigned int i = 0; i < WORK; i++)
				x = x * 1664525u + 1013904223u;
			v ^= x;
		}
		acc ^= v;
	}
	return acc;
}

struct client {
	int fd;
	unsigned int n, workers, gap_us;
	std::vector<unsigned int> seeds;
	double t_end;			/* when the last request was written */
};

static void *client_main(void *arg)
{
	client *c = (client *)arg;
	uint64_t s = 12345;
	for (unsigned int i = 0; i < c->n + c->workers; i++) {
		req r;
		memset(&r, 0, sizeof r);
		r.id = i < c->n ? i : STOP;
		r.seed = i < c->n ? c->seeds[i] : 0;
		if (write(c->fd, &r, sizeof r) != (ssize_t)sizeof r)
			break;
		if (c->gap_us && i < c->n && ex_rand(&s) % 8 == 0)
			usleep(c->gap_us);	/* bursts with gaps */
	}
	c->t_end = ex_now();
	return NULL;
}

static int check_file(uint64_t *seed)
{
	const unsigned int nch = 64;
	size_t bytes = (size_t)nch * CHUNK;
	std::vector<unsigned int> data(bytes / 4);
	for (auto &v : data)
		v = (unsigned int)ex_rand(seed);
	char path[] = "/tmp/gs-server-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, data.data(), bytes) != (ssize_t)bytes) {
		perror("temp file");
		exit(2);
	}
	unlink(path);
	unsigned char *dbuf;
	unsigned long long *dsums;
	long long *dres;
	CK(cudaMalloc(&dbuf, bytes));
	CK(cudaMalloc(&dsums, nch * 8));
	CK(cudaMalloc(&dres, nch * 8));
	CK(cudaMemset(dsums, 0, nch * 8));
	ex_poison(dbuf, bytes);
	load_args a = { fd, dbuf, dsums, dres };
	GK(gs_launch(&load, gs3(nch), gs3(ST), 0, &a, sizeof a, NULL));
	GK(gs_synchronize());
	std::vector<unsigned long long> sums(nch);
	std::vector<long long> res(nch);
	CK(cudaMemcpy(sums.data(), dsums, nch * 8, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(res.data(), dres, nch * 8, cudaMemcpyDeviceToHost));
	int bad = 0;
	for (unsigned int c = 0; c < nch; c++) {
		unsigned long long s = 0;
		for (unsigned int i = 0; i < CHUNK / 4; i++)
			s += data[(size_t)c * CHUNK / 4 + i];
		if (s != sums[c] || res[c] != (long long)CHUNK)
			bad++;
	}
	if (bad)
		fprintf(stderr, "server file read: %d chunks wrong\n", bad);
	close(fd);
	CK(cudaFree(dbuf));
	CK(cudaFree(dsums));
	CK(cudaFree(dres));
	return bad != 0;
}

static double launch_secs;	/* the last gs_launch of serve */
static double client_secs;	/* the last run's client: start to its last
				 * write (the server reads as it writes) */

/* Serve n requests with W workers; returns failures, *secs the time.
 * Every request must be answered once; the answers of every `every`-th
 * are compared with the CPU's (each costs the CPU about a millisecond). */
static int run_server(unsigned int n, unsigned int W, unsigned int gap_us,
		      int plain, unsigned int every, uint64_t *seed,
		      double *secs)
{
	int pfd[2];
	if (pipe(pfd) < 0) {
		perror("pipe");
		exit(2);
	}
	client c;
	c.fd = pfd[1];
	c.n = n;
	c.workers = W;
	c.gap_us = gap_us;
	c.seeds.resize(n);
	for (auto &v : c.seeds)
		v = (unsigned int)ex_rand(seed);
	unsigned int *dresp, *dcount, *dbad;
	struct req *dreqs;
	CK(cudaMalloc(&dresp, n * 4));
	CK(cudaMalloc(&dcount, n * 4));
	CK(cudaMalloc(&dbad, 4));
	CK(cudaMalloc(&dreqs, (n + W) * sizeof(struct req)));
	CK(cudaMemset(dresp, 0, n * 4));
	CK(cudaMemset(dcount, 0, n * 4));
	CK(cudaMemset(dbad, 0, 4));
	pthread_t th;
	double t0 = ex_now();
	pthread_create(&th, NULL, client_main, &c);
	if (!plain) {
		serve_args a = { pfd[0], dreqs, dresp, dcount, dbad };
		double tl = ex_now();
		GK(gs_launch(&serve, gs3(W), gs3(ST), 0, &a, sizeof a, NULL));
		launch_secs = ex_now() - tl;
		GK(gs_synchronize());
	} else {
		/* host reads what is there, one kernel per batch */
		std::vector<req> batch(256);
		unsigned int got = 0, stops = 0;
		while (stops < W) {
			ssize_t k = read(pfd[0], batch.data(),
					 batch.size() * sizeof(req));
			if (k <= 0)
				break;
			unsigned int m = (unsigned)(k / sizeof(req));
			unsigned int real = 0;
			for (unsigned int i = 0; i < m; i++) {
				if (batch[i].id == STOP)
					stops++;
				else
					batch[real++] = batch[i];
			}
			if (real) {
				CK(cudaMemcpy(dreqs, batch.data(),
					      real * sizeof(req),
					      cudaMemcpyHostToDevice));
				serve_plain<<<real, ST>>>(dreqs, dresp, dcount);
				CK(cudaGetLastError());
				CK(cudaDeviceSynchronize());
			}
			got += real;
		}
	}
	*secs = ex_now() - t0;
	pthread_join(th, NULL);
	client_secs = c.t_end - t0;
	close(pfd[0]);
	close(pfd[1]);
	std::vector<unsigned int> resp(n), count(n);
	unsigned int nbad;
	CK(cudaMemcpy(resp.data(), dresp, n * 4, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(count.data(), dcount, n * 4, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(&nbad, dbad, 4, cudaMemcpyDeviceToHost));
	unsigned int wrong = 0;
	for (unsigned int i = 0; i < n; i++)
		if (count[i] != 1 ||
		    (i % every == 0 && resp[i] != cpu_answer(c.seeds[i])))
			wrong++;
	if (wrong || nbad)
		fprintf(stderr, "server %s: %u wrong answers, %u bad reads\n",
			plain ? "plain" : "gs", wrong, nbad);
	CK(cudaFree(dresp));
	CK(cudaFree(dcount));
	CK(cudaFree(dbad));
	CK(cudaFree(dreqs));
	return (wrong || nbad) ? 1 : 0;
}

int main(int argc, char **argv)
{
	ex_opts o = ex_parse(argc, argv);
	uint64_t seed = o.seed;
	int fails = 0;
	double secs;

	GK(gs_init(0));
	if (o.check) {
		for (int r = 0; r < o.rounds; r++) {
			fails += check_file(&seed);
			fails += run_server(3000, 132, 200, 0, 1, &seed,
					    &secs);
			fails += run_server(500, 132, 200, 1, 1, &seed,
					    &secs);
		}
		ex_print_stats("server", fails);
	}
	if (o.bench) {
		/* The first run of each version pays its one-time setup
		 * (the I/O slots' pinned memory, first launches); it is
		 * printed as cold.  Then R runs of each, interleaved (a run
		 * is ~10 ms, and the two move together with the machine):
		 * their medians are the steady state a server sees. */
		enum { R = 11 };
		double tg[R], tp[R], cg, cp, kg[R], kp[R];
		struct gs_stats s0, s1;
		fails += run_server(20000, 264, 0, 0, 64, &seed, &cg);
		double cl = launch_secs;
		fails += run_server(20000, 264, 0, 1, 64, &seed, &cp);
		GK(gs_stats(&s0));
		for (int r = 0; r < R; r++) {
			fails += run_server(20000, 264, 0, 0, 64, &seed,
					    &tg[r]);
			kg[r] = client_secs;
			fails += run_server(20000, 264, 0, 1, 64, &seed,
					    &tp[r]);
			kp[r] = client_secs;
		}
		GK(gs_stats(&s1));
		std::sort(tg, tg + R);
		std::sort(tp, tp + R);
		std::sort(kg, kg + R);
		std::sort(kp, kp + R);
		printf("bench server cold_plain_ms=%.4f cold_gs_ms=%.4f "
		       "cold_gs_launch_ms=%.4f\n", cp * 1e3, cg * 1e3,
		       cl * 1e3);
		printf("bench server runs=%d plain_range_ms=%.4f..%.4f "
		       "gs_range_ms=%.4f..%.4f\n", R, tp[0] * 1e3, tp[R - 1] * 1e3,
		       tg[0] * 1e3, tg[R - 1] * 1e3);
		printf("bench server plain_ms=%.4f gs_ms=%.4f "
		       "overhead_pct=%.2f\n", tp[R / 2] * 1e3,
		       tg[R / 2] * 1e3, (tg[R / 2] / tp[R / 2] - 1) * 100);
		/* per run of 20,000 requests: how often the kernel was
		 * launched and the GPU given back for want of requests */
		printf("bench server kernel_runs_per_run=%.1f "
		       "iowaits_per_run=%.1f\n",
		       (double)(s1.kernel_runs - s0.kernel_runs) / R,
		       (double)(s1.iowaits - s0.iowaits) / R);
		/* the client's own time to write every request (medians):
		 * what is left of a run after it is the server's tail */
		printf("bench server client_plain_ms=%.4f client_gs_ms=%.4f\n",
		       kp[R / 2] * 1e3, kg[R / 2] * 1e3);
	}
	GK(gs_finalize());
	return fails ? 1 : 0;
}
