/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu ofi provider, device side: every data-path operation of
 * <fi_xpu/device.h> for endpoints, CQs and counters of the ofi provider
 * (prov_id FI_XPU_PROV_OFI). Operations become 128-byte work requests in a
 * ring in host-visible memory; a proxy thread of the host library issues
 * them on a libfabric endpoint and writes completions and counters back
 * (see fi_xpu_ofi(7) for the ring format).
 *
 * Header-only, written against <fi_xpu/device_arch.h>; no libc on
 * device paths (the host XPU build wakes a sleeping proxy through its eventfd).
 *
 * Raw handles:
 *   dest_addr  points to the 8 bytes fi_xpu_av_lookup wrote (the peer's
 *              libfabric fi_addr_t). For receives, NULL means any source.
 *   desc       points to the 32 bytes fi_xpu_mr_desc wrote, or is NULL.
 *
 * Semantics match the shm provider: arguments a caller can check (NULL
 * handle, NULL buffer with a length) return -FI_EINVAL at once; everything
 * else the proxy finds wrong becomes an error completion on the endpoint's
 * CQ and counter. A full ring returns -FI_EAGAIN and posts nothing.
 * Operations complete asynchronously: wait on the CQ or counter, or call
 * fi_xpu_flush, before reusing a source buffer or reading a result.
 */
/*
 * Tunables, defined before the first include to change them:
 *   FI_XPU_OFI_FLUSH_TIMEOUT_MS  how long fi_xpu_flush waits for the proxy
 *                                at most (default 60000);
 *   FI_XPU_OFI_NO_WAKE           the host XPU build never wakes a sleeping
 *                                proxy through its eventfd (it polls).
 *
 * Layers, each under fi_xpu/ofi/:
 *   ofi__types.h   the layouts shared with the host library, generated
 *                  from its Rust definitions (never edited by hand);
 *   ofi__post.h    the ring: device blocks, shared words, a group's post;
 *   ofi__rma.h, ofi__msg.h, ofi__atomic.h
 *                  the operations of each family;
 *   ofi__peer.h    flush, put with signal, fence, quiet, direct pointers;
 *   ofi__cq.h, ofi__cntr.h
 *                  completion queues and counters.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_OFI_H
#define FI_XPU_INCLUDED_DEVICE_OFI_H

#ifndef FI_XPU_DEVICE_ID_ofi
#define FI_XPU_DEVICE_ID_ofi FI_XPU_PROV_OFI
#endif

#include <fi_xpu/ofi/ofi__types.h>
#include <fi_xpu/ofi/ofi__post.h>
#include <fi_xpu/ofi/ofi__rma.h>
#include <fi_xpu/ofi/ofi__msg.h>
#include <fi_xpu/ofi/ofi__atomic.h>
#include <fi_xpu/ofi/ofi__peer.h>
#include <fi_xpu/ofi/ofi__cq.h>
#include <fi_xpu/ofi/ofi__cntr.h>

#endif /* FI_XPU_INCLUDED_DEVICE_OFI_H */
