/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_getinfo as fi_xpu's ofi provider calls it for its own domain: first
 * asking that writes be placed in order (FI_ORDER_WAW, for its ordered
 * signals), then without where the transport does not grant it. The host
 * baselines use it so that they measure the same transport mode: granted
 * ordering makes libfabric's shm queue each RMA write for the target
 * instead of placing it with a process_vm_writev, several times faster for
 * small writes. FI_XPU_BENCH_UNORDERED=1 never asks (the other mode).
 */
#ifndef FI_XPU_BENCH_ORDERED_GETINFO_H
#define FI_XPU_BENCH_ORDERED_GETINFO_H

#include <rdma/fabric.h>

#include <stdlib.h>

static inline int fi_getinfo_ordered(struct fi_info *hints, struct fi_info **info)
{
	*info = NULL;
	if (!getenv("FI_XPU_BENCH_UNORDERED")) {
		hints->tx_attr->msg_order = FI_ORDER_WAW;
		if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, info))
			*info = NULL;
		hints->tx_attr->msg_order = 0;
		if (*info)
			return 0;
	}
	return fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, info);
}

#endif
