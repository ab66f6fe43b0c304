/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu ofi provider, device side: RMA writes and reads.
 * Part of <fi_xpu/device_ofi.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_OFI_OFI_RMA_H
#define FI_XPU_INCLUDED_OFI_OFI_RMA_H

#include <fi_xpu/ofi/ofi__post.h>

FI_XPU_FUNC int fi_xpu_write_ofi(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, void *dest_addr, uint64_t addr, uint64_t key,
				 void *context, uint64_t flags, int scope)
{
	struct fi_xpu_ofi_wqe w;
	int own = fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_WRITE_FLAGS);
	if (!own && ((!buf && len) || !dest_addr))
		own = -FI_EINVAL;
	if (!ep)
		return -FI_EINVAL;
	w = fi_xpu_ofi_wqe_rma(FI_XPU_OFI_OP_WRITE, flags, dest_addr, buf, len, desc, addr, key,
			       context);
	w.data = data;
	return fi_xpu_ofi_submit(ep, &w, own, scope, "fi_xpu_write");
}

FI_XPU_FUNC int fi_xpu_read_ofi(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				void *src_addr, uint64_t addr, uint64_t key, void *context,
				uint64_t flags, int scope)
{
	struct fi_xpu_ofi_wqe w;
	int own = fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_READ_FLAGS);
	if (!own && ((!buf && len) || !src_addr))
		own = -FI_EINVAL;
	if (!ep)
		return -FI_EINVAL;
	w = fi_xpu_ofi_wqe_rma(FI_XPU_OFI_OP_READ, flags & ~(FI_REMOTE_CQ_DATA | FI_INJECT), src_addr,
			       buf, len, desc, addr, key, context);
	return fi_xpu_ofi_submit(ep, &w, own, scope, "fi_xpu_read");
}

#endif /* FI_XPU_INCLUDED_OFI_OFI_RMA_H */
