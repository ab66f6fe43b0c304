/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu ofi provider, device side: atomics, fetching and compare atomics.
 * Part of <fi_xpu/device_ofi.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_OFI_OFI_ATOMIC_H
#define FI_XPU_INCLUDED_OFI_OFI_ATOMIC_H

#include <fi_xpu/ofi/ofi__post.h>

FI_XPU_FUNC int fi_xpu_ofi_atomic_any(struct fid_xpu_ep *ep, uint32_t kind, const void *buf,
				      size_t count, void *desc, const void *compare,
				      void *result, void *result_desc, void *dest_addr,
				      uint64_t addr, uint64_t key, int datatype, int op,
				      void *context, uint64_t flags, int own, int scope,
				      const char *call)
{
	struct fi_xpu_ofi_wqe w;
	if (!ep)
		return -FI_EINVAL;
	if (!own && (!dest_addr || (!buf && op != FI_ATOMIC_READ) || datatype < 0 || op < 0))
		own = -FI_EINVAL;
	w = fi_xpu_ofi_wqe_rma(kind, flags & ~FI_REMOTE_CQ_DATA, dest_addr, buf, count, desc, addr, key,
			       context);
	w.atomic = (uint32_t)datatype | (uint32_t)op << 16;
	w.compare = (uint64_t)(uintptr_t)compare;
	w.result = (uint64_t)(uintptr_t)result;
	w.result_desc = fi_xpu_ofi_desc_id(result_desc);
	return fi_xpu_ofi_submit(ep, &w, own, scope, call);
}

FI_XPU_FUNC int fi_xpu_atomic_ofi(struct fid_xpu_ep *ep, const void *buf, size_t count,
				  void *desc, void *dest_addr, uint64_t addr, uint64_t key,
				  int datatype, int op, void *context,
				  uint64_t flags, int scope)
{
	int own = fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_ATOMIC_FLAGS, count, addr,
					     (int)datatype, 0);
	if (!own && (op == FI_ATOMIC_READ || (op >= FI_CSWAP && op <= FI_MSWAP)))
		own = -FI_EINVAL;
	return fi_xpu_ofi_atomic_any(ep, FI_XPU_OFI_OP_ATOMIC, buf, count, desc, FI_XPU_I_NULL,
				     FI_XPU_I_NULL, FI_XPU_I_NULL, dest_addr, addr, key, (int)datatype,
				     (int)op, context, flags, own, scope, "fi_xpu_atomic");
}

FI_XPU_FUNC int fi_xpu_fetch_atomic_ofi(struct fid_xpu_ep *ep, const void *buf, size_t count,
					void *desc, void *result, void *result_desc,
					void *dest_addr, uint64_t addr, uint64_t key,
					int datatype, int op, void *context,
					uint64_t flags, int scope)
{
	int own = fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count, addr,
					     (int)datatype, !result);
	if (!own && op >= FI_CSWAP && op <= FI_MSWAP)
		own = -FI_EINVAL;
	return fi_xpu_ofi_atomic_any(ep, FI_XPU_OFI_OP_FETCH_ATOMIC, buf, count, desc,
				     FI_XPU_I_NULL, result, result_desc, dest_addr, addr, key,
				     (int)datatype, (int)op, context, flags, own, scope,
				     "fi_xpu_fetch_atomic");
}

FI_XPU_FUNC int fi_xpu_compare_atomic_ofi(struct fid_xpu_ep *ep, const void *buf, size_t count,
					  void *desc, const void *compare, void *compare_desc,
					  void *result, void *result_desc, void *dest_addr,
					  uint64_t addr, uint64_t key, int datatype,
					  int op, void *context, uint64_t flags, int scope)
{
	int own = fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count, addr,
					     (int)datatype, !result || !compare);
	if (!own && (op < FI_CSWAP || op > FI_MSWAP))
		own = -FI_EINVAL;
	(void)compare_desc;
	return fi_xpu_ofi_atomic_any(ep, FI_XPU_OFI_OP_COMPARE_ATOMIC, buf, count, desc, compare,
				     result, result_desc, dest_addr, addr, key, (int)datatype,
				     (int)op, context, flags, own, scope, "fi_xpu_compare_atomic");
}

#endif /* FI_XPU_INCLUDED_OFI_OFI_ATOMIC_H */
