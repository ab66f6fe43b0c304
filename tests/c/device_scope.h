/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Scopes on the host launcher, shared by device_scope_shm.c and
 * device_scope_ofi.c: an endpoint writes to itself (loopback), every work
 * item with its own arguments, at every scope.
 *
 *   writes    every work item writes its own bytes (own length, own target
 *             slot, own context): all N land, N completions, and the
 *             counter wait at group scope sees all of them.
 *   counters  every work item adds 1 to the counter: it moves by N.
 *   atomics   every work item adds its own value and fetches its own
 *             result: the results are the prefix sums of one order.
 *   messages  every work item posts its own tagged receive and sends its
 *             own tagged message.
 *   coop      fi_xpu_coop_write: one write per group, with the group's
 *             arguments, one completion.
 *   refused   some work items pass a NULL buffer: they alone get
 *             -FI_EINVAL, the others' writes land (on ofi the refused
 *             members' ring slots carry no-ops).
 * CQ reads run at the same scope: the leader reads into its buffer, every
 * member gets the count, and each group reads as many completions as it
 * caused. A counter wait that cannot succeed times out for every member.
 */
#ifndef DEVICE_SCOPE_H
#define DEVICE_SCOPE_H

#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include "scope_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SC_MAX_ITEMS 64
#define SC_SLOT 64
#define SC_SRC 0                          /* SC_MAX_ITEMS source slots */
#define SC_DST (SC_SRC + SC_MAX_ITEMS * SC_SLOT)
#define SC_RCV (SC_DST + SC_MAX_ITEMS * SC_SLOT)
#define SC_RES (SC_RCV + SC_MAX_ITEMS * SC_SLOT) /* fetched values, 8 bytes each */
#define SC_OPD (SC_RES + SC_MAX_ITEMS * 8)       /* atomic operands, 8 bytes each */
#define SC_ACC (SC_OPD + SC_MAX_ITEMS * 8)       /* the atomic accumulator */
#define SC_BIG (SC_ACC + 64)                     /* cooperative source */
#define SC_BIG_LEN 3000
#define SC_COOP (SC_BIG + 4096) /* one 4 KiB region per group */
#define SC_HEAP (SC_COOP + SC_MAX_ITEMS * 4096)
#define SC_TAG 0x5c0e0000ULL
#define SC_WAIT_MS 5000
/* The whole program, a bound on a hang of a failing run. */
#define SC_WATCHDOG_S 120

enum { SC_WRITES = 1, SC_COUNTERS = 2, SC_ATOMICS = 4, SC_MESSAGES = 8, SC_COOP_WRITE = 16,
       SC_ALL = 31, SC_REFUSED = 32 };

struct scope_env {
	const char *prov;
	struct fid_xpu_ep *ep;
	struct fid_xpu_cq *cq;
	struct fid_xpu_cntr *cntr; /* counts completed writes */
	void *peer;                /* our own raw address */
	void *desc;                /* the heap's descriptor (or NULL) */
	unsigned char *heap;       /* SC_HEAP bytes, registered as rbase/rkey */
	uint64_t rbase, rkey;
	/* per run */
	int scope, phases;
	uint32_t groups, items, lanes;
	uint64_t cntr0;
	int fails;
	/* completions seen, by context */
	uint32_t seen[6][SC_MAX_ITEMS];
	int64_t rc[SC_MAX_ITEMS][9];
	uint64_t cntr_moved;
};

static unsigned char sc_pat(uint32_t item, size_t k)
{
	return (unsigned char)(item * 29u + (uint32_t)k * 7u + 1u);
}

/* Own length of every work item's write and message. */
static size_t sc_len(uint32_t item)
{
	return 1 + (item * 13u) % SC_SLOT;
}

/* The work items whose arguments are refused in the refused phase. */
static int sc_refused(uint32_t item)
{
	return item % 5 == 3;
}

static size_t sc_msg_len(uint32_t item)
{
	return 8 + (item * 5u) % (SC_SLOT - 8);
}

#define SC_CTX(phase, i) ((void *)(uintptr_t)(((uint64_t)(phase) << 16) | ((i) + 1u)))

static void sc_fail(struct scope_env *env, const char *what, uint32_t item, int64_t got)
{
	fprintf(stderr, "%s scope %d (%u x %u, subgroup %u): %s: work item %u got %lld\n",
		env->prov, env->scope, env->groups, env->items, env->lanes, what, item,
		(long long)got);
	__atomic_fetch_add(&env->fails, 1, __ATOMIC_RELAXED);
}

