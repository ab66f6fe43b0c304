/* Kernels with the bugs a GPU exposes and CPU threads forgive, for the
 * host launcher's GPU-like mode (fi_xpu_host_launch(3)). Each case prints
 * one line of key=value results; the test (tests/device_gpu_like.rs) runs
 * it with and without the mode and compares.
 *
 *   device_gpu_like CASE [gpu]
 *     with "gpu" the launch sets FI_XPU_HOST_LAUNCH_GPU (FI_XPU_HOST_GPU
 *     in the environment turns the mode on for every launch as well).
 *
 * Cases:
 *   resident      6 groups of 4 record how many work items ran at once
 *                 (each stays until all have started, or for 200 ms) and how
 *                 many groups had finished when each group started
 *   grid_spin     a grid-wide barrier made of an atomic counter and a spin:
 *                 every group waits for all the others
 *   device_barrier the launcher's own FI_XPU_DEVICE barrier, 4 groups
 *   later_flag    every group but the last spins on a flag the last one sets
 *   full_subgroup a copy split by fi_xpu_arch_subgroup_size(), as if every
 *                 subgroup were full (a group of 32 work items)
 *   converged     the same copy split by the subgroup's real rank and size
 *   lockstep      lane 0 publishes a value that the other lanes read with
 *                 no subgroup sync between (warp-synchronous code)
 *   lockstep_sync the same with a subgroup barrier between
 *   partial_group 2 groups of 4: work item 3 of group 1 returns before the
 *                 work-group barrier that the others call
 *   partial_subgroup the same with a subgroup broadcast (subgroups of 2 by
 *                 FI_XPU_HOST_GPU_SUBGROUP=2)
 */
#include <fi_xpu/device_arch.h>
#include <fi_xpu.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint32_t flags;

static int launch(uint32_t groups, uint32_t items, void (*k)(void *), void *arg)
{
	struct fi_xpu_host_launch_attr la = {groups, items, 0, flags};

	return fi_xpu_host_launch(&la, k, arg);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000L};

	nanosleep(&ts, NULL);
}

/* ---- resident ---------------------------------------------------------- */

#define RES_GROUPS 6
#define RES_ITEMS 4

struct resident {
	/* work items that started, that are past their wait, most at once */
	uint32_t started, left, most, finished;
	uint32_t finished_at_start[RES_GROUPS];
};

