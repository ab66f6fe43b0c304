/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * N processes for the MoE and allreduce examples: fork the ranks, join
 * them into an fi_xpu world (fi_xpu_world(3)) whose bootstrap is a set of
 * socketpairs (rank 0 in the middle), and allocate one symmetric window:
 * the same size and layout on every rank, reached from kernels by rank
 * through the world's device tables (fi_xpu_world_device(3)).
 *
 * Started by a launcher instead, one process per rank on any nodes, with
 * FI_XPU_BOOTSTRAP_RANK, _SIZE and _ADDR set (fi_xpu_world(3)), a process
 * forks nothing and joins through the library's tcp bootstrap; the
 * number of ranks is FI_XPU_BOOTSTRAP_SIZE.
 *
 * The provider is chosen with -p (shm or ofi) and, for ofi, the libfabric
 * provider with -f (tcp, shm, ...). The window is memory of the world's
 * device, so the same code runs on the host XPU (FI_HMEM_SYSTEM) and,
 * with memory callbacks, on a GPU.
 */
#ifndef FI_XPU_EXAMPLE_WORLD_H
#define FI_XPU_EXAMPLE_WORLD_H

#include <fi_xpu.h>
#include <fi_xpu/device.h>
#include <fi_xpu/device_world.h>

#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORLD_MAXP 8
/* The start of a window holds the kernels' table (struct world_dev); the
 * application's layout begins here. */
#define WORLD_HDR 256

