/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: counters.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_CNTR_H
#define FI_XPU_INCLUDED_SHM_SHM_CNTR_H

#include <fi_xpu/shm/shm__entry.h>

FI_XPU_FUNC const struct fi_xpu_shm_cntr_dev *fi_xpu_shm_cntr_of(const struct fid_xpu_cntr *c)
{
	const struct fi_xpu_shm_cntr_dev *k =
		c ? FI_XPU_SHM_P(const struct fi_xpu_shm_cntr_dev, c->fid.prov_ctx)
		  : FI_XPU_I_NULL;
	return k && fi_xpu_handle_live(&k->magic, FI_XPU_HANDLE_CNTR)
		       ? k
		       : FI_XPU_I_NULL;
}

FI_XPU_FUNC uint64_t *fi_xpu_shm_cntr_words(const struct fid_xpu_cntr *c, const uint64_t **remote)
{
	const struct fi_xpu_shm_cntr_dev *k = fi_xpu_shm_cntr_of(c);
	*remote = k ? FI_XPU_SHM_P(const uint64_t, fi_xpu_shm_ld(&k->rcntr)) : FI_XPU_I_NULL;
	return k ? FI_XPU_SHM_P(uint64_t, k->cntr) : FI_XPU_I_NULL;
}

/* The abort word of the counter's context (0: none). */
FI_XPU_FUNC uint64_t fi_xpu_shm_cntr_abort(const struct fid_xpu_cntr *c)
{
	const struct fi_xpu_shm_cntr_dev *k = fi_xpu_shm_cntr_of(c);
	return k ? k->abort : 0;
}

FI_XPU_GROUP_CNTR_ENTRY_POINTS(shm, fi_xpu_shm_cntr_words, fi_xpu_shm_cntr_abort, FI_XPU_SHM_SYS)

#endif /* FI_XPU_INCLUDED_SHM_SHM_CNTR_H */
