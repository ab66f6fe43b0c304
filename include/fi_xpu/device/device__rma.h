/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device API: RMA writes and reads, dispatched to the provider.
 * Part of <fi_xpu/device.h>, which states the contract and the dispatch;
 * included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_H
#include <fi_xpu/device.h>
#endif
#ifndef FI_XPU_INCLUDED_DEVICE_DEVICE_RMA_H
#define FI_XPU_INCLUDED_DEVICE_DEVICE_RMA_H

FI_XPU_FUNC int
fi_xpu_write(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_WRITE_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_write_##p(ep, buf, len, desc, data, dest_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_read(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_READ_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_read_##p(ep, buf, len, desc, src_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

#endif /* FI_XPU_INCLUDED_DEVICE_DEVICE_RMA_H */
