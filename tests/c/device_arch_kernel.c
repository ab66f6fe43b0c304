/* Compiled (not run) by the device matrix: one kernel that uses every arch
 * primitive at device and at system scope, so the test can check in the
 * generated code that each scope maps to the target's own scoped
 * instructions. */
#include <fi_xpu/device_coop.h>

#if defined(__CUDACC__) || defined(__CUDA__) || defined(__HIP__)
#define KERNEL extern "C" __attribute__((global))
#elif defined(__cplusplus)
#define KERNEL extern "C"
#else
#define KERNEL
#endif

struct probe {
	uint64_t sys64[8];
	uint64_t dev64[8];
	uint32_t sys32[4];
	uint32_t dev32[4];
	uint64_t out[8];
	unsigned char buf[256];
};

KERNEL void arch_probe(struct probe *p)
{
	uint64_t v = fi_xpu_arch_fetch_add_u64(&p->sys64[0], 1, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_SYSTEM);
	v += fi_xpu_arch_cas_u64(&p->sys64[1], v, v + 1, FI_XPU_ARCH_ACQ_REL, FI_XPU_ARCH_MS_SYSTEM);
	v += fi_xpu_arch_load_u64(&p->sys64[2], FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_MS_SYSTEM);
	fi_xpu_arch_store_u64(&p->sys64[3], v, FI_XPU_ARCH_RELEASE, FI_XPU_ARCH_MS_SYSTEM);
	fi_xpu_arch_fence(FI_XPU_ARCH_SEQ_CST, FI_XPU_ARCH_MS_SYSTEM);
	v += fi_xpu_arch_exchange_u32(&p->sys32[0], 3, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_SYSTEM);

	v += fi_xpu_arch_fetch_add_u64(&p->dev64[0], 1, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_DEVICE);
	v += fi_xpu_arch_fetch_or_u64(&p->dev64[1], 1, FI_XPU_ARCH_RELEASE, FI_XPU_ARCH_MS_DEVICE);
	v += fi_xpu_arch_fetch_and_u32(&p->dev32[0], 1, FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_MS_DEVICE);
	v += fi_xpu_arch_load_u32(&p->dev32[1], FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_MS_DEVICE);
	fi_xpu_arch_store_u32(&p->dev32[2], (uint32_t)v, FI_XPU_ARCH_RELEASE, FI_XPU_ARCH_MS_DEVICE);
	fi_xpu_arch_fence(FI_XPU_ARCH_ACQ_REL, FI_XPU_ARCH_MS_DEVICE);

	fi_xpu_coop_reserve(&p->sys64[4], 4, FI_XPU_WORK_GROUP, FI_XPU_ARCH_MS_SYSTEM, &p->out[0]);
	fi_xpu_coop_reserve(&p->dev64[2], 2, FI_XPU_SUBGROUP, FI_XPU_ARCH_MS_DEVICE, &p->out[2]);
	fi_xpu_coop_copy(p->buf + 128, p->buf, 128, FI_XPU_SUBGROUP, FI_XPU_ARCH_MS_SYSTEM);
	p->out[1] = v + fi_xpu_arch_lane_id() + fi_xpu_arch_subgroup_size() +
		    fi_xpu_arch_scope_size(FI_XPU_DEVICE) + fi_xpu_arch_clock_ns();
}