/* Work item `item`'s slot of the region `r` holds its pattern in its first
 * `len` bytes and zeros after; the first byte that does not is reported. */
static void sc_slot_holds(struct scope_env *env, const unsigned char *r, uint32_t item,
			  size_t len, const char *what)
{
	for (size_t k = 0; k < SC_SLOT; k++)
		if (r[item * SC_SLOT + k] != (k < len ? sc_pat(item, k) : 0)) {
			sc_fail(env, what, item, (int64_t)k);
			return;
		}
}

/* Every one of `total` work items got one completion of phase `phase`. */
static void sc_once(struct scope_env *env, int phase, uint32_t total, const char *what)
{
	for (uint32_t i = 0; i < total; i++)
		if (env->seen[phase][i] != 1)
			sc_fail(env, what, i, env->seen[phase][i]);
}

/* Reads `quota` completions at the scope; the leader files them by context. */
static void sc_drain(struct scope_env *env, uint32_t item, uint32_t quota)
{
	struct fi_cq_tagged_entry e[8];
	uint32_t got = 0;
	int leader = env->scope == FI_XPU_WORK_ITEM || fi_xpu_arch_scope_rank(env->scope) == 0;

	uint64_t start = fi_xpu_arch_clock_ns();

	while (got < quota) {
		size_t want = quota - got > 8 ? 8 : quota - got;
		int64_t n = fi_xpu_cq_read(env->cq, e, want, env->scope);
		if (n == -FI_EAGAIN) {
			/* Missing completions: report instead of waiting forever
			 * (the group may hang after this; the watchdog ends it). */
			if (fi_xpu_arch_clock_ns() - start > SC_WAIT_MS * 1000000ULL) {
				sc_fail(env, "completions missing after the wait, had", item, got);
				return;
			}
			fi_xpu_arch_pause();
			continue;
		}
		if (n == -FI_EAVAIL) {
			/* Which operation failed, and how: the error entry. */
			struct fi_cq_err_entry ee;
			memset(&ee, 0, sizeof(ee));
			n = fi_xpu_cq_readerr(env->cq, &ee, 0, env->scope);
			if (leader)
				fprintf(stderr, "%s scope %d: error completion: err %d, context 0x%llx, len %zu, olen %zu\n",
					env->prov, env->scope, ee.err,
					(unsigned long long)(uintptr_t)ee.op_context, ee.len,
					ee.olen);
			sc_fail(env, "fi_xpu_cq_read: an error completion", item, n);
			return;
		}
		if (n <= 0 || (size_t)n > want) {
			sc_fail(env, "fi_xpu_cq_read", item, n);
			return;
		}
		if (leader)
			for (int64_t k = 0; k < n; k++) {
				uint64_t c = (uint64_t)(uintptr_t)e[k].op_context;
				uint32_t ph = (uint32_t)(c >> 16), i = (uint32_t)(c & 0xffff);
				if (ph > 5 || i == 0 || i > SC_MAX_ITEMS)
					sc_fail(env, "unknown completion", item, (int64_t)c);
				else
					__atomic_fetch_add(&env->seen[ph][i - 1], 1, __ATOMIC_RELAXED);
			}
		got += (uint32_t)n;
	}
}