#define WCHECK(expr)                                                                     \
	do {                                                                             \
		long long rc_ = (long long)(expr);                                       \
		if (rc_ < 0) {                                                           \
			fprintf(stderr, "[%d] %s:%d: %s = %lld (%s)\n", (int)getpid(),    \
				__FILE__, __LINE__, #expr, rc_, fi_xpu_strerror((int)rc_)); \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

/* What a kernel reads: the world's table and the symmetric window's. */
struct world_dev {
	const struct fi_xpu_world_dev *world;
	const struct fi_xpu_window_dev *win;
	uint32_t rank, n;
};

struct world {
	int rank, n;
	int launched;          /* one process per rank, started by a launcher */
	int up;                /* rank > 0: socket to rank 0 */
	int down[WORLD_MAXP];  /* rank 0: sockets to the others */
	pid_t pids[WORLD_MAXP];
	const char *name; /* printed with the ranks' pids ("<name> pids ...") */
	int bind;         /* forked ranks: each on one CPU (world_bind) */
	const char *prov, *fabric;
	struct fid_xpu_world *world;
	struct fid_xpu_window *win;
	unsigned char *sym; /* this rank's part of the symmetric window */
	size_t sym_len;
	struct world_dev *dev; /* in device-visible memory */
	void *dev_mem;
	/* How the host writes into the window: NULL for memcpy, which
	 * suits host memory; a GPU program whose window is device memory
	 * gives a copy through its runtime. */
	void (*write)(void *dst, const void *src, size_t len);
};

static inline void world_io(int fd, void *buf, size_t len, int out)
{
	unsigned char *p = (unsigned char *)buf;
	while (len) {
		ssize_t r = out ? write(fd, p, len) : read(fd, p, len);
		if (r <= 0) {
			fprintf(stderr, "[%d] a rank is gone\n", (int)getpid());
			exit(1);
		}
		p += r;
		len -= (size_t)r;
	}
}

/* Every rank gives `len` bytes; every rank gets all of them in rank order. */
static inline void world_allgather(struct world *w, const void *mine, void *all, size_t len)
{
	int i;
	if (w->launched) {
		WCHECK(fi_xpu_world_allgather(w->world, mine, all, len));
		return;
	}
	if (w->rank == 0) {
		memcpy(all, mine, len);
		for (i = 1; i < w->n; i++)
			world_io(w->down[i], (unsigned char *)all + (size_t)i * len, len, 0);
		for (i = 1; i < w->n; i++)
			world_io(w->down[i], all, len * (size_t)w->n, 1);
	} else {
		world_io(w->up, (void *)(uintptr_t)mine, len, 1);
		world_io(w->up, all, len * (size_t)w->n, 0);
	}
}

static inline void world_barrier(struct world *w)
{
	char b[WORLD_MAXP], m = 1;
	world_allgather(w, &m, b, 1);
}

/* Binds the calling rank, and the threads it starts later (an ofi
 * provider's progress thread among them), to one CPU of those the process
 * may use: the (rank mod count)-th, as MPI launchers bind ranks to cores.
 * Ranks then stop trading places on the CPUs, and each rank's work items
 * and progress thread share its CPU. */
static inline void world_bind(const struct world *w)
{
	cpu_set_t mine, one;
	int cpu, seen = 0, count;
	if (sched_getaffinity(0, sizeof(mine), &mine) != 0 || (count = CPU_COUNT(&mine)) < 1) {
		fprintf(stderr, "rank %d: no CPU set to bind to\n", w->rank);
		exit(1);
	}
	CPU_ZERO(&one);
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &mine) && seen++ == w->rank % count) {
			CPU_SET(cpu, &one);
			break;
		}
	if (sched_setaffinity(0, sizeof(one), &one) != 0) {
		fprintf(stderr, "rank %d: binding to CPU %d failed\n", w->rank, cpu);
		exit(1);
	}
}

/* Forks n - 1 ranks; returns in every process with w->rank set. Under a
 * launcher (FI_XPU_BOOTSTRAP_RANK set) forks nothing: the rank and the
 * number of ranks come from the environment. */
static inline void world_spawn(struct world *w, int n)
{
	int i, sv[2];
	const char *rank = getenv("FI_XPU_BOOTSTRAP_RANK"), *size = getenv("FI_XPU_BOOTSTRAP_SIZE");
	w->n = n;
	w->rank = 0;
	w->up = -1;
	if (rank && *rank) {
		w->launched = 1;
		w->rank = atoi(rank);
		w->n = size ? atoi(size) : 0;
		if (w->n < 2 || w->n > WORLD_MAXP || w->rank < 0 || w->rank >= w->n) {
			fprintf(stderr, "rank %s of %s: 2 to %d ranks\n", rank, size ? size : "?",
				WORLD_MAXP);
			exit(2);
		}
		return;
	}
	for (i = 1; i < n; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			exit(1);
		w->pids[i] = fork();
		if (w->pids[i] < 0)
			exit(1);
		if (w->pids[i] == 0) {
			int j;
			for (j = 1; j < i; j++)
				close(w->down[j]);
			close(sv[0]);
			w->rank = i;
			w->up = sv[1];
			if (w->bind)
				world_bind(w);
			return;
		}
		close(sv[1]);
		w->down[i] = sv[0];
	}
	if (w->bind)
		world_bind(w);
	/* Who to clean up after: libfabric's shm provider leaves files named
	 * after the pid in /dev/shm when a process dies. */
	if (w->name) {
		w->pids[0] = getpid();
		printf("%s pids", w->name);
		for (i = 0; i < n; i++)
			printf(" %d", (int)w->pids[i]);
		printf("\n");
		fflush(stdout);
	}
}

/* Rank 0 collects the others' exit status: 0 when all succeeded. */
static inline int world_join(struct world *w)
{
	int i, st, bad = 0;
	if (w->rank != 0 || w->launched)
		return 0;
	for (i = 1; i < w->n; i++) {
		if (waitpid(w->pids[i], &st, 0) != w->pids[i] || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			fprintf(stderr, "rank %d failed\n", i);
			bad = 1;
		}
	}
	return bad;
}

/* This rank's own endpoint (its route to itself): what signal waits are
 * given, so that the host's abort word ends them too. */
FI_XPU_FUNC struct fid_xpu_ep *world_self_ep(const struct world_dev *w)
{
	return fi_xpu_world_route_ep(w->world, fi_xpu_world_rma_route(w->win, (int)w->rank));
}

static inline int world_bootstrap_allgather(void *context, const void *mine, void *all, size_t len)
{
	world_allgather((struct world *)context, mine, all, len);
	return 0;
}

/* Joins the fi_xpu world of these processes (fi_xpu_world(3); its
 * bootstrap is the socketpairs above) on `prov` (over `fabric` for ofi)
 * and allocates a symmetric window of `sym_len` bytes. `xpu` chooses the
 * device (NULL: host XPU). Returns what fi_xpu_world_open returned (the
 * world is open on 0; a caller may try another memory kind on an
 * error); exits on any later error. */
static inline int world_try_open(struct world *w, size_t sym_len,
				 const struct fi_xpu_ctx_open_attr *xpu)
{
	struct fi_xpu_bootstrap_ops boot;
	struct fi_xpu_world_attr attr;
	struct fi_xpu_world_info info;
	struct world_dev hdr;
	void *win_dev;
	int rc;

	/* The world takes its providers from the environment. */
	setenv("FI_XPU_PROVIDER", w->prov, 1);
	if (w->fabric)
		setenv("FI_XPU_OFI_PROVIDER", w->fabric, 1);
	memset(&boot, 0, sizeof(boot));
	boot.size = sizeof(boot);
	boot.rank = w->rank;
	boot.nranks = w->n;
	boot.context = w;
	boot.allgather = world_bootstrap_allgather;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.rank = -1;
	/* Launched: the library's tcp bootstrap, from the environment. */
	attr.bootstrap_ops = w->launched ? NULL : &boot;
	attr.xpu = xpu;
	rc = fi_xpu_world_open(&attr, &w->world, NULL);
	if (rc)
		return rc;
	WCHECK(fi_xpu_world_query(w->world, &info));
	w->sym_len = sym_len;
	WCHECK(fi_xpu_world_alloc(w->world, sym_len, 0, (void **)&w->sym, &win_dev, &w->win));
	/* The kernels' own table, at the start of the window (memory of the
	 * world's device), written through w->write. */
	memset(&hdr, 0, sizeof(hdr));
	hdr.world = (const struct fi_xpu_world_dev *)info.dev;
	hdr.win = (const struct fi_xpu_window_dev *)win_dev;
	hdr.rank = (uint32_t)w->rank;
	hdr.n = (uint32_t)w->n;
	w->dev = (struct world_dev *)(void *)w->sym;
	if (w->write)
		w->write(w->dev, &hdr, sizeof(hdr));
	else
		memcpy(w->dev, &hdr, sizeof(hdr));
	WCHECK(fi_xpu_world_host_barrier(w->world));
	return 0;
}

static inline void world_open(struct world *w, size_t sym_len, const struct fi_xpu_ctx_open_attr *xpu)
{
	WCHECK(world_try_open(w, sym_len, xpu));
}

static inline void world_close(struct world *w)
{
	WCHECK(fi_xpu_world_free(w->win));
	WCHECK(fi_xpu_world_close(w->world));
}

static inline double world_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
