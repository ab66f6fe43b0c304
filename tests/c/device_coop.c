/* Cooperative reservation and copy on the host XPU: several groups race for
 * slots of one counter and copy buffers cooperatively, at every scope.
 * Usage: device_coop ITERATIONS. Exit status 0 when every check passed. */
#include <fi_xpu/device_coop.h>
#include <fi_xpu.h>

#include "scope_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUPS 3
#define MAX_N 64
#define SRC_LEN 4200
#define REGION (SRC_LEN + 32)

struct run {
	int scope;
	uint32_t group_size;
	uint32_t subgroup_size;
	int iters;
	uint64_t counter;
	uint32_t *owner; /* slot -> scope instance + 1 */
	size_t nslots;
	unsigned char src[SRC_LEN];
	unsigned char *dst; /* one REGION per scope instance */
	int failures;
	uint64_t expected; /* slots all instances asked for */
	uint32_t width;    /* the subgroup width the kernel saw */
};

static const size_t lens[] = {0, 1, 7, 8, 9, 63, 64, 65, 1000, 4096, 4099};
#define NLENS (sizeof(lens) / sizeof(lens[0]))

static void fail(struct run *r, const char *what, uint32_t inst, int it)
{
	fprintf(stderr, "scope %d N=%u: %s (instance %u, iteration %d)\n", r->scope,
		r->group_size, what, inst, it);
	__atomic_fetch_add(&r->failures, 1, __ATOMIC_RELAXED);
}

static uint64_t slots_for(uint32_t inst, int it)
{
	return 1 + (inst * 7u + (uint32_t)it) % 5u;
}

static void kernel(void *arg)
{
	struct run *r = arg;
	int scope = r->scope;
	uint32_t rank = fi_xpu_arch_scope_rank(scope);
	uint32_t size = fi_xpu_arch_scope_size(scope);
	uint32_t inst = scope_index(scope);
	unsigned char *region = r->dst + (size_t)inst * REGION;

	/* The width is the launcher's (the hardware's): queried, not assumed. */
	__atomic_store_n(&r->width, fi_xpu_arch_subgroup_size(), __ATOMIC_RELAXED);
	for (int it = 0; it < r->iters; it++) {
		uint64_t n = slots_for(inst, it), base = UINT64_MAX;
		int ret = fi_xpu_coop_reserve(&r->counter, n, scope, FI_XPU_ARCH_MS_SYSTEM, &base);
		if (ret || base + n > r->nslots) {
			fail(r, "reserve", inst, it);
			return;
		}
		for (uint64_t k = rank; k < n; k += size) {
			uint32_t old = __atomic_exchange_n(&r->owner[base + k], inst + 1,
							   __ATOMIC_RELAXED);
			if (old)
				fail(r, "slot handed out twice", inst, it);
		}

		size_t len = lens[(inst + (uint32_t)it) % NLENS];
		size_t soff = (size_t)(it % 8), doff = 8 + (size_t)((it * 3) % 8);
		ret = fi_xpu_coop_copy(region + doff, r->src + soff, len, scope,
				       FI_XPU_ARCH_MS_SYSTEM);
		if (ret) {
			fail(r, "copy", inst, it);
			return;
		}
		if (rank == 0) {
			if (memcmp(region + doff, r->src + soff, len))
				fail(r, "copied bytes differ", inst, it);
			if (region[doff - 1] != 0xee || region[doff + len] != 0xee)
				fail(r, "copy wrote outside its buffer", inst, it);
			memset(region, 0xee, REGION);
		}
		/* Nobody copies into the region before the leader has checked it. */
		if (fi_xpu_arch_barrier(scope))
			fail(r, "barrier", inst, it);
	}
}

static int run_one(int scope, uint32_t n, uint32_t sg, int iters)
{
	struct fi_xpu_host_launch_attr attr = {GROUPS, n, sg, 0};
	/* Room for the most instances any subgroup width gives. */
	uint32_t instances = scope == FI_XPU_WORK_ITEM || scope == FI_XPU_SUBGROUP ? GROUPS * n
			     : scope == FI_XPU_WORK_GROUP			      ? GROUPS
										      : 1;
	struct run *r = calloc(1, sizeof(*r));
	int bad;

	r->scope = scope;
	r->group_size = n;
	r->subgroup_size = sg;
	r->iters = iters;
	r->nslots = (size_t)instances * (size_t)iters * 5;
	r->owner = calloc(r->nslots, sizeof(*r->owner));
	r->dst = malloc((size_t)instances * REGION);
	memset(r->dst, 0xee, (size_t)instances * REGION);
	for (size_t i = 0; i < SRC_LEN; i++)
		r->src[i] = (unsigned char)(i * 131 + 17);

	int ret = fi_xpu_host_launch(&attr, kernel, r);
	if (ret) {
		fprintf(stderr, "launch: %d\n", ret);
		return 1;
	}
	if (scope == FI_XPU_SUBGROUP)
		instances = GROUPS * ((n + r->width - 1) / r->width);
	for (uint32_t inst = 0; inst < instances; inst++)
		for (int it = 0; it < iters; it++)
			r->expected += slots_for(inst, it);
	if (r->counter != r->expected) {
		fprintf(stderr, "scope %d N=%u: counter %llu, expected %llu\n", scope, n,
			(unsigned long long)r->counter, (unsigned long long)r->expected);
		r->failures++;
	}
	for (size_t i = 0; i < r->nslots; i++) {
		if ((i < r->counter) != (r->owner[i] != 0)) {
			fprintf(stderr, "scope %d N=%u: slot %zu %s\n", scope, n, i,
				r->owner[i] ? "owned beyond the counter" : "lost");
			r->failures++;
			break;
		}
	}
	bad = r->failures;
	free(r->owner);
	free(r->dst);
	free(r);
	return bad;
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = {1, 3, 32, 64};
	int iters = argc > 1 ? atoi(argv[1]) : 20;
	int bad = 0;

	for (int scope = FI_XPU_WORK_ITEM; scope <= FI_XPU_DEVICE; scope++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			/* 64 with subgroups of 16: several subgroups per group race too. */
			uint32_t sg = sizes[i] == 64 ? 16 : 0;
			bad += run_one(scope, sizes[i], sg, iters);
		}
	/* A bad scope is refused without reserving or copying anything. */
	{
		uint64_t c = 5, base = 9;
		unsigned char a[4] = {1, 2, 3, 4}, b[4] = {0};
		if (fi_xpu_coop_reserve(&c, 1, 7, FI_XPU_ARCH_MS_SYSTEM, &base) != -FI_EINVAL ||
		    c != 5 || base != 9 ||
		    fi_xpu_coop_copy(b, a, 4, -1, FI_XPU_ARCH_MS_SYSTEM) != -FI_EINVAL || b[0]) {
			fprintf(stderr, "bad scope accepted\n");
			bad++;
		}
		/* reserve_below refuses when the slots are not there. */
		if (fi_xpu_coop_reserve_below(&c, 3, 7, FI_XPU_WORK_ITEM, FI_XPU_ARCH_MS_SYSTEM,
					      &base) != -FI_EAGAIN ||
		    c != 5 ||
		    fi_xpu_coop_reserve_below(&c, 2, 7, FI_XPU_WORK_ITEM, FI_XPU_ARCH_MS_SYSTEM,
					      &base) != 0 ||
		    c != 7 || base != 5) {
			fprintf(stderr, "reserve_below wrong\n");
			bad++;
		}
	}
	if (bad)
		return 1;
	printf("coop ok: %d iterations\n", iters);
	return 0;
}