static void sc_kernel(void *arg)
{
	struct scope_env *env = (struct scope_env *)arg;
	int scope = env->scope;
	uint32_t item = fi_xpu_arch_scope_rank(FI_XPU_DEVICE);
	uint32_t size = scope == FI_XPU_WORK_ITEM ? 1 : fi_xpu_arch_scope_size(scope);
	uint32_t inst = scope_index(scope);
	unsigned char *h = env->heap;
	int64_t *rc = env->rc[item];
	uint64_t total = (uint64_t)env->groups * env->items;

	if (env->phases & SC_WRITES) {
		rc[0] = fi_xpu_write(env->ep, h + SC_SRC + item * SC_SLOT, sc_len(item), env->desc,
				     0, env->peer, env->rbase + SC_DST + item * SC_SLOT, env->rkey,
				     SC_CTX(1, item), 0, scope);
		/* The wait is served by the leader; every member gets its status. */
		rc[1] = fi_xpu_cntr_wait_status(env->cntr, env->cntr0 + total, SC_WAIT_MS, scope);
		sc_drain(env, item, size);
	}
	if (env->phases & SC_COUNTERS) {
		uint64_t before, after;
		fi_xpu_arch_barrier(FI_XPU_DEVICE);
		before = fi_xpu_cntr_read(env->cntr, scope);
		fi_xpu_arch_barrier(FI_XPU_DEVICE);
		rc[2] = fi_xpu_cntr_add(env->cntr, 1, scope);
		fi_xpu_arch_barrier(FI_XPU_DEVICE);
		after = fi_xpu_cntr_read(env->cntr, scope);
		if (item == 0)
			env->cntr_moved = after - before;
		/* Nothing the next phases post may count before it was read. */
		fi_xpu_arch_barrier(FI_XPU_DEVICE);
		/* Nobody can reach it: every member times out, together. */
		rc[3] = fi_xpu_cntr_wait_status(env->cntr, UINT64_MAX / 2, 20, scope);
	}
	if (env->phases & SC_ATOMICS) {
		rc[4] = fi_xpu_fetch_atomic(env->ep, h + SC_OPD + item * 8, 1, env->desc, h + SC_RES + item * 8,
					    env->desc, env->peer, env->rbase + SC_ACC, env->rkey,
					    FI_UINT64, FI_SUM, SC_CTX(2, item), 0, scope);
		sc_drain(env, item, size);
	}
	if (env->phases & SC_MESSAGES) {
		rc[5] = fi_xpu_trecv(env->ep, h + SC_RCV + item * SC_SLOT, SC_SLOT, env->desc, NULL,
				     SC_TAG + item, 0, SC_CTX(3, item), 0, scope);
		rc[6] = fi_xpu_tsend(env->ep, h + SC_SRC + item * SC_SLOT, sc_msg_len(item),
				     env->desc, 0, env->peer, SC_TAG + item, SC_CTX(4, item), 0,
				     scope);
		sc_drain(env, item, 2 * size);
	}
	if (env->phases & SC_COOP_WRITE) {
		/* Every member passes the group's arguments. */
		rc[7] = fi_xpu_coop_write(env->ep, h + SC_BIG, SC_BIG_LEN, env->desc, 0, env->peer,
					  env->rbase + SC_COOP + (uint64_t)inst * 4096, env->rkey,
					  SC_CTX(5, inst), 0, scope);
		sc_drain(env, item, 1);
	}
	if (env->phases & SC_REFUSED) {
		/* Ranks are positions in the launch here, so the group is the
		 * work items [item - rank, item - rank + size). */
		uint32_t first = item - (scope == FI_XPU_WORK_ITEM ? 0 : fi_xpu_arch_scope_rank(scope));
		uint32_t good = 0;
		for (uint32_t i = first; i < first + size; i++)
			good += !sc_refused(i);
		rc[8] = fi_xpu_write(env->ep,
				     sc_refused(item) ? NULL : h + SC_SRC + item * SC_SLOT, 8,
				     env->desc, 0, env->peer, env->rbase + SC_DST + item * SC_SLOT,
				     env->rkey, SC_CTX(1, item), 0, scope);
		sc_drain(env, item, good);
	}
}

/* Runs the phases at `scope` on `groups` x `items` work items (subgroups of
 * `lanes`) and checks everything that landed. Returns the failures. */
