/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu ofi provider, device side: sends and receives, tagged or not.
 * Part of <fi_xpu/device_ofi.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_OFI_OFI_MSG_H
#define FI_XPU_INCLUDED_OFI_OFI_MSG_H

#include <fi_xpu/ofi/ofi__post.h>

FI_XPU_FUNC int fi_xpu_ofi_msg(struct fid_xpu_ep *ep, uint32_t op, const void *buf, size_t len,
			       void *desc, uint64_t data, uint64_t addr, uint64_t tag,
			       uint64_t ignore, void *context, uint64_t flags, int own,
			       int scope, const char *call)
{
	struct fi_xpu_ofi_wqe w = fi_xpu_ofi_wqe_zero();
	if (!ep)
		return -FI_EINVAL;
	if (!own && !buf && len)
		own = -FI_EINVAL;
	w.op = op;
	w.flags = flags;
	w.addr = addr;
	w.buf = (uint64_t)(uintptr_t)buf;
	w.len = len;
	w.desc = fi_xpu_ofi_desc_id(desc);
	w.context = (uint64_t)(uintptr_t)context;
	w.data = data;
	w.tag = tag;
	w.ignore = ignore;
	return fi_xpu_ofi_submit(ep, &w, own, scope, call);
}

FI_XPU_FUNC int fi_xpu_send_ofi(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				uint64_t data, void *dest_addr, void *context, uint64_t flags,
				int scope)
{
	return fi_xpu_ofi_msg(ep, FI_XPU_OFI_OP_SEND, buf, len, desc, data,
			      fi_xpu_ofi_addr(dest_addr), 0, 0, context, flags,
			      fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS)
				      ? -FI_EBADFLAGS
				      : (dest_addr ? 0 : -FI_EINVAL),
			      scope, "fi_xpu_send");
}

FI_XPU_FUNC int fi_xpu_tsend_ofi(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, void *dest_addr, uint64_t tag, void *context,
				 uint64_t flags, int scope)
{
	return fi_xpu_ofi_msg(ep, FI_XPU_OFI_OP_TSEND, buf, len, desc, data,
			      fi_xpu_ofi_addr(dest_addr), tag, 0, context, flags,
			      fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS)
				      ? -FI_EBADFLAGS
				      : (dest_addr ? 0 : -FI_EINVAL),
			      scope, "fi_xpu_tsend");
}

FI_XPU_FUNC int fi_xpu_recv_ofi(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				void *src_addr, void *context, uint64_t flags, int scope)
{
	return fi_xpu_ofi_msg(ep, FI_XPU_OFI_OP_RECV, buf, len, desc, 0,
			      fi_xpu_ofi_addr(src_addr), 0, 0, context,
			      flags & ~(FI_REMOTE_CQ_DATA | FI_INJECT),
			      fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS), scope,
			      "fi_xpu_recv");
}

FI_XPU_FUNC int fi_xpu_trecv_ofi(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				 void *src_addr, uint64_t tag, uint64_t ignore, void *context,
				 uint64_t flags, int scope)
{
	return fi_xpu_ofi_msg(ep, FI_XPU_OFI_OP_TRECV, buf, len, desc, 0,
			      fi_xpu_ofi_addr(src_addr), tag, ignore, context,
			      flags & ~(FI_REMOTE_CQ_DATA | FI_INJECT),
			      fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS), scope,
			      "fi_xpu_trecv");
}

#endif /* FI_XPU_INCLUDED_OFI_OFI_MSG_H */
