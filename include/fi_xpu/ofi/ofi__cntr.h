/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu ofi provider, device side: counters.
 * Part of <fi_xpu/device_ofi.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_OFI_OFI_CNTR_H
#define FI_XPU_INCLUDED_OFI_OFI_CNTR_H

#include <fi_xpu/ofi/ofi__post.h>

/* ---- counters ------------------------------------------------------------ */
FI_XPU_FUNC uint64_t *fi_xpu_ofi_cntr_value(const struct fid_xpu_cntr *c)
{
	struct fi_xpu_ofi_cntr *k = c ? FI_XPU_OFI_P(struct fi_xpu_ofi_cntr, c->fid.prov_ctx)
				      : FI_XPU_I_NULL;
	return k && fi_xpu_handle_live(&k->magic, FI_XPU_HANDLE_CNTR) ? &k->value : FI_XPU_I_NULL;
}

/* The abort word of the counter's context (0: none). */
FI_XPU_FUNC uint64_t fi_xpu_ofi_cntr_abort(const struct fid_xpu_cntr *c)
{
	uint64_t *k = fi_xpu_ofi_cntr_value(c);
	return k ? ((const struct fi_xpu_ofi_cntr *)(void *)k)->abort : 0;
}

/* Its words for fi_xpu/device_group.h: one pair, which the proxy and
 * device code update (no second pair). */
FI_XPU_FUNC uint64_t *fi_xpu_ofi_cntr_words(const struct fid_xpu_cntr *c, const uint64_t **remote)
{
	*remote = FI_XPU_I_NULL;
	return fi_xpu_ofi_cntr_value(c);
}

FI_XPU_GROUP_CNTR_ENTRY_POINTS(ofi, fi_xpu_ofi_cntr_words, fi_xpu_ofi_cntr_abort, FI_XPU_OFI_SYS)

#endif /* FI_XPU_INCLUDED_OFI_OFI_CNTR_H */
