/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * scope_index(scope): which group of the launch the calling work item
 * belongs to at `scope`, as an index (its own rank for FI_XPU_WORK_ITEM,
 * its subgroup or work group counted over the launch, 0 for the device):
 * where the scope tests keep one result per group.
 */
#ifndef FI_XPU_TEST_SCOPE_INDEX_H
#define FI_XPU_TEST_SCOPE_INDEX_H

#include <fi_xpu/device_arch.h>

#include <stdint.h>

/* Retries a group call while its ring is full: every member gets the same
 * -FI_EAGAIN, so every member retries. */
#define RETRY(dst, call)                                                                \
	do {                                                                            \
		while (((dst) = (call)) == -FI_EAGAIN)                                  \
			fi_xpu_arch_pause();                                            \
	} while (0)

static inline uint32_t scope_index(int scope)
{
	uint32_t per_group = (fi_xpu_arch_group_size() + fi_xpu_arch_subgroup_size() - 1) /
			     fi_xpu_arch_subgroup_size();
	switch (scope) {
	case FI_XPU_WORK_ITEM:
		return fi_xpu_arch_scope_rank(FI_XPU_DEVICE);
	case FI_XPU_SUBGROUP:
		return fi_xpu_arch_group_id() * per_group + fi_xpu_arch_subgroup_id();
	case FI_XPU_WORK_GROUP:
		return fi_xpu_arch_group_id();
	default:
		return 0;
	}
}

/* How many groups a launch of `groups` work groups of `items` work items
 * (subgroups of `lanes`) has at `scope`. */
static inline uint32_t scope_count(int scope, uint32_t groups, uint32_t items, uint32_t lanes)
{
	switch (scope) {
	case FI_XPU_WORK_ITEM:
		return groups * items;
	case FI_XPU_SUBGROUP:
		return groups * ((items + lanes - 1) / lanes);
	case FI_XPU_WORK_GROUP:
		return groups;
	default:
		return 1;
	}
}

#endif
