/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Scopes on the ofi provider (see device_scope.h), over the libfabric
 * provider FI_XPU_OFI_PROVIDER names: one process, its endpoint writing to
 * itself. Also checks that a group's work requests sit in consecutive ring
 * slots in rank order (one claim for the group). Prints
 * "device_scope ofi: ok". */
#include "ofi_common.h"
#include "device_scope.h"

/* After a writes-only run: the entries [from, to) of the ring hold the
 * writes, each group's in one run of slots in rank order. */
static int ring_runs(struct ofi_node *n, const struct scope_env *env, uint64_t from, uint64_t to)
{
	const struct fi_xpu_ofi_ep_dev *d =
		(const struct fi_xpu_ofi_ep_dev *)(uintptr_t)n->ep[0].fid.prov_ctx;
	const struct fi_xpu_ofi_wqe *ring = (const struct fi_xpu_ofi_wqe *)(uintptr_t)d->ring;
	uint32_t total = env->groups * env->items, lanes = env->lanes, per = env->items;
	int bad = 0;

	if (to - from != total) {
		fprintf(stderr, "ofi scope %d: %llu ring entries for %u writes\n", env->scope,
			(unsigned long long)(to - from), total);
		return 1;
	}
	for (uint64_t pos = from; pos < to; pos++) {
		const struct fi_xpu_ofi_wqe *e = &ring[pos & (d->size - 1)];
		uint32_t item = (uint32_t)(e->context & 0xffff) - 1, first, rank;
		/* The group's first work item and this one's rank in it. */
		switch (env->scope) {
		case FI_XPU_SUBGROUP:
			first = item - (item % per) % lanes;
			break;
		case FI_XPU_WORK_GROUP:
			first = item - item % per;
			break;
		case FI_XPU_DEVICE:
			first = 0;
			break;
		default:
			first = item;
			break;
		}
		rank = item - first;
		/* The slot of rank 0 of the group, from this entry. */
		if (pos < rank) {
			bad++;
			continue;
		}
		{
			const struct fi_xpu_ofi_wqe *lead = &ring[(pos - rank) & (d->size - 1)];
			if (e->seq != pos + 1 || e->op != FI_XPU_OFI_OP_WRITE || pos - rank < from ||
			    (uint32_t)(lead->context & 0xffff) - 1 != first) {
				fprintf(stderr,
					"ofi scope %d: ring slot %llu holds work item %u, not in "
					"its group's run\n",
					env->scope, (unsigned long long)pos, item);
				bad++;
			}
		}
	}
	return bad;
}

int main(void)
{
	struct ofi_opts o = { .nep = 1, .ring = 256, .cq_size = 512, .heap = SC_HEAP };
	struct ofi_node n;
	struct scope_env env;
	const struct fi_xpu_ofi_ep_dev *d;
	int bad;

	ofi_setup(&n, -1, 0, &o);
	d = (const struct fi_xpu_ofi_ep_dev *)(uintptr_t)n.ep[0].fid.prov_ctx;
	memset(&env, 0, sizeof(env));
	env.prov = "ofi";
	env.ep = &n.ep[0];
	env.cq = &n.cq[0];
	env.cntr = &n.cntr;
	env.peer = &n.raw[0];
	env.desc = n.desc;
	env.heap = n.heap;
	env.rbase = n.peer.base;
	env.rkey = n.peer.key;
	bad = sc_run_all(&env);
	for (int scope = FI_XPU_WORK_ITEM; scope <= FI_XPU_DEVICE; scope++) {
		uint64_t from = __atomic_load_n(&d->prod, __ATOMIC_ACQUIRE);
		bad += sc_run(&env, scope, 3, 20, 8, SC_WRITES);
		bad += ring_runs(&n, &env, from, __atomic_load_n(&d->prod, __ATOMIC_ACQUIRE));
	}
	ofi_teardown(&n);
	if (bad) {
		fprintf(stderr, "device_scope ofi: FAILED (%d)\n", bad);
		return 1;
	}
	printf("device_scope ofi: ok\n");
	return 0;
}
