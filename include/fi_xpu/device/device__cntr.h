/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device API: counter reads, waits and updates, dispatched to the
 * provider.
 * Part of <fi_xpu/device.h>, which states the contract and the dispatch;
 * included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_H
#include <fi_xpu/device.h>
#endif
#ifndef FI_XPU_INCLUDED_DEVICE_DEVICE_CNTR_H
#define FI_XPU_INCLUDED_DEVICE_DEVICE_CNTR_H

FI_XPU_FUNC uint64_t
fi_xpu_cntr_read(struct fid_xpu_cntr *cntr, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_read_##p(cntr, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, (uint64_t)-FI_EINVAL, (uint64_t)-FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC uint64_t
fi_xpu_cntr_readerr(struct fid_xpu_cntr *cntr, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_readerr_##p(cntr, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, (uint64_t)-FI_EINVAL, (uint64_t)-FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

/* Extension: the counter wait that says how it ended (0, -FI_ETIMEDOUT,
 * -FI_EAVAIL, ...); fi_xpu_cntr_wait is the same wait with upstream's void
 * prototype. */
FI_XPU_FUNC int
fi_xpu_cntr_wait_status(struct fid_xpu_cntr *cntr, uint64_t threshold, int timeout_ms, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_wait_##p(cntr, threshold, timeout_ms, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC void
fi_xpu_cntr_wait(struct fid_xpu_cntr *cntr, uint64_t threshold, int timeout, int scope)
{
	(void)fi_xpu_cntr_wait_status(cntr, threshold, timeout, scope);
}

FI_XPU_FUNC int
fi_xpu_cntr_add(struct fid_xpu_cntr *cntr, uint64_t value, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_add_##p(cntr, value, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_cntr_set(struct fid_xpu_cntr *cntr, uint64_t value, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_set_##p(cntr, value, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_cntr_adderr(struct fid_xpu_cntr *cntr, uint64_t value, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_adderr_##p(cntr, value, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_cntr_seterr(struct fid_xpu_cntr *cntr, uint64_t value, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_seterr_##p(cntr, value, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

#endif /* FI_XPU_INCLUDED_DEVICE_DEVICE_CNTR_H */