static void resident_kernel(void *arg)
{
	struct resident *r = arg;
	uint32_t now = __atomic_add_fetch(&r->started, 1, __ATOMIC_ACQ_REL) -
		       __atomic_load_n(&r->left, __ATOMIC_ACQUIRE);
	uint32_t most = __atomic_load_n(&r->most, __ATOMIC_RELAXED);

	while (now > most &&
	       !__atomic_compare_exchange_n(&r->most, &most, now, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
	if (fi_xpu_arch_local_id() == 0)
		r->finished_at_start[fi_xpu_arch_group_id()] =
			__atomic_load_n(&r->finished, __ATOMIC_ACQUIRE);
	/* Stay until every work item of the launch runs, or for 200 ms. */
	uint64_t t0 = fi_xpu_arch_clock_ns();
	while (__atomic_load_n(&r->started, __ATOMIC_ACQUIRE) < RES_GROUPS * RES_ITEMS &&
	       fi_xpu_arch_clock_ns() - t0 < 200000000ull)
		fi_xpu_arch_pause();
	__atomic_add_fetch(&r->left, 1, __ATOMIC_ACQ_REL);
	fi_xpu_arch_barrier(FI_XPU_WORK_GROUP);
	if (fi_xpu_arch_local_id() == 0)
		__atomic_add_fetch(&r->finished, 1, __ATOMIC_ACQ_REL);
}

static void resident(void)
{
	struct resident r;
	int rc;

	memset(&r, 0, sizeof(r));
	rc = launch(RES_GROUPS, RES_ITEMS, resident_kernel, &r);
	printf("resident: rc=%d most_items=%u finished_at_start=", rc, r.most);
	for (int g = 0; g < RES_GROUPS; g++)
		printf("%s%u", g ? "," : "", r.finished_at_start[g]);
	printf("\n");
}

/* ---- kernels that wait on other groups ---------------------------------- */

static void grid_spin_kernel(void *arg)
{
	uint32_t *count = arg;

	if (fi_xpu_arch_local_id() == 0) {
		fi_xpu_arch_fetch_add_u32(count, 1, FI_XPU_ARCH_ACQ_REL, FI_XPU_ARCH_MS_DEVICE);
		while (fi_xpu_arch_load_u32(count, FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_MS_DEVICE) <
		       fi_xpu_arch_num_groups())
			fi_xpu_arch_pause();
	}
	fi_xpu_arch_barrier(FI_XPU_WORK_GROUP);
}

static void device_barrier_kernel(void *arg)
{
	uint32_t *count = arg;

	fi_xpu_arch_fetch_add_u32(count, 1, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_DEVICE);
	fi_xpu_arch_barrier(FI_XPU_DEVICE);
}

static void later_flag_kernel(void *arg)
{
	uint32_t *flag = arg;

	if (fi_xpu_arch_local_id() != 0)
		return;
	if (fi_xpu_arch_group_id() == fi_xpu_arch_num_groups() - 1)
		fi_xpu_arch_store_u32(flag, 1, FI_XPU_ARCH_RELEASE, FI_XPU_ARCH_MS_DEVICE);
	else
		while (!fi_xpu_arch_load_u32(flag, FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_MS_DEVICE))
			fi_xpu_arch_pause();
}

static void waits(const char *name, uint32_t groups, void (*k)(void *))
{
	uint32_t word = 0;
	int rc = launch(groups, 2, k, &word);

	printf("%s: rc=%d\n", name, rc);
}

/* ---- subgroups ---------------------------------------------------------- */

#define COPY_LEN 4096
#define COPY_ITEMS 32

struct copy {
	unsigned char src[COPY_LEN], dst[COPY_LEN];
	int converged;
};

static void copy_kernel(void *arg)
{
	struct copy *c = arg;
	uint32_t rank, size;

	if (c->converged) {
		rank = fi_xpu_arch_scope_rank(FI_XPU_SUBGROUP);
		size = fi_xpu_arch_scope_size(FI_XPU_SUBGROUP);
	} else {
		/* The bug: every lane of a full subgroup is assumed present. */
		rank = fi_xpu_arch_lane_id();
		size = fi_xpu_arch_subgroup_size();
	}
	/* Each subgroup copies its share of the buffer. */
	uint32_t width = fi_xpu_arch_subgroup_size();
	uint32_t per_group = (fi_xpu_arch_group_size() + width - 1) / width;
	uint32_t chunk = COPY_LEN / per_group, first = fi_xpu_arch_subgroup_id() * chunk;
	for (uint32_t i = rank; i < chunk; i += size)
		c->dst[first + i] = c->src[first + i];
	fi_xpu_arch_barrier(FI_XPU_SUBGROUP);
}

static void copy(const char *name, int converged)
{
	static struct copy c;
	uint32_t missing = 0;
	int rc;

	for (int i = 0; i < COPY_LEN; i++)
		c.src[i] = (unsigned char)(i % 255 + 1); /* never 0, as dst starts */
	memset(c.dst, 0, sizeof(c.dst));
	c.converged = converged;
	rc = launch(1, COPY_ITEMS, copy_kernel, &c);
	for (int i = 0; i < COPY_LEN; i++)
		missing += c.dst[i] != c.src[i];
	printf("%s: rc=%d missing=%u\n", name, rc, missing);
}

#define LS_ITEMS 32

struct lockstep {
	uint64_t published;
	uint32_t stale;
	int sync;
};

static void lockstep_kernel(void *arg)
{
	struct lockstep *l = arg;

	if (fi_xpu_arch_lane_id() == 0)
		fi_xpu_arch_store_u64(&l->published, 42, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_DEVICE);
	if (l->sync)
		fi_xpu_arch_barrier(FI_XPU_SUBGROUP);
	else if (fi_xpu_arch_lane_id() != 0)
		/* Work between: CPU threads run side by side, so lane 0 has long
		 * published by the time the others read. */
		sleep_ms(10);
	if (fi_xpu_arch_load_u64(&l->published, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_DEVICE) != 42)
		__atomic_add_fetch(&l->stale, 1, __ATOMIC_RELAXED);
}

static void lockstep(const char *name, int sync)
{
	struct lockstep l = {0, 0, sync};
	int rc = launch(1, LS_ITEMS, lockstep_kernel, &l);

	printf("%s: rc=%d stale=%u\n", name, rc, l.stale);
}

/* ---- partial ----------------------------------------------------------- */

struct partial {
	int scope;
	uint32_t ok, timedout;
};

static void partial_kernel(void *arg)
{
	struct partial *p = arg;
	uint64_t v = 7;
	int rc;

	if (fi_xpu_arch_group_id() == 1 && fi_xpu_arch_local_id() == 3)
		return;
	if (p->scope == FI_XPU_SUBGROUP)
		rc = fi_xpu_arch_broadcast_u64(FI_XPU_SUBGROUP, &v);
	else
		rc = fi_xpu_arch_barrier(FI_XPU_WORK_GROUP);
	if (rc == 0)
		__atomic_add_fetch(&p->ok, 1, __ATOMIC_RELAXED);
	else if (rc == -FI_ETIMEDOUT)
		__atomic_add_fetch(&p->timedout, 1, __ATOMIC_RELAXED);
}

static void partial(const char *name, int scope)
{
	struct partial p = {scope, 0, 0};
	int rc = launch(2, 4, partial_kernel, &p);

	printf("%s: rc=%d ok=%u timedout=%u\n", name, rc, p.ok, p.timedout);
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";

	if (argc > 2 && strcmp(argv[2], "gpu") == 0)
		flags = FI_XPU_HOST_LAUNCH_GPU;
	if (strcmp(c, "resident") == 0)
		resident();
	else if (strcmp(c, "grid_spin") == 0)
		waits(c, 4, grid_spin_kernel);
	else if (strcmp(c, "device_barrier") == 0)
		waits(c, 4, device_barrier_kernel);
	else if (strcmp(c, "later_flag") == 0)
		waits(c, 3, later_flag_kernel);
	else if (strcmp(c, "full_subgroup") == 0)
		copy(c, 0);
	else if (strcmp(c, "converged") == 0)
		copy(c, 1);
	else if (strcmp(c, "lockstep") == 0)
		lockstep(c, 0);
	else if (strcmp(c, "lockstep_sync") == 0)
		lockstep(c, 1);
	else if (strcmp(c, "partial_group") == 0)
		partial(c, FI_XPU_WORK_GROUP);
	else if (strcmp(c, "partial_subgroup") == 0)
		partial(c, FI_XPU_SUBGROUP);
	else {
		fprintf(stderr, "unknown case '%s'\n", c);
		return 2;
	}
	return 0;
}
