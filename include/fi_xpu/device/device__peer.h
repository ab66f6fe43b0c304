/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device API: what orders and completes an endpoint's operations:
 * flush, put with signal, fence, quiet, the abort check of device waits,
 * direct pointers to peer memory (extensions but flush).
 * Part of <fi_xpu/device.h>, which states the contract and the dispatch;
 * included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_H
#include <fi_xpu/device.h>
#endif
#ifndef FI_XPU_INCLUDED_DEVICE_DEVICE_PEER_H
#define FI_XPU_INCLUDED_DEVICE_DEVICE_PEER_H

FI_XPU_FUNC int
fi_xpu_flush(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_GROUP(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_FLUSH_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_flush_##p(ep, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

/* ---- ordered signalling, fence, quiet, direct pointers (extensions) ---- */

/* A case for each provider that implements them: it defines
 * FI_XPU_DEVICE_SIGNAL_<name> as "~, 1" (see "Adding a provider"). */
#define FI_XPU_I_DEVICE_SIGNAL_CASE(p)                                         \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_SIGNAL_##p))(    \
		case FI_XPU_DEVICE_ID_##p: return FI_XPU_I_DEVICE_CALL(p);)
#define FI_XPU_I_DEVICE_SIGNAL_DISPATCH(h)                                     \
	if (!(h) || (h)->fid.fclass != (uint32_t)FI_CLASS_EP ||               \
	    (unsigned)scope > (unsigned)FI_XPU_DEVICE)                        \
		return -FI_EINVAL;                                            \
	switch ((h)->fid.prov_id) {                                           \
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_SIGNAL_CASE)                   \
	default:                                                              \
		return -FI_ENOSYS;                                            \
	}

FI_XPU_FUNC int
fi_xpu_put_signal(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, void *dest_addr, uint64_t addr, uint64_t key, uint64_t sig_addr, uint64_t sig_key, uint64_t signal, int sig_op, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_put_signal(flags, sig_addr, sig_op));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_put_signal_##p(ep, buf, len, desc, dest_addr, addr, key, sig_addr, sig_key, signal, sig_op, context, flags, scope)
	FI_XPU_I_DEVICE_SIGNAL_DISPATCH(ep);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_fence(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_GROUP(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_FENCE_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_fence_##p(ep, flags, scope)
	FI_XPU_I_DEVICE_SIGNAL_DISPATCH(ep);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_quiet(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_GROUP(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_QUIET_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_quiet_##p(ep, flags, scope)
	FI_XPU_I_DEVICE_SIGNAL_DISPATCH(ep);
#undef FI_XPU_I_DEVICE_CALL
}

/* The abort word of `ep`'s context (fi_xpu_ctx_abort(3)), 0 when none or
 * the provider keeps none. */
FI_XPU_FUNC uint64_t fi_xpu_i_ep_abort_word(const struct fid_xpu_ep *ep)
{
	if (!ep)
		return 0;
	switch (ep->fid.prov_id) {
#if 0 FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_HAS_SHM)
	case FI_XPU_DEVICE_ID_shm:
		return fi_xpu_shm_abort_word(ep);
#endif
#if 0 FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_HAS_OFI)
	case FI_XPU_DEVICE_ID_ofi:
		return fi_xpu_ofi_abort_word(ep);
#endif
	default:
		return 0;
	}
}

/* The abort check of every device wait: 0 to go on waiting, -FI_ECANCELED
 * once the host raised the abort word of `ep`'s context. */
FI_XPU_FUNC int fi_xpu_wait_aborted(const struct fid_xpu_ep *ep)
{
	return fi_xpu_i_aborted(fi_xpu_i_ep_abort_word(ep)) ? FI_XPU_ABORT_ERR : 0;
}

/* Reads local memory only, so it is the same for every provider; `ep`
 * names the abort word that ends the wait. */
FI_XPU_FUNC int
fi_xpu_signal_wait_until(struct fid_xpu_ep *ep, const uint64_t *sig, int cmp, uint64_t value, int timeout_ms, int scope)
{
	int rc;
	if (!ep || ep->fid.fclass != (uint32_t)FI_CLASS_EP || (unsigned)scope > (unsigned)FI_XPU_DEVICE)
		return -FI_EINVAL;
	rc = fi_xpu_device_check_wait(sig, cmp);
	if (rc)
		return rc;
	return fi_xpu_signal_wait(fi_xpu_i_ep_abort_word(ep), sig, cmp, value, timeout_ms, scope);
}

FI_XPU_FUNC void *
fi_xpu_peer_ptr(struct fid_xpu_ep *ep, void *dest_addr, uint64_t addr, uint64_t key, size_t len)
{
#define FI_XPU_I_DEVICE_PTR_CASE(p)                                            \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_SIGNAL_##p))(    \
		case FI_XPU_DEVICE_ID_##p: return fi_xpu_peer_ptr_##p(ep, dest_addr, addr, key, len);)
	if (!ep || ep->fid.fclass != (uint32_t)FI_CLASS_EP)
		return FI_XPU_I_NULL;
	switch (ep->fid.prov_id) {
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_PTR_CASE)
	default:
		return FI_XPU_I_NULL;
	}
#undef FI_XPU_I_DEVICE_PTR_CASE
}

#endif /* FI_XPU_INCLUDED_DEVICE_DEVICE_PEER_H */
