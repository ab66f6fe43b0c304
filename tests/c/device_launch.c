/* Host XPU launcher: argument errors, work-item ids, barriers and broadcasts
 * at every scope, and single-work-item behaviour outside a launch. */
#include <fi_xpu/device_arch.h>
#include <fi_xpu.h>

#include <stdio.h>
#include <stdlib.h>

static int failures;
#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
			__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);   \
		}                                                             \
	} while (0)

#define G 3
#define N 10
#define SG 4

struct seen {
	uint32_t group, local, lane, sub, sgsize, gsize, ngroups;
	uint32_t sub_items, dev_rank, dev_size;
	int hits;
};

static struct seen seen[G * N];
static unsigned arrived[4][G * N];

static void nothing(void *arg)
{
	(void)arg;
}

/* The id of the caller's instance of `scope`, so counts can be compared. */
static uint32_t inst(int scope)
{
	switch (scope) {
	case FI_XPU_SUBGROUP:
		/* A group of N items has fewer than N subgroups: in bounds of
		 * `arrived` (it was group * 16, past the end for group 2,
		 * which UBSan caught). */
		return fi_xpu_arch_group_id() * N + fi_xpu_arch_subgroup_id();
	case FI_XPU_WORK_GROUP:
		return fi_xpu_arch_group_id();
	case FI_XPU_DEVICE:
		return 0;
	default:
		return fi_xpu_arch_scope_rank(FI_XPU_DEVICE);
	}
}

static void kernel(void *arg)
{
	(void)arg;
	uint32_t id = fi_xpu_arch_scope_rank(FI_XPU_DEVICE);
	struct seen *s = &seen[id];
	const struct fi_xpu_host_item *it = fi_xpu_host_item();

	s->group = fi_xpu_arch_group_id();
	s->local = fi_xpu_arch_local_id();
	s->lane = fi_xpu_arch_lane_id();
	s->sub = fi_xpu_arch_subgroup_id();
	s->sgsize = fi_xpu_arch_subgroup_size();
	s->gsize = fi_xpu_arch_group_size();
	s->ngroups = fi_xpu_arch_num_groups();
	s->sub_items = fi_xpu_arch_scope_size(FI_XPU_SUBGROUP);
	s->dev_size = fi_xpu_arch_scope_size(FI_XPU_DEVICE);
	s->dev_rank = id;
	CHECK(it->subgroup_items == s->sub_items && it->local_id == s->local);
	__atomic_fetch_add(&s->hits, 1, __ATOMIC_RELAXED);

	for (int scope = FI_XPU_WORK_ITEM; scope <= FI_XPU_DEVICE; scope++) {
		uint32_t size = fi_xpu_arch_scope_size(scope);
		for (int round = 1; round <= 3; round++) {
			/* Everyone of the instance arrives before anyone leaves. */
			__atomic_fetch_add(&arrived[scope][inst(scope)], 1, __ATOMIC_RELAXED);
			CHECK(fi_xpu_arch_barrier(scope) == 0);
			CHECK(__atomic_load_n(&arrived[scope][inst(scope)], __ATOMIC_RELAXED) >=
			      (unsigned)round * size);
			CHECK(fi_xpu_arch_barrier(scope) == 0);

			uint64_t v = 1000u * (uint64_t)round + id;
			CHECK(fi_xpu_arch_broadcast_u64(scope, &v) == 0);
			uint64_t leader = id - fi_xpu_arch_scope_rank(scope);
			if (scope == FI_XPU_SUBGROUP)
				leader = id - fi_xpu_arch_lane_id();
			CHECK(v == 1000u * (uint64_t)round + leader);
		}
	}
	CHECK(fi_xpu_arch_barrier(4) == -FI_EINVAL);
	CHECK(fi_xpu_arch_scope_check(FI_XPU_DEVICE) == 0);
}

int main(void)
{
	struct fi_xpu_host_launch_attr a = {G, N, SG, 0};

	/* Argument errors. */
	CHECK(fi_xpu_host_launch(NULL, nothing, NULL) == -FI_EINVAL);
	CHECK(fi_xpu_host_launch(&a, NULL, NULL) == -FI_EINVAL);
	a.num_groups = 0;
	CHECK(fi_xpu_host_launch(&a, nothing, NULL) == -FI_EINVAL);
	a.num_groups = G, a.group_size = 0;
	CHECK(fi_xpu_host_launch(&a, nothing, NULL) == -FI_EINVAL);
	a.num_groups = FI_XPU_HOST_MAX_ITEMS, a.group_size = 2;
	CHECK(fi_xpu_host_launch(&a, nothing, NULL) == -FI_E2BIG);
	a.num_groups = 0x10000, a.group_size = 0x10000;
	CHECK(fi_xpu_host_launch(&a, nothing, NULL) == -FI_E2BIG);
	a.num_groups = G, a.group_size = N, a.flags = 2;
	CHECK(fi_xpu_host_launch(&a, nothing, NULL) == -FI_EBADFLAGS);
	a.flags = 0;

	CHECK(fi_xpu_host_launch(&a, kernel, NULL) == 0);
	for (uint32_t i = 0; i < G * N; i++) {
		struct seen *s = &seen[i];
		uint32_t local = i % N;
		CHECK(s->hits == 1);
		CHECK(s->group == i / N && s->local == local && s->gsize == N && s->ngroups == G);
		CHECK(s->sgsize == SG && s->lane == local % SG && s->sub == local / SG);
		/* N = 10 with subgroups of 4: 4, 4, then a partial one of 2. */
		CHECK(s->sub_items == (local < 8 ? 4u : 2u));
		CHECK(s->dev_size == G * N && s->dev_rank == i);
	}

	/* A plain thread is one work item: ids 0, sizes 1, every scope trivial. */
	CHECK(fi_xpu_arch_lane_id() == 0 && fi_xpu_arch_local_id() == 0 &&
	      fi_xpu_arch_group_id() == 0);
	CHECK(fi_xpu_arch_group_size() == 1 && fi_xpu_arch_num_groups() == 1 &&
	      fi_xpu_arch_subgroup_size() == 1);
	for (int scope = FI_XPU_WORK_ITEM; scope <= FI_XPU_DEVICE; scope++) {
		uint64_t v = 77;
		CHECK(fi_xpu_arch_scope_size(scope) == 1 && fi_xpu_arch_scope_rank(scope) == 0);
		CHECK(fi_xpu_arch_barrier(scope) == 0);
		CHECK(fi_xpu_arch_broadcast_u64(scope, &v) == 0 && v == 77);
	}
	{
		uint64_t v = 1;
		CHECK(fi_xpu_arch_barrier(-1) == -FI_EINVAL);
		CHECK(fi_xpu_arch_broadcast_u64(4, &v) == -FI_EINVAL);
		CHECK(fi_xpu_host_barrier(9) == -FI_EINVAL);
		CHECK(fi_xpu_host_broadcast(FI_XPU_WORK_GROUP, NULL) == -FI_EINVAL);
	}
	/* The clock moves forward. */
	{
		uint64_t t0 = fi_xpu_arch_clock_ns();
		fi_xpu_arch_pause();
		CHECK(fi_xpu_arch_clock_ns() >= t0);
	}
	if (failures)
		return 1;
	printf("launch ok\n");
	return 0;
}
