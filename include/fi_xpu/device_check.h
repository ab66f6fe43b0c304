/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Argument checks that every provider's device code applies alike, so the
 * same bad input gets the same code whichever provider exported the
 * handle. fi_xpu/device.h applies them before the dispatch for a single work
 * item; providers apply them to each member of a group call, where a member
 * whose arguments are refused still takes part in the group (see
 * fi_xpu/device_group.h) and gets its own code back.
 *
 * Flag bits an operation does not take give -FI_EBADFLAGS; the sets:
 */
#ifndef FI_XPU_INCLUDED_DEVICE_CHECK_H
#define FI_XPU_INCLUDED_DEVICE_CHECK_H

#include <fi_xpu/device_arch.h>
#include <fi_xpu/device_signal.h>

/* FI_MORE (more operations follow: a provider may defer ringing its
 * doorbell until an operation without it, or fi_xpu_flush_wr) is taken by
 * every data operation. */
#define FI_XPU_DEVICE_WRITE_FLAGS                                             \
	(FI_COMPLETION | FI_INJECT | FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA | FI_MORE)
#define FI_XPU_DEVICE_READ_FLAGS (FI_COMPLETION | FI_DELIVERY_COMPLETE | FI_MORE)
#define FI_XPU_DEVICE_SEND_FLAGS FI_XPU_DEVICE_WRITE_FLAGS
#define FI_XPU_DEVICE_RECV_FLAGS (FI_COMPLETION | FI_MORE)
#define FI_XPU_DEVICE_ATOMIC_FLAGS (FI_COMPLETION | FI_INJECT | FI_DELIVERY_COMPLETE | FI_MORE)
#define FI_XPU_DEVICE_FETCH_FLAGS (FI_COMPLETION | FI_INJECT | FI_DELIVERY_COMPLETE | FI_MORE)
#define FI_XPU_DEVICE_FLUSH_FLAGS 0ULL
#define FI_XPU_DEVICE_PUT_SIGNAL_FLAGS (FI_COMPLETION | FI_DELIVERY_COMPLETE)
#define FI_XPU_DEVICE_FENCE_FLAGS 0ULL
#define FI_XPU_DEVICE_QUIET_FLAGS 0ULL

/* -FI_EBADFLAGS when `flags` has a bit outside `allowed`, else 0. */
FI_XPU_FUNC int fi_xpu_device_check_flags(uint64_t flags, uint64_t allowed)
{
	return (flags & ~allowed) ? -FI_EBADFLAGS : 0;
}

/* Size of one element of `datatype`, 0 for a type atomics do not take. */
FI_XPU_FUNC size_t fi_xpu_device_dt_size(int datatype)
{
	switch (datatype) {
	case FI_INT8: case FI_UINT8: return 1;
	case FI_INT16: case FI_UINT16: return 2;
	case FI_INT32: case FI_UINT32: case FI_FLOAT: return 4;
	case FI_INT64: case FI_UINT64: case FI_DOUBLE: return 8;
	default: return 0;
	}
}

/* An atomic's flags against `allowed` (-FI_EBADFLAGS), then -FI_EINVAL for
 * no element, a target not aligned to the element size, or `missing` (a
 * NULL result or compare buffer the operation needs). An unknown datatype
 * is the provider's to refuse. */
FI_XPU_FUNC int fi_xpu_device_check_atomic(uint64_t flags, uint64_t allowed, size_t count,
					   uint64_t addr, int datatype, int missing)
{
	size_t sz = fi_xpu_device_dt_size(datatype);
	if (flags & ~allowed)
		return -FI_EBADFLAGS;
	if (count == 0 || missing || (sz != 0 && addr % sz != 0))
		return -FI_EINVAL;
	return 0;
}

/* A put-with-signal's flags against its set (-FI_EBADFLAGS), then
 * -FI_EINVAL for a signal word not 8-byte aligned or an unknown signal
 * operation (FI_XPU_SIGNAL_SET, FI_XPU_SIGNAL_ADD). */
FI_XPU_FUNC int fi_xpu_device_check_put_signal(uint64_t flags, uint64_t sig_addr, int sig_op)
{
	if (flags & ~FI_XPU_DEVICE_PUT_SIGNAL_FLAGS)
		return -FI_EBADFLAGS;
	if (sig_addr % 8 != 0 || (sig_op != FI_XPU_SIGNAL_SET && sig_op != FI_XPU_SIGNAL_ADD))
		return -FI_EINVAL;
	return 0;
}

/* A signal wait: -FI_EINVAL for a NULL or misaligned word or a comparison
 * outside FI_XPU_CMP_EQ..FI_XPU_CMP_LE. */
FI_XPU_FUNC int fi_xpu_device_check_wait(const uint64_t *sig, int cmp)
{
	if (!sig || (uintptr_t)sig % 8 != 0 || cmp < FI_XPU_CMP_EQ || cmp > FI_XPU_CMP_LE)
		return -FI_EINVAL;
	return 0;
}

#endif /* FI_XPU_INCLUDED_DEVICE_CHECK_H */
