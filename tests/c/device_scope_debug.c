/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* The checking mode (built with -DFI_XPU_DEVICE_DEBUG
 * -DFI_XPU_DEVICE_DEBUG_TIMEOUT_MS=1000): a group member that never reaches
 * a group call is reported, and the members that did reach it return
 * -FI_ETIMEDOUT instead of waiting for ever; complete groups are not
 * disturbed. One process, the shm endpoint writing to itself. Prints
 * "device_scope_debug: ok"; the reports go to stderr. */
#include "shm_common.h"

#ifndef FI_XPU_DEVICE_DEBUG
#error "build with -DFI_XPU_DEVICE_DEBUG"
#endif

static struct world w;
static int64_t rc[2][8][2];
static uint64_t src = 0xdeb6;

/* Work item 1 of group 1 skips both calls: its work group is one short at
 * the write, its subgroup (work items 0 and 1) at the counter wait, while
 * the other subgroup of group 1 and all of group 0 are complete. */
static void kernel(void *arg)
{
	uint32_t g = fi_xpu_arch_group_id(), i = fi_xpu_arch_local_id();
	(void)arg;
	rc[g][i][0] = rc[g][i][1] = 1;
	if (g == 1 && i == 1)
		return;
	rc[g][i][0] = fi_xpu_write(&w.ep, &src, 8, NULL, 0, &w.raw[0],
				   w.cards[0].base + 64 * (g * 8 + i), w.cards[0].key, NULL, 0,
				   FI_XPU_WORK_GROUP);
	rc[g][i][1] = fi_xpu_cntr_wait_status(&w.wcntr, 0, 1000, FI_XPU_SUBGROUP);
}

int main(void)
{
	struct fi_xpu_host_launch_attr la = { .num_groups = 2, .group_size = 4,
					      .subgroup_size = 2, .flags = 0 };
	uint64_t v;

	alarm(60);
	spawn(&w, 1);
	open_world(&w, FI_CQ_FORMAT_TAGGED);
	EXPECT(fi_xpu_host_launch(&la, kernel, NULL), 0);
	for (int i = 0; i < 4; i++) {
		/* Complete groups: the write happened, the wait succeeded. */
		EXPECT(rc[0][i][0], 0);
		EXPECT(rc[0][i][1], 0);
		memcpy(&v, w.heap + 64 * i, 8);
		EXPECT(v, src);
		/* The short group: every member that came was told, nothing was
		 * written; the complete subgroup 1 of group 1 waited normally. */
		EXPECT(rc[1][i][0], i == 1 ? 1 : -FI_ETIMEDOUT);
		memcpy(&v, w.heap + 64 * (8 + i), 8);
		EXPECT(v, 0);
		EXPECT(rc[1][i][1], i == 1 ? 1 : i == 0 ? -FI_ETIMEDOUT : 0);
	}
	close_world(&w);
	return finish(&w, "device_scope_debug");
}
