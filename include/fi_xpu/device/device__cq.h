/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device API: completion queue reads and waits, dispatched to the
 * provider.
 * Part of <fi_xpu/device.h>, which states the contract and the dispatch;
 * included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_H
#include <fi_xpu/device.h>
#endif
#ifndef FI_XPU_INCLUDED_DEVICE_DEVICE_CQ_H
#define FI_XPU_INCLUDED_DEVICE_DEVICE_CQ_H

FI_XPU_FUNC int64_t
fi_xpu_cq_read(struct fid_xpu_cq *cq, void *buf, size_t count, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_read_##p(cq, buf, count, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int64_t
fi_xpu_cq_readfrom(struct fid_xpu_cq *cq, void *buf, size_t count, void *src_addr, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_readfrom_##p(cq, buf, count, src_addr, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int64_t
fi_xpu_cq_readerr(struct fid_xpu_cq *cq, void *buf, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_GROUP(cq, FI_CLASS_CQ, fi_xpu_device_check_flags(flags, 0));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_readerr_##p(cq, buf, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int64_t
fi_xpu_cq_sread(struct fid_xpu_cq *cq, void *buf, size_t count, uint64_t threshold, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_sread_##p(cq, buf, count, threshold, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int64_t
fi_xpu_cq_sreadfrom(struct fid_xpu_cq *cq, void *buf, size_t count, void *src_addr, uint64_t threshold, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_sreadfrom_##p(cq, buf, count, src_addr, threshold, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

#endif /* FI_XPU_INCLUDED_DEVICE_DEVICE_CQ_H */