static int sc_run(struct scope_env *env, int scope, uint32_t groups, uint32_t items,
		  uint32_t lanes, int phases)
{
	struct fi_xpu_host_launch_attr attr = { groups, items, lanes, 0 };
	uint32_t total = groups * items, instances = scope_count(scope, groups, items, lanes);
	unsigned char *h = env->heap;
	int64_t want[9] = { 0, 0, 0, -FI_ETIMEDOUT, 0, 0, 0, 0, 0 };
	uint64_t acc;
	int ret;

	env->scope = scope;
	env->phases = phases;
	env->groups = groups;
	env->items = items;
	env->lanes = lanes;
	env->fails = 0;
	memset(env->seen, 0, sizeof(env->seen));
	memset(env->rc, 0, sizeof(env->rc));
	env->cntr_moved = 0;
	memset(h, 0, SC_HEAP);
	for (uint32_t i = 0; i < SC_MAX_ITEMS; i++)
		for (size_t k = 0; k < SC_SLOT; k++)
			h[SC_SRC + i * SC_SLOT + k] = sc_pat(i, k);
	for (size_t k = 0; k < SC_BIG_LEN; k++)
		h[SC_BIG + k] = (unsigned char)(k * 131 + 17);
	for (uint32_t i = 0; i < SC_MAX_ITEMS; i++) {
		uint64_t add = i + 1;
		memcpy(h + SC_OPD + i * 8, &add, 8);
	}
	env->cntr0 = fi_xpu_cntr_read(env->cntr, FI_XPU_WORK_ITEM);

	ret = fi_xpu_host_launch(&attr, sc_kernel, env);
	if (ret) {
		sc_fail(env, "fi_xpu_host_launch", 0, ret);
		return env->fails;
	}
	for (uint32_t i = 0; i < total; i++)
		for (int k = 0; k < 9; k++) {
			static const int phase_of[9] = { SC_WRITES,   SC_WRITES,   SC_COUNTERS,
							 SC_COUNTERS, SC_ATOMICS,  SC_MESSAGES,
							 SC_MESSAGES, SC_COOP_WRITE, SC_REFUSED };
			int64_t w = k == 8 && sc_refused(i) ? -FI_EINVAL : want[k];
			if ((phases & phase_of[k]) && env->rc[i][k] != w)
				sc_fail(env, "return value", i, env->rc[i][k]);
		}
	if (phases & SC_WRITES) {
		/* Every work item's own write landed, and nothing more. */
		for (uint32_t i = 0; i < total; i++)
			sc_slot_holds(env, h + SC_DST, i, sc_len(i), "written byte");
		sc_once(env, 1, total, "write completions");
	}
	if (phases & SC_REFUSED) {
		/* The accepted writes landed, the refused ones left no trace. */
		for (uint32_t i = 0; i < total; i++) {
			sc_slot_holds(env, h + SC_DST, i, sc_refused(i) ? 0 : 8,
				      "refused phase: byte");
			if (env->seen[1][i] != (uint32_t)!sc_refused(i))
				sc_fail(env, "refused phase: completions", i, env->seen[1][i]);
		}
	}
	if ((phases & SC_COUNTERS) && env->cntr_moved != total)
		sc_fail(env, "counter moved by", 0, (int64_t)env->cntr_moved);
	if (phases & SC_ATOMICS) {
		/* Sorted by fetched value, each is the sum of the adds before it. */
		uint64_t res[SC_MAX_ITEMS], sum = 0;
		int used[SC_MAX_ITEMS] = { 0 };
		memcpy(&acc, h + SC_ACC, 8);
		if (acc != (uint64_t)total * (total + 1) / 2)
			sc_fail(env, "accumulated", 0, (int64_t)acc);
		memcpy(res, h + SC_RES, total * 8);
		for (uint32_t n = 0; n < total; n++) {
			uint32_t at = total;
			for (uint32_t i = 0; i < total; i++)
				if (!used[i] && res[i] == sum)
					at = i;
			if (at == total) {
				sc_fail(env, "no fetched value equals the running sum", n,
					(int64_t)sum);
				break;
			}
			used[at] = 1;
			sum += at + 1;
		}
		sc_once(env, 2, total, "atomic completions");
	}
	if (phases & SC_MESSAGES) {
		for (uint32_t i = 0; i < total; i++) {
			sc_slot_holds(env, h + SC_RCV, i, sc_msg_len(i), "received byte");
			if (env->seen[3][i] != 1 || env->seen[4][i] != 1)
				sc_fail(env, "message completions", i,
					env->seen[3][i] * 10 + env->seen[4][i]);
		}
	}
	if (phases & SC_COOP_WRITE) {
		/* One write and one completion per group. */
		for (uint32_t g = 0; g < SC_MAX_ITEMS; g++) {
			int landed = memcmp(h + SC_COOP + g * 4096, h + SC_BIG, SC_BIG_LEN) == 0;
			if (landed != (g < instances) || env->seen[5][g] != (g < instances))
				sc_fail(env, "cooperative write", g, env->seen[5][g]);
		}
	}
	{
		struct fi_cq_tagged_entry e;
		int64_t n = fi_xpu_cq_read(env->cq, &e, 1, FI_XPU_WORK_ITEM);
		if (n != -FI_EAGAIN)
			sc_fail(env, "completion left over", 0, n);
	}
	return env->fails;
}

/* Every phase at every scope, with a trailing partial subgroup (6 work
 * items in subgroups of 4) and with larger groups. */
static int sc_run_all(struct scope_env *env)
{
	static const uint32_t shapes[][3] = { { 2, 6, 4 }, { 3, 20, 8 }, { 1, 1, 1 } };
	int bad = 0;
	alarm(SC_WATCHDOG_S);
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int scope = FI_XPU_WORK_ITEM; scope <= FI_XPU_DEVICE; scope++) {
			bad += sc_run(env, scope, shapes[s][0], shapes[s][1], shapes[s][2], SC_ALL);
			bad += sc_run(env, scope, shapes[s][0], shapes[s][1], shapes[s][2],
				      SC_REFUSED);
		}
	return bad;
}

#endif /* DEVICE_SCOPE_H */
