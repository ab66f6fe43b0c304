/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu_perf: latency, bandwidth and message rate of fi_xpu's device
 * operations between two processes of one node, issued by device code
 * (a kernel on CPU threads through fi_xpu_host_launch), in the manner of
 * fi_pingpong, ucx_perftest and NVSHMEM's perftest. See fi_xpu_perf(1).
 *
 * The tool is a user of the public headers only: it forks its second rank
 * and joins both into an fi_xpu world with one symmetric window
 * (examples/moe/world.h); the MoE test runs the dispatch and combine of
 * examples/moe/moe.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "moe.h"

#include <errno.h>
#include <getopt.h>

#define PERF_WINDOW 64    /* operations in flight before a quiet (bw, rate) */
#define PERF_WAIT_MS 60000
#define PERF_MAX_SIZE (64u << 20)

enum perf_test { T_WRITE, T_READ, T_ATOMIC, T_SEND, T_PUT_SIGNAL, T_MOE, T_COUNT };
static const char *const test_names[T_COUNT] = {
	"write", "read", "atomic", "send", "put_signal", "moe",
};

struct opts {
	const char *prov, *fabric, *format;
	unsigned tests; /* bit per enum perf_test */
	size_t min, max;
	int iters, warmup, progress, baseline;
	uint32_t tokens;
};

/* What the host-driven libfabric baselines measured (-B); < 0: nothing. */
struct baseline {
	double lat8_us, rate8_mops; /* 8-byte fi_write */
	double bw_mbps[3];          /* fi_write of 64 KiB, 1 MiB, 16 MiB */
	double moe_us;              /* MoE dispatch+combine, 2 ranks */
};
static struct baseline base_fig = { -1, -1, { -1, -1, -1 }, -1 };

/* What one kernel measures, and what it found. */
struct job {
	const struct world_dev *w;
	unsigned char *sym;
	int test, peer, iters, stream;
	size_t size;
	uint64_t src, dst, sig; /* offsets in the window: sig holds the
				 * signal word, the atomic test's word and 1 */
	uint64_t signals;       /* put_signal: signals received so far */
	double seconds;
	int err, err_line;
};

#define PERF_TRY(j, expr)                                                       \
	do {                                                                    \
		int rc_;                                                        \
		while ((rc_ = (int)(expr)) == -FI_EAGAIN)                       \
			fi_xpu_arch_pause();                                    \
		if (rc_ && !(j)->err) {                                         \
			(j)->err = rc_;                                         \
			(j)->err_line = __LINE__;                               \
		}                                                               \
		if (rc_)                                                        \
			return;                                                 \
	} while (0)

