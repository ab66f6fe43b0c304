/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device API: atomics, fetching and compare atomics, dispatched to
 * the provider.
 * Part of <fi_xpu/device.h>, which states the contract and the dispatch;
 * included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_H
#include <fi_xpu/device.h>
#endif
#ifndef FI_XPU_INCLUDED_DEVICE_DEVICE_ATOMIC_H
#define FI_XPU_INCLUDED_DEVICE_DEVICE_ATOMIC_H

FI_XPU_FUNC int
fi_xpu_atomic(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP,
				   fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_ATOMIC_FLAGS, count,
							      addr, (int)datatype, 0));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_atomic_##p(ep, buf, count, desc, dest_addr, addr, key, datatype, op, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_fetch_atomic(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP,
				   fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count,
							      addr, (int)datatype, !result));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_fetch_atomic_##p(ep, buf, count, desc, result, result_desc, dest_addr, addr, key, datatype, op, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_compare_atomic(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, const void *compare, void *compare_desc, void *result, void *result_desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP,
				   fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count,
							      addr, (int)datatype,
							      !result || !compare));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_compare_atomic_##p(ep, buf, count, desc, compare, compare_desc, result, result_desc, dest_addr, addr, key, datatype, op, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

#endif /* FI_XPU_INCLUDED_DEVICE_DEVICE_ATOMIC_H */
