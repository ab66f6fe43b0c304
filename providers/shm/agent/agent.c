/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The host progress agent's one step, compiled from the device header
 * itself so that the agent runs exactly the progress a kernel runs: the
 * same matching, the same refills of staging lanes, the same completions.
 * The endpoint's lock (a try-lock here) keeps it and device code apart.
 * Needs nothing from libfi_xpu: progress uses no launcher geometry.
 */
#include <fi_xpu/device_shm.h>

void fi_xpu_i_shm_agent_progress(uint64_t ep_dev);

void fi_xpu_i_shm_agent_progress(uint64_t ep_dev)
{
	fi_xpu_shm_progress(FI_XPU_SHM_P(struct fi_xpu_shm_ep_dev, ep_dev));
}