/* One operation of the job's test toward its peer (not put_signal). */
static void issue(struct job *j)
{
	const struct fi_xpu_window_dev *win = j->w->win;
	const uint64_t *one = (const uint64_t *)(const void *)(j->sym + j->sig + 16);
	switch (j->test) {
	case T_WRITE:
		PERF_TRY(j, fi_xpu_world_put(win, j->peer, j->dst, j->sym + j->src, j->size,
					     FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
		break;
	case T_READ:
		PERF_TRY(j, fi_xpu_world_get(win, j->peer, j->src, j->sym + j->dst, j->size, 0,
					     FI_XPU_WORK_ITEM));
		break;
	default:
		PERF_TRY(j, fi_xpu_world_atomic(win, j->peer, j->sig + 8, one, 1, FI_UINT64, FI_SUM,
						FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
		break;
	}
}

static void quiet(struct job *j)
{
	PERF_TRY(j, fi_xpu_world_quiet(j->w->world, PERF_WAIT_MS, FI_XPU_WORK_ITEM));
}

/* put_signal: a ping-pong. Rank 0 writes `size` bytes then adds 1 to the
 * peer's signal word; the peer waits for the word, and answers the same
 * way. Both ranks run it; each counts the signals it waited for, since
 * the peer's next one may already be there when a run starts. */
static void pingpong(struct job *j)
{
	const struct fi_xpu_window_dev *win = j->w->win;
	const uint64_t *mine = (const uint64_t *)(const void *)(j->sym + j->sig);
	const uint64_t *one = (const uint64_t *)(const void *)(j->sym + j->sig + 16);
	int i;
	for (i = 0; i < j->iters; i++) {
		if (j->w->rank == 1)
			PERF_TRY(j, fi_xpu_signal_wait_until(world_self_ep(j->w), mine, FI_XPU_CMP_GT,
							     j->signals++, PERF_WAIT_MS,
							     FI_XPU_WORK_ITEM));
		PERF_TRY(j, fi_xpu_world_put(win, j->peer, j->dst, j->sym + j->src, j->size,
					     FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
		quiet(j);
		PERF_TRY(j, fi_xpu_world_atomic(win, j->peer, j->sig, one, 1, FI_UINT64, FI_SUM,
						FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
		quiet(j);
		if (j->w->rank == 0)
			PERF_TRY(j, fi_xpu_signal_wait_until(world_self_ep(j->w), mine, FI_XPU_CMP_GT,
							     j->signals++, PERF_WAIT_MS,
							     FI_XPU_WORK_ITEM));
	}
}

/* ---- send ------------------------------------------------------------ */
/* Messages go through the endpoint of the lane that reaches the peer
 * (fi_xpu_world_route_ep), from and into this rank's window as that lane
 * addresses it; receives complete in the lane's CQ, sends in its counter,
 * which fi_xpu_world_quiet waits on once they are counted as issued. */
struct lane_io {
	struct fid_xpu_ep *ep;
	struct fid_xpu_cq *cq;
	const uint64_t *dest;
	unsigned char *src, *dst;
	void *desc;
	uint64_t *issued;
};

static int lane_io(const struct job *j, struct lane_io *io)
{
	const struct fi_xpu_world_route *r = fi_xpu_world_rma_route(j->w->win, j->peer);
	const struct fi_xpu_window_dev *win = j->w->win;
	const struct fi_xpu_world_dev *wd = j->w->world;
	if (!r || r->lane >= wd->nlanes)
		return -FI_EINVAL;
	io->ep = fi_xpu_world_route_ep(wd, r);
	io->cq = (struct fid_xpu_cq *)(uintptr_t)&wd->lane[r->lane].cq;
	io->dest = &r->addr;
	io->src = (unsigned char *)(uintptr_t)(win->local[r->lane].addr + j->src);
	io->dst = (unsigned char *)(uintptr_t)(win->local[r->lane].addr + j->dst);
	io->desc = (void *)(uintptr_t)win->local[r->lane].desc;
	io->issued = (uint64_t *)(uintptr_t)&wd->lane[r->lane].issued;
	return 0;
}

static int send_one(const struct job *j, const struct lane_io *io)
{
	int rc = fi_xpu_send(io->ep, io->src, j->size, io->desc, 0,
			     (void *)(uintptr_t)io->dest, NULL, 0, FI_XPU_WORK_ITEM);
	/* Full: progress reaps the sends the peer has taken. */
	if (rc == -FI_EAGAIN)
		fi_xpu_flush(io->ep, 0, FI_XPU_WORK_ITEM);
	if (!rc)
		fi_xpu_arch_fetch_add_u64(io->issued, 1, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_SYSTEM);
	return rc;
}

static int recv_one(const struct job *j, const struct lane_io *io)
{
	return fi_xpu_recv(io->ep, io->dst, j->size, io->desc, NULL, NULL, 0, FI_XPU_WORK_ITEM);
}

/* Waits for `n` receive completions: 0, the CQ's error, or -FI_ETIMEDOUT. */
static int recv_wait(const struct lane_io *io, int n)
{
	uint64_t start = fi_xpu_arch_clock_ns();
	struct fi_cq_data_entry e[8];
	while (n > 0) {
		int64_t got = fi_xpu_cq_read(io->cq, e, n < 8 ? (size_t)n : 8, FI_XPU_WORK_ITEM);
		if (got > 0) {
			n -= (int)got;
			continue;
		}
		if (got != -FI_EAGAIN)
			return (int)got;
		if (fi_xpu_arch_clock_ns() - start > (uint64_t)PERF_WAIT_MS * 1000000)
			return -FI_ETIMEDOUT;
		fi_xpu_arch_pause();
	}
	return 0;
}

/* The world's quiet for sends: a rendezvous send (shm, above its eager
 * size) is reported complete by progress on the sending endpoint, which
 * fi_xpu_flush makes; the quiet itself only reads the lane's counter. */
static void send_quiet(struct job *j, const struct lane_io *io)
{
	uint64_t start = fi_xpu_arch_clock_ns();
	int rc;
	do {
		PERF_TRY(j, fi_xpu_flush(io->ep, 0, FI_XPU_WORK_ITEM));
		rc = fi_xpu_world_quiet(j->w->world, 0, FI_XPU_WORK_ITEM);
		if (rc == -FI_ETIMEDOUT &&
		    fi_xpu_arch_clock_ns() - start > (uint64_t)PERF_WAIT_MS * 1000000)
			break;
	} while (rc == -FI_ETIMEDOUT);
	PERF_TRY(j, rc);
}

/* Latency: a ping-pong, each rank posting its receive before it sends. */
static void send_pingpong(struct job *j, const struct lane_io *io)
{
	int i;
	for (i = 0; i < j->iters; i++) {
		PERF_TRY(j, recv_one(j, io));
		if (j->w->rank == 1)
			PERF_TRY(j, recv_wait(io, 1));
		PERF_TRY(j, send_one(j, io));
		if (j->w->rank == 0)
			PERF_TRY(j, recv_wait(io, 1));
	}
	send_quiet(j, io);
}

/* Bandwidth and rate: rank 0 streams, rank 1 keeps PERF_WINDOW receives
 * posted and waits for them. */
static void send_stream(struct job *j, const struct lane_io *io)
{
	int i, n;
	for (i = 0; i < j->iters; i += n) {
		n = j->iters - i < PERF_WINDOW ? j->iters - i : PERF_WINDOW;
		if (j->w->rank == 1) {
			int k;
			for (k = 0; k < n; k++)
				PERF_TRY(j, recv_one(j, io));
			PERF_TRY(j, recv_wait(io, n));
		} else {
			int k;
			for (k = 0; k < n; k++)
				PERF_TRY(j, send_one(j, io));
			send_quiet(j, io);
		}
	}
}

static void send_test(struct job *j)
{
	struct lane_io io;
	PERF_TRY(j, lane_io(j, &io));
	if (j->stream)
		send_stream(j, &io);
	else
		send_pingpong(j, &io);
}

/* The kernel: one work item runs the timed loop. */
static void perf_kernel(void *arg)
{
	struct job *j = (struct job *)arg;
	double t0 = world_now();
	int i;
	if (j->test == T_PUT_SIGNAL) {
		pingpong(j);
	} else if (j->test == T_SEND) {
		send_test(j);
	} else if (!j->stream) {
		for (i = 0; i < j->iters && !j->err; i++) {
			issue(j);
			quiet(j);
		}
	} else {
		for (i = 0; i < j->iters && !j->err; i++) {
			issue(j);
			if ((i + 1) % PERF_WINDOW == 0)
				quiet(j);
		}
		quiet(j);
	}
	j->seconds = world_now() - t0;
}

static void run_job(struct job *j)
{
	struct fi_xpu_host_launch_attr la;
	memset(&la, 0, sizeof(la));
	la.num_groups = 1;
	la.group_size = 1;
	WCHECK(fi_xpu_host_launch(&la, perf_kernel, j));
	if (j->err) {
		fprintf(stderr, "fi_xpu_perf: %s of %zu bytes failed (%s:%d): %s\n",
			test_names[j->test], j->size, __FILE__, j->err_line, fi_xpu_strerror(j->err));
		exit(1);
	}
}

/* ---- MoE ------------------------------------------------------------- */
struct moe_kernel {
	void (*phase)(const struct moe_args *, uint32_t, uint32_t);
	const struct moe_args *a;
};

static void moe_item(void *arg)
{
	const struct moe_kernel *k = (const struct moe_kernel *)arg;
	const struct fi_xpu_host_item *it = fi_xpu_host_item();
	k->phase(k->a, it->group_id * it->group_size + it->local_id,
		 it->num_groups * it->group_size);
}

/* One dispatch+combine; returns its seconds. */
static double moe_once(const struct moe_args *a)
{
	static void (*const phases[])(const struct moe_args *, uint32_t, uint32_t) = {
		moe_dispatch_send, moe_dispatch_signal, moe_expert_combine, moe_combine_signal,
		moe_combine_reduce,
	};
	struct fi_xpu_host_launch_attr la;
	struct moe_kernel k;
	double t0 = world_now();
	unsigned p;
	memset(&la, 0, sizeof(la));
	la.num_groups = 1;
	la.group_size = 2;
	k.a = a;
	for (p = 0; p < sizeof(phases) / sizeof(phases[0]); p++) {
		k.phase = phases[p];
		WCHECK(fi_xpu_host_launch(&la, moe_item, &k));
		if (a->l->err) {
			fprintf(stderr, "fi_xpu_perf: moe failed at moe.h:%d: %s\n", a->l->err_line,
				fi_xpu_strerror(a->l->err));
			exit(1);
		}
	}
	return world_now() - t0;
}

/* ---- results --------------------------------------------------------- */
struct row {
	int test;
	size_t size;
	int iters;
	double lat_us, bw_gbps, rate_mops; /* < 0: not measured */
	double lf_lat_us, lf_gbps, lf_mops; /* the libfabric baseline's */
};

/* ---- the libfabric baselines (-B) ------------------------------------ */
/* The benchmarks' host-driven programs (benches/libfabric_rma.c,
 * benches/moe_host.c), installed in <prefix>/libexec/fi_xpu. */
static int baseline_path(char *out, size_t len, const char *name)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;
	if (n <= 0)
		return -1;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0; /* <prefix>/bin */
	if (snprintf(out, len, "%s/../libexec/fi_xpu/%s", self, name) >= (int)len)
		return -1;
	return access(out, X_OK);
}

/* Runs argv[0] and reads its "name value unit" lines into `b`; 0 when it
 * succeeded. Started before the world: this process never initialises
 * libfabric before it forks. */
static int run_baseline(char *const argv[], struct baseline *b)
{
	static const char *const sizes[3] = { "64KiB", "1MiB", "16MiB" };
	char line[256];
	int fds[2], st, i;
	pid_t pid;
	FILE *f;
	if (pipe(fds))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		char name[64];
		double v;
		if (sscanf(line, "%63s %lf", name, &v) != 2)
			continue;
		if (!strcmp(name, "latency_8B_us"))
			b->lat8_us = v;
		else if (!strcmp(name, "rate_8B_mps"))
			b->rate8_mops = v;
		else if (!strcmp(name, "moe_us"))
			b->moe_us = v;
		for (i = 0; i < 3; i++) {
			char want[32];
			snprintf(want, sizeof(want), "bw_%s_MBps", sizes[i]);
			if (!strcmp(name, want))
				b->bw_mbps[i] = v;
		}
	}
	if (f)
		fclose(f);
	else
		close(fds[0]);
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

/* Both baselines on the libfabric provider fi_xpu's provider runs on (the
 * shm provider's counterpart is libfabric's shm). */
static int measure_baselines(const struct opts *o)
{
	const char *lf = o->fabric ? o->fabric : "shm";
	char rma[4200], moe[4200], iters[16], warm[16], tokens[16];
	snprintf(iters, sizeof(iters), "%d", o->iters);
	snprintf(warm, sizeof(warm), "%d", o->warmup);
	snprintf(tokens, sizeof(tokens), "%u", o->tokens);
	if (baseline_path(rma, sizeof(rma), "libfabric_rma") ||
	    baseline_path(moe, sizeof(moe), "moe_host")) {
		fprintf(stderr, "fi_xpu_perf: -B needs libexec/fi_xpu/libfabric_rma and moe_host "
				"beside this program's prefix (installed where libfabric's headers "
				"were)\n");
		return -1;
	}
	if (o->tests & ((1u << T_WRITE) | (1u << T_PUT_SIGNAL))) {
		char *const argv[] = { rma, (char *)lf, iters, NULL };
		if (run_baseline(argv, &base_fig)) {
			fprintf(stderr, "fi_xpu_perf: %s %s failed\n", rma, lf);
			return -1;
		}
	}
	if (o->tests & (1u << T_MOE)) {
		char *const argv[] = { moe, (char *)lf, "-n", "2", "-T", tokens, "-i", iters,
				       "-W", warm, NULL };
		if (run_baseline(argv, &base_fig)) {
			fprintf(stderr, "fi_xpu_perf: %s %s failed\n", moe, lf);
			return -1;
		}
	}
	return 0;
}

/* The baseline's figures for a row, where it measured the same thing. */
static void baseline_row(struct row *r)
{
	static const size_t sizes[3] = { 64u << 10, 1u << 20, 16u << 20 };
	int i;
	r->lf_lat_us = r->lf_gbps = r->lf_mops = -1;
	/* libfabric_rma's latency is one way, from a ping-pong of 8-byte
	 * writes whose data the peer polls for: the put_signal row's figure. */
	if (r->test == T_PUT_SIGNAL && r->size == 8)
		r->lf_lat_us = base_fig.lat8_us;
	if (r->test == T_WRITE && r->size == 8)
		r->lf_mops = base_fig.rate8_mops;
	for (i = 0; i < 3 && r->test == T_WRITE; i++)
		if (r->size == sizes[i] && base_fig.bw_mbps[i] >= 0)
			r->lf_gbps = base_fig.bw_mbps[i] / 1e3;
	if (r->test == T_MOE && base_fig.moe_us > 0) {
		r->lf_lat_us = base_fig.moe_us;
		r->lf_gbps = (double)r->size / (base_fig.moe_us * 1e3);
	}
}

static void print_header(const struct opts *o)
{
	if (!strcmp(o->format, "csv"))
		printf("test,provider,size,iterations,latency_us,bandwidth_GBps,rate_Mops,verified,"
		       "baseline_latency_us,baseline_GBps,baseline_Mops\n");
	else if (!strcmp(o->format, "json"))
		printf("[");
	else if (o->baseline)
		printf("%-11s %-9s %10s %8s %12s %10s %10s %-8s %12s %10s %10s\n", "test",
		       "provider", "bytes", "iters", "latency_us", "GB/s", "Mops/s", "verified",
		       "lf_latency", "lf_GB/s", "lf_Mops/s");
	else
		printf("%-11s %-9s %10s %8s %12s %10s %10s %s\n", "test", "provider", "bytes", "iters",
		       "latency_us", "GB/s", "Mops/s", "verified");
}

static void cell(const struct opts *o, double v, int width, int last)
{
	int csv = !strcmp(o->format, "csv"), json = !strcmp(o->format, "json");
	if (v < 0 && (json || csv))
		printf(json ? "null" : "");
	else if (v < 0)
		printf("%*s", width, "-");
	else if (json || csv)
		printf("%.3f", v);
	else
		printf("%*.3f", width, v);
	if (!last)
		printf(json ? ", " : csv ? "," : " ");
}

static void print_row(const struct opts *o, const struct row *r, int first, const char *verified)
{
	char prov[64];
	snprintf(prov, sizeof(prov), "%s%s%s", o->prov, o->fabric ? "/" : "", o->fabric ? o->fabric : "");
	if (!strcmp(o->format, "json")) {
		printf("%s\n  {\"test\": \"%s\", \"provider\": \"%s\", \"size\": %zu, "
		       "\"iterations\": %d, \"latency_us\": ",
		       first ? "" : ",", test_names[r->test], prov, r->size, r->iters);
		cell(o, r->lat_us, 0, 1);
		printf(", \"bandwidth_GBps\": ");
		cell(o, r->bw_gbps, 0, 1);
		printf(", \"rate_Mops\": ");
		cell(o, r->rate_mops, 0, 1);
		printf(", \"verified\": %s, \"baseline_latency_us\": ",
		       strcmp(verified, "ok") ? "false" : "true");
		cell(o, r->lf_lat_us, 0, 1);
		printf(", \"baseline_GBps\": ");
		cell(o, r->lf_gbps, 0, 1);
		printf(", \"baseline_Mops\": ");
		cell(o, r->lf_mops, 0, 1);
		printf("}");
	} else if (!strcmp(o->format, "csv")) {
		printf("%s,%s,%zu,%d,", test_names[r->test], prov, r->size, r->iters);
		cell(o, r->lat_us, 0, 0);
		cell(o, r->bw_gbps, 0, 0);
		cell(o, r->rate_mops, 0, 0);
		printf("%s,", verified);
		cell(o, r->lf_lat_us, 0, 0);
		cell(o, r->lf_gbps, 0, 0);
		cell(o, r->lf_mops, 0, 1);
		printf("\n");
	} else {
		printf("%-11s %-9s %10zu %8d ", test_names[r->test], prov, r->size, r->iters);
		cell(o, r->lat_us, 12, 0);
		cell(o, r->bw_gbps, 10, 0);
		cell(o, r->rate_mops, 10, 0);
		if (o->baseline) {
			printf("%-8s ", verified);
			cell(o, r->lf_lat_us, 12, 0);
			cell(o, r->lf_gbps, 10, 0);
			cell(o, r->lf_mops, 10, 1);
			printf("\n");
		} else {
			printf("%s\n", verified);
		}
	}
	fflush(stdout);
}

static void progress(const struct opts *o, int done, int total, const char *what, size_t size)
{
	if (!o->progress)
		return;
	if (done == total)
		fprintf(stderr, "\r%60s\r", "");
	else
		fprintf(stderr, "\rfi_xpu_perf: [%d/%d] %s %zu bytes...", done + 1, total, what, size);
}

/* ---- the runs -------------------------------------------------------- */
static int count_steps(const struct opts *o)
{
	int t, n = 0;
	size_t s;
	for (t = 0; t < T_COUNT; t++) {
		if (!(o->tests & (1u << t)))
			continue;
		if (t == T_ATOMIC || t == T_MOE)
			n++;
		else
			for (s = o->min; s <= o->max; s *= 2)
				n++;
	}
	return n;
}

/* What the step left in the window is what it wrote: the bytes each
 * write, read or put carried (every rank fills its window with rank + 1),
 * or every atomic's addition. True on every rank when all agree. */
static int perf_verified(struct world *w, const struct job *j, const struct opts *o)
{
	int ok = 1, oks[WORLD_MAXP], check = 0;
	size_t i;
	unsigned char want = (unsigned char)(j->peer + 1);
	world_barrier(w); /* the issuing rank is done */
	if (j->test == T_WRITE)
		check = w->rank == 1;
	else if (j->test == T_READ)
		check = w->rank == 0;
	else if (j->test == T_PUT_SIGNAL || j->test == T_SEND)
		check = 1;
	if (check)
		for (i = 0; i < j->size; i++)
			ok &= w->sym[j->dst + i] == want;
	if (j->test == T_ATOMIC && w->rank == 1) {
		uint64_t got;
		memcpy(&got, w->sym + j->sig + 8, sizeof(got));
		ok = got == (uint64_t)o->warmup + 2 * (uint64_t)o->iters;
	}
	world_allgather(w, &ok, oks, sizeof(ok));
	return oks[0] && oks[1];
}

/* Both ranks run every step; rank 0 prints. */
static int rank_main(struct world *w, const struct opts *o)
{
	struct moe_layout plan;
	struct moe_args a;
	size_t base;
	int t, step = 0, steps = count_steps(o), first = 1;

	moe_plan(&plan, 2, o->tokens, 7168, 4, 3, 0);
	base = (size_t)plan.size;
	world_open(w, base + 2 * o->max + 64, NULL);
	memcpy(w->sym + WORLD_HDR, &plan, sizeof(plan));
	a.w = w->dev;
	a.sym = w->sym;
	a.l = (struct moe_layout *)(void *)(w->sym + WORLD_HDR);
	memset(w->sym + base, w->rank + 1, 2 * o->max + 64);
	memset(w->sym + base + 2 * o->max, 0, 64);
	if (w->rank == 0)
		print_header(o);
	for (t = 0; t < T_COUNT; t++) {
		size_t size;
		if (!(o->tests & (1u << t)))
			continue;
		for (size = t == T_ATOMIC ? 8 : o->min; size <= o->max; size *= 2) {
			struct row r;
			r.test = t;
			r.size = size;
			r.iters = o->iters;
			r.lat_us = r.bw_gbps = r.rate_mops = -1;
			r.lf_lat_us = r.lf_gbps = r.lf_mops = -1;
			if (w->rank == 0)
				progress(o, step, steps, test_names[t], size);
			step++;
			if (t == T_MOE) {
				double sum = 0, all[WORLD_MAXP];
				long bad, bads[WORLD_MAXP];
				int i;
				moe_fill(a.l, w->sym, 2, (uint32_t)w->rank);
				for (i = -o->warmup; i < o->iters; i++) {
					double dt;
					moe_reset(a.l, w->sym, 2);
					world_barrier(w);
					dt = moe_once(&a);
					sum += i >= 0 ? dt : 0;
				}
				bad = moe_verify(a.l, w->sym, 2, (uint32_t)w->rank);
				sum /= o->iters;
				world_allgather(w, &sum, all, sizeof(sum));
				world_allgather(w, &bad, bads, sizeof(bad));
				r.size = (size_t)o->tokens * 3 * (a.l->tok_bytes + a.l->out_bytes);
				r.lat_us = (all[0] > all[1] ? all[0] : all[1]) * 1e6;
				r.bw_gbps = (double)r.size / (r.lat_us * 1e3);
				baseline_row(&r);
				if (w->rank == 0)
					print_row(o, &r, first, bads[0] || bads[1] ? "FAILED" : "ok");
				if (bads[0] || bads[1])
					return 1;
				first = 0;
				break;
			}
			{
				struct job j;
				/* put_signal and send: both ranks take part. */
				int both = t == T_PUT_SIGNAL || t == T_SEND;
				memset(&j, 0, sizeof(j));
				j.w = w->dev;
				j.sym = w->sym;
				j.test = t;
				j.peer = 1 - w->rank;
				j.size = size;
				j.src = base;
				j.dst = base + o->max;
				j.sig = base + 2 * o->max;
				memset(w->sym + j.dst, 0, size);
				memset(w->sym + j.sig, 0, 8);
				/* The atomics' source: registered memory, as on ofi. */
				memcpy(w->sym + j.sig + 16, &(uint64_t){ 1 }, 8);
				world_barrier(w);
				if (both || w->rank == 0) {
					j.iters = o->warmup;
					if (j.iters)
						run_job(&j);
					if (both)
						world_barrier(w);
					j.iters = o->iters;
					run_job(&j);
					r.lat_us = j.seconds / o->iters * 1e6;
					if (both)
						r.lat_us /= 2; /* one way */
					if (t == T_SEND) {
						world_barrier(w);
						j.stream = 1;
						run_job(&j);
						r.rate_mops = o->iters / j.seconds / 1e6;
						r.bw_gbps = (double)size * o->iters / j.seconds / 1e9;
					} else if (t != T_PUT_SIGNAL) {
						j.stream = 1;
						run_job(&j);
						r.rate_mops = o->iters / j.seconds / 1e6;
						r.bw_gbps = (double)size * o->iters / j.seconds / 1e9;
					}
				}
				baseline_row(&r);
				if (!perf_verified(w, &j, o)) {
					if (w->rank == 0)
						print_row(o, &r, first, "FAILED");
					return 1;
				}
				if (w->rank == 0)
					print_row(o, &r, first, "ok");
				first = 0;
			}
			if (t == T_ATOMIC)
				break;
		}
	}
	if (w->rank == 0) {
		progress(o, steps, steps, "", 0);
		if (!strcmp(o->format, "json"))
			printf("\n]\n");
	}
	world_barrier(w);
	world_close(w);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fi_xpu_perf [-p shm|ofi] [-f fabric] [-t tests] [-s min] [-S max]\n"
		"                   [-n iterations] [-w warm-up] [-T tokens] [-o table|csv|json]\n"
		"                   [-B] [-P] [-h]\n"
		"  -p  fi_xpu provider (shm)           -f  libfabric provider under ofi (tcp)\n"
		"  -t  comma-separated tests: write,read,atomic,send,put_signal,moe (all)\n"
		"  -s  smallest size in bytes (8)      -S  largest size in bytes (1048576)\n"
		"  -n  timed iterations (1000)         -w  untimed iterations first (100)\n"
		"  -T  MoE tokens per rank (32)        -o  output format (table)\n"
		"  -B  also run the host-driven libfabric baselines (libexec/fi_xpu)\n"
		"  -P  progress line on stderr even when it is not a terminal\n");
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (errno || *end || v < 1 || v > PERF_MAX_SIZE)
		return -1;
	*out = (size_t)v;
	return 0;
}

static int parse_tests(char *list, unsigned *out)
{
	char *tok, *save = NULL;
	*out = 0;
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int t;
		for (t = 0; t < T_COUNT; t++)
			if (!strcmp(tok, test_names[t]))
				break;
		if (t == T_COUNT)
			return -1;
		*out |= 1u << t;
	}
	return *out ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct world w;
	int c, rc;
	long v;
	memset(&o, 0, sizeof(o));
	o.prov = "shm";
	o.format = "table";
	o.tests = (1u << T_COUNT) - 1;
	o.min = 8;
	o.max = 1u << 20;
	o.iters = 1000;
	o.warmup = 100;
	o.tokens = 32;
	o.progress = isatty(2);
	while ((c = getopt(argc, argv, "p:f:t:s:S:n:w:T:o:PBh")) != -1) {
		switch (c) {
		case 'p': o.prov = optarg; break;
		case 'f': o.fabric = optarg; break;
		case 't':
			if (parse_tests(optarg, &o.tests))
				goto bad;
			break;
		case 's':
			if (parse_size(optarg, &o.min))
				goto bad;
			break;
		case 'S':
			if (parse_size(optarg, &o.max))
				goto bad;
			break;
		case 'n':
		case 'w':
		case 'T':
			v = strtol(optarg, NULL, 10);
			if (v < (c == 'w' ? 0 : 1) || v > 10000000)
				goto bad;
			if (c == 'n')
				o.iters = (int)v;
			else if (c == 'w')
				o.warmup = (int)v;
			else
				o.tokens = (uint32_t)v;
			break;
		case 'o':
			o.format = optarg;
			if (strcmp(optarg, "table") && strcmp(optarg, "csv") && strcmp(optarg, "json"))
				goto bad;
			break;
		case 'P': o.progress = 1; break;
		case 'B': o.baseline = 1; break;
		case 'h': usage(stdout); return 0;
		default: goto bad;
		}
	}
	if (optind != argc || o.min > o.max || (strcmp(o.prov, "shm") && strcmp(o.prov, "ofi")))
		goto bad;
	if (!strcmp(o.prov, "ofi") && !o.fabric)
		o.fabric = "tcp";
	signal(SIGPIPE, SIG_IGN);
	if (o.baseline && measure_baselines(&o))
		return 1;
	memset(&w, 0, sizeof(w));
	w.prov = o.prov;
	w.fabric = o.fabric;
	world_spawn(&w, 2);
	rc = rank_main(&w, &o);
	if (w.rank != 0)
		exit(rc);
	return world_join(&w) || rc;
bad:
	usage(stderr);
	return 2;
}
