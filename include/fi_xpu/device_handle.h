/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The validity word of an exported handle's device block: the first check
 * a provider's device code makes before it follows fid_xpu.prov_ctx. The
 * in-tree providers keep one 64-bit word in each endpoint, CQ and counter
 * block (where, the provider's layout says); the library that exported the
 * handle writes it, and turns it into a tombstone when the object closes,
 * keeping the block mapped until its context closes. The values are
 * generated from the Rust definitions (fi_xpu.h, FI_XPU_HANDLE_*):
 *
 *   bits 63..48  FI_XPU_HANDLE_MAGIC
 *   bits 47..40  class: FI_XPU_HANDLE_EP, _CQ, _CNTR
 *   bits 39..32  FI_XPU_HANDLE_LIVE, or FI_XPU_HANDLE_DEAD once closed
 *   bits 31..0   FI_XPU_API_VERSION of the exporting library
 *
 * A word that is not exactly the live word of the expected class, made by a
 * library whose layouts this header was written for, makes the operation
 * return -FI_EINVAL: a handle of another class, a closed object, a handle
 * from another fi_xpu version or memory that is no handle at all.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_HANDLE_H
#define FI_XPU_INCLUDED_DEVICE_HANDLE_H

#include <fi_xpu/device_arch.h>

#define FI_XPU_HANDLE_WORD(cls, state)                                         \
	((uint64_t)FI_XPU_HANDLE_MAGIC | (uint64_t)(cls) | (uint64_t)(state) | \
	 (uint64_t)FI_XPU_API_VERSION)

/* 1 when `word` (a device block's validity word, may be NULL) says: a live
 * object of class `cls`, exported by this version's layouts. A poll's
 * load (FI_XPU_ARCH_POLL, relaxed on GPUs): the block was filled before the handle was exported, and whatever
 * handed the handle to the kernel (its launch, or a flag the kernel read
 * with acquire order) made that visible already; an acquire here would
 * invalidate the L1 on every poll of a CQ or counter. */
FI_XPU_FUNC int fi_xpu_handle_live(const uint64_t *word, uint64_t cls)
{
	return word && fi_xpu_arch_load_u64(word, FI_XPU_ARCH_POLL, FI_XPU_ARCH_MS_SYSTEM) ==
			       FI_XPU_HANDLE_WORD(cls, FI_XPU_HANDLE_LIVE);
}

/* The abort word of the object's XPU context (fi_xpu_ctx_abort(3)): the
 * provider stores its address in every device block a kernel waits on
 * (0: none). Every device wait looks at it on its first turn and then once
 * every FI_XPU_ABORT_CHECK_NS nanoseconds of the device clock (define it
 * before including to change it), not on every turn: the word is host
 * memory, and a wait spinning on a word of its own should not cross PCIe
 * twice per turn. It ends with -FI_ECANCELED once the host has raised it.
 * The load is a poll's (FI_XPU_ARCH_POLL): nothing the host wrote before
 * is read after it. */
#define FI_XPU_ABORT_ERR (-FI_ECANCELED)
#ifndef FI_XPU_ABORT_CHECK_NS
#define FI_XPU_ABORT_CHECK_NS 20000
#endif

FI_XPU_FUNC int fi_xpu_i_aborted(uint64_t word)
{
	return word && fi_xpu_arch_load_u64((const uint64_t *)(uintptr_t)word, FI_XPU_ARCH_POLL,
					    FI_XPU_ARCH_MS_SYSTEM) != 0;
}

/* A wait's look at its abort word at time `now` (fi_xpu_arch_clock_ns):
 * 1 when raised; only when `*next` (0 before the first turn) has passed,
 * and then the next look is due FI_XPU_ABORT_CHECK_NS later. */
FI_XPU_FUNC int fi_xpu_i_abort_due(uint64_t word, uint64_t now, uint64_t *next)
{
	if (!word || now < *next)
		return 0;
	*next = now + FI_XPU_ABORT_CHECK_NS;
	return fi_xpu_i_aborted(word);
}

/* The end of a wait's turn that found nothing, in a wait begun at `start`
 * with `timeout_ms` (< 0: none) and abort word `word`: FI_XPU_ABORT_ERR
 * when the word was raised (looked at as fi_xpu_i_abort_due says),
 * -FI_ETIMEDOUT when the time is up, else 0 after a pause. */
FI_XPU_FUNC int fi_xpu_i_wait_turn(uint64_t word, uint64_t start, int timeout_ms, uint64_t *next)
{
	uint64_t now = fi_xpu_arch_clock_ns();
	if (fi_xpu_i_abort_due(word, now, next))
		return FI_XPU_ABORT_ERR;
	if (timeout_ms >= 0 && now - start >= (uint64_t)timeout_ms * (uint64_t)1000000)
		return -FI_ETIMEDOUT;
	fi_xpu_arch_pause();
	return 0;
}

#endif /* FI_XPU_INCLUDED_DEVICE_HANDLE_H */
