/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: every data-path operation of
 * <fi_xpu/device.h> for endpoints, CQs and counters of the shm provider
 * (prov_id FI_XPU_PROV_SHM). The caller's device moves the data itself
 * through the peer's memory, which the host side mapped into this context
 * (see fi_xpu_shm(7)).
 *
 * Header-only, no libc on device paths; written against
 * <fi_xpu/device_arch.h> (atomics with a memory scope, barriers,
 * broadcast, clock). Every access to memory another process can change uses
 * atomics or is bounded by values this process checked; atomics and fences
 * are system-scope, except what is written into a peer the host found on
 * this GPU (fi_xpu_shm_peer_addr.scope, fi_xpu_shm(7) MEMORY PLACEMENT).
 *
 * Raw handles:
 *   dest_addr  points to the 8 bytes fi_xpu_av_lookup wrote (a pointer to
 *              the context's record of that peer).
 *   desc       points to the 32 bytes fi_xpu_mr_desc wrote, or is NULL.
 */
/*
 * No tunables: every size is the host library's (shm__types.h). For
 * tests of the generated code only, FI_XPU_I_SHM_SCOPE fixes the memory
 * scope of writes into peers, and FI_XPU_I_TEST_SIG_ORDER the order of a
 * put-with-signal's signal store.
 *
 * Layers, each under fi_xpu/shm/, each including the one before:
 *   shm__types.h     the layouts shared with the host library, generated
 *                    from its Rust definitions (never edited by hand);
 *   shm__base.h      protocol words only device code knows, the loads and
 *                    stores of shared words, the copy, the stamps;
 *   shm__complete.h  completions written: CQ rings, counters;
 *   shm__peer.h      peers and protection, the resolve table, the device
 *                    blocks behind handles;
 *   shm__rma.h, shm__atomic.h
 *                    RMA and atomics;
 *   shm__inbox.h     the inbox, the endpoint lock, staging lanes;
 *   shm__msg.h       messages: sends, matching, streaming, progress,
 *                    receives;
 *   shm__cq.h        CQ reads;
 *   shm__signal.h    put with signal, fence, quiet, direct pointers;
 *   shm__entry.h     the entry points of <fi_xpu/device.h>, per scope
 *                    group;
 *   shm__cntr.h      counters.
 * Scope groups use fi_xpu/device_group.h's vocabulary
 * (FI_XPU_GROUP_ENTER_RANK, fi_xpu_group_scope_bcast/_sync).
 */
#ifndef FI_XPU_INCLUDED_DEVICE_SHM_H
#define FI_XPU_INCLUDED_DEVICE_SHM_H

#ifndef FI_XPU_DEVICE_ID_shm
#define FI_XPU_DEVICE_ID_shm FI_XPU_PROV_SHM
#endif

#include <fi_xpu/shm/shm__types.h>
#include <fi_xpu/shm/shm__base.h>
#include <fi_xpu/shm/shm__complete.h>
#include <fi_xpu/shm/shm__peer.h>
#include <fi_xpu/shm/shm__rma.h>
#include <fi_xpu/shm/shm__atomic.h>
#include <fi_xpu/shm/shm__inbox.h>
#include <fi_xpu/shm/shm__msg.h>
#include <fi_xpu/shm/shm__cq.h>
#include <fi_xpu/shm/shm__signal.h>
#include <fi_xpu/shm/shm__entry.h>
#include <fi_xpu/shm/shm__cntr.h>

#endif /* FI_XPU_INCLUDED_DEVICE_SHM_H */
