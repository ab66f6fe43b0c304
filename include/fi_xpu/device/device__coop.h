/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device API: cooperative single transfers (extensions): one
 * transfer split across the lanes of a group.
 * Part of <fi_xpu/device.h>, which states the contract and the dispatch;
 * included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_H
#include <fi_xpu/device.h>
#endif
#ifndef FI_XPU_INCLUDED_DEVICE_DEVICE_COOP_H
#define FI_XPU_INCLUDED_DEVICE_DEVICE_COOP_H

/* ---- cooperative single transfers (extensions) ------------------------- */

/* Expands to its arguments when `c` is 1, to nothing when it is 0. */
#define FI_XPU_I_DEVICE_WHEN(c) FI_XPU_I_DEVICE_WHEN_(c)
#define FI_XPU_I_DEVICE_WHEN_(c) FI_XPU_I_DEVICE_WHEN_##c
#define FI_XPU_I_DEVICE_WHEN_0(...)
#define FI_XPU_I_DEVICE_WHEN_1(...) __VA_ARGS__
/* A case for each provider that implements the cooperative form itself. */
#define FI_XPU_I_DEVICE_COOP_CASE(p)                                           \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_COOP_##p))(      \
		case FI_XPU_DEVICE_ID_##p: return FI_XPU_I_DEVICE_CALL(p);)
/* The others: the leader issues the one operation, the group shares its
 * status. */
#define FI_XPU_I_DEVICE_COOP(h, name, item_call)                               \
	struct fi_xpu_group g;                                                \
	int rc;                                                               \
	if (!(h) || (unsigned)scope > (unsigned)FI_XPU_DEVICE)                \
		return -FI_EINVAL;                                            \
	switch ((h)->fid.prov_id) {                                           \
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_COOP_CASE)                     \
	default:                                                              \
		break;                                                        \
	}                                                                     \
	rc = fi_xpu_group_enter(&g, scope, name);                             \
	if (rc)                                                               \
		return rc;                                                    \
	if (fi_xpu_group_leader(&g))                                          \
		rc = item_call;                                               \
	return (int)fi_xpu_group_share(&g, rc)

FI_XPU_FUNC int
fi_xpu_coop_write(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_write_##p(ep, buf, len, desc, data, dest_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_write",
			    fi_xpu_write(ep, buf, len, desc, data, dest_addr, addr, key, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_coop_read(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_read_##p(ep, buf, len, desc, src_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_read",
			    fi_xpu_read(ep, buf, len, desc, src_addr, addr, key, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_coop_send(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_send_##p(ep, buf, len, desc, data, dest_addr, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_send",
			    fi_xpu_send(ep, buf, len, desc, data, dest_addr, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_coop_tsend(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t tag, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_tsend_##p(ep, buf, len, desc, data, dest_addr, tag, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_tsend",
			    fi_xpu_tsend(ep, buf, len, desc, data, dest_addr, tag, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

#endif /* FI_XPU_INCLUDED_DEVICE_DEVICE_COOP_H */
