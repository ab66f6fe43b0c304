/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Layouts the test provider hands out as raw bytes (endpoint names, MR
 * descriptors, device state blocks). A real provider keeps these private to
 * itself and its device header; the test programs include this file so that
 * they can check the bytes they are given instead of trusting them.
 */
#ifndef FI_XPU_TEST_PROVIDER_H
#define FI_XPU_TEST_PROVIDER_H

#include <stdint.h>

/* Endpoint names and AV entries are this many bytes. */
#define TP_ADDRLEN 16

/* First word of each device state block, one per kind of object. */
#define TP_MAGIC_EP 0x7470657073746174ULL   /* "tpepstat" */
#define TP_MAGIC_CQ 0x7470637173746174ULL   /* "tpcqstat" */
#define TP_MAGIC_CNTR 0x7470636e73746174ULL /* "tpcnstat" */

/* Default number of entries of an XPU CQ opened with size 0. */
#define TP_CQ_DEFAULT_SIZE 64

/* What fi_xpu_getname returns: unique per endpoint in a process. */
struct tp_name {
	uint32_t magic; /* TP_NAME_MAGIC */
	uint32_t prov_id;
	uint32_t pid;
	uint32_t seq;
};
#define TP_NAME_MAGIC 0x74706570u /* "tpep" */

/* What fi_xpu_mr_desc returns. */
struct tp_mr_desc {
	uint64_t addr;
	uint64_t len;
	uint64_t key;
};

/* Device state of an endpoint (fid_xpu.prov_ctx of its export). */
struct tp_ep_state {
	uint64_t magic;
	struct tp_name name;
	/* Device state blocks of the XPU CQs and counter bound, or 0. */
	uint64_t tx_cq;
	uint64_t rx_cq;
	uint64_t cntr;
	uint64_t enabled;
};

/* Device state of an XPU CQ; `size` entries of the CQ's format follow. */
struct tp_cq_state {
	uint64_t magic;
	uint64_t size;
	uint64_t entry_size;
	uint64_t head;
	uint64_t tail;
};

/* Device state of an XPU counter. */
struct tp_cntr_state {
	uint64_t magic;
	uint64_t value;
	uint64_t err;
};

#endif /* FI_XPU_TEST_PROVIDER_H */
