/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Half of each subgroup calls a subgroup-scope group function inside a
 * branch: the group is the lanes converged at the call. Compiled as CUDA
 * and HIP device code by tests/device_converged.rs, which looks for the
 * active-mask instructions in the output. */
#include <fi_xpu/device_group.h>

struct conv_out {
	uint32_t rank[64], size[64];
	uint64_t b[64];
	int rc[64];
};

__attribute__((global)) void conv(struct conv_out *o)
{
	uint32_t t = fi_xpu_arch_local_id();
	if (t % fi_xpu_arch_subgroup_size() < 16) {
		struct fi_xpu_group g;
		o->rc[t] = fi_xpu_group_enter(&g, FI_XPU_SUBGROUP, "conv");
		o->rank[t] = g.rank;
		o->size[t] = g.size;
		o->b[t] = fi_xpu_group_bcast(&g, 1000 + t);
		fi_xpu_group_sync(&g);
	}
}
