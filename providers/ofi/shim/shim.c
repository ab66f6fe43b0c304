/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Thin C shim between the ofi provider (Rust) and libfabric. Most of
 * libfabric's data-path API is `static inline` in its headers, so it has no
 * symbol Rust could bind to; each function here is one such call, with only
 * plain types in its signature (the message structs are passed as `const
 * void *` and laid out by hand on the Rust side, checked by a layout test).
 *
 * Built without libfabric's headers (XO_NO_LIBFABRIC), every call reports
 * -ENODEV and xo_available() says 0, so the plugin refuses to initialise and
 * the rest of the workspace still builds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef XO_NO_LIBFABRIC
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

/* libfabric 2.x dropped FI_MR_LOCAL/FI_CONTEXT from the headers' defaults
 * but kept the bits; spell them out where a header lacks them. */
#ifndef FI_MR_LOCAL
#define FI_MR_LOCAL (1 << 0)
#endif
#ifndef FI_CONTEXT
#define FI_CONTEXT (1ULL << 59)
#endif

int xo_available(void) { return 1; }

uint32_t xo_version(void) { return fi_version(); }

const char *xo_strerror(int err) { return fi_strerror(err); }

/* Tries the capability sets from richest to plainest and opens fabric and
 * domain on the first provider that offers one. *got_caps receives the
 * capabilities granted. */
static int xo_open_one(const char *prov, const char *domain_name, uint64_t base_caps,
		       uint64_t optional, void **info_out, void **fabric_out, void **domain_out,
		       uint64_t *got_caps)
{
	struct fi_info *hints, *info = NULL;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	uint64_t opt;
	int ret = -FI_ENODATA;

	/* Every subset of `optional`, starting with all of it; each first
	 * asking that RMA and atomic writes be sent in order (FI_ORDER_WAW:
	 * the returned info then says up to which size their data is placed
	 * in order), then without. */
	for (uint64_t try = 0;; try++) {
		uint64_t drop = try >> 1;
		uint64_t d = 0, bits = optional;
		unsigned i = 0;
		if (drop >> __builtin_popcountll(optional))
			break;
		/* The highest optional bit is the first to go. */
		while (bits) {
			uint64_t high = 1ULL << (63 - __builtin_clzll(bits));
			if (drop & (1ULL << i))
				d |= high;
			bits &= ~high;
			i++;
		}
		opt = optional & ~d;
		hints = fi_allocinfo();
		if (!hints)
			return -FI_ENOMEM;
		hints->caps = base_caps | opt;
		hints->mode = FI_CONTEXT | FI_CONTEXT2;
		hints->ep_attr->type = FI_EP_RDM;
		if (!(try & 1))
			hints->tx_attr->msg_order = FI_ORDER_WAW;
		hints->domain_attr->threading = FI_THREAD_SAFE;
		hints->domain_attr->mr_mode =
			FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_HMEM;
		if (prov && *prov)
			hints->fabric_attr->prov_name = strdup(prov);
		if (domain_name && *domain_name)
			hints->domain_attr->name = strdup(domain_name);
		ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
		fi_freeinfo(hints);
		if (ret == 0 && info)
			break;
		info = NULL;
	}
	if (!info)
		return ret ? ret : -FI_ENODATA;
	ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	if (ret) {
		fi_freeinfo(info);
		return ret;
	}
	ret = fi_domain(fabric, info, &domain, NULL);
	if (ret) {
		fi_close(&fabric->fid);
		fi_freeinfo(info);
		return ret;
	}
	*info_out = info;
	*fabric_out = fabric;
	*domain_out = domain;
	*got_caps = info->caps;
	return 0;
}

/* The libfabric providers tried, in order, when none is named: native RMA
 * and atomics on real networks first, then sockets, then intra-node
 * shared memory. Never whatever fi_getinfo lists first: that is
 * `udp;ofi_rxd` on many hosts, whose fetching atomics crash inside
 * libfabric 1.17. fi_xpu_ofi(7) lists them. */
static const char *const xo_default_provs[] = { "cxi", "efa", "verbs", "opx", "tcp", "shm", NULL };

int xo_open(const char *prov, const char *domain_name, uint64_t base_caps, uint64_t optional,
	    void **info_out, void **fabric_out, void **domain_out, uint64_t *got_caps)
{
	int ret = -FI_ENODATA;
	if (prov && *prov)
		return xo_open_one(prov, domain_name, base_caps, optional, info_out, fabric_out,
				   domain_out, got_caps);
	for (int i = 0; xo_default_provs[i]; i++) {
		ret = xo_open_one(xo_default_provs[i], domain_name, base_caps, optional, info_out,
				  fabric_out, domain_out, got_caps);
		if (ret == 0)
			return 0;
	}
	return ret;
}

void xo_freeinfo(void *info) { fi_freeinfo(info); }

const char *xo_info_prov_name(const void *info)
{
	return ((const struct fi_info *)info)->fabric_attr->prov_name;
}

const char *xo_info_domain_name(const void *info)
{
	return ((const struct fi_info *)info)->domain_attr->name;
}

uint64_t xo_info_mr_mode(const void *info)
{
	return (uint64_t)((const struct fi_info *)info)->domain_attr->mr_mode;
}

uint64_t xo_info_max_msg_size(const void *info)
{
	return ((const struct fi_info *)info)->ep_attr->max_msg_size;
}

size_t xo_info_cq_data_size(const void *info)
{
	return ((const struct fi_info *)info)->domain_attr->cq_data_size;
}

int xo_close(void *fid) { return fi_close((struct fid *)fid); }

int xo_av_open(void *domain, size_t count, void **av)
{
	struct fi_av_attr attr;
	memset(&attr, 0, sizeof attr);
	attr.type = FI_AV_TABLE;
	attr.count = count;
	return fi_av_open(domain, &attr, (struct fid_av **)av, NULL);
}

int xo_av_insert(void *av, const void *addr, uint64_t *fi_addr)
{
	fi_addr_t out = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insert(av, addr, 1, &out, 0, NULL);
	if (ret == 1) {
		*fi_addr = out;
		return 0;
	}
	return ret < 0 ? ret : -FI_EINVAL;
}

int xo_av_remove(void *av, uint64_t fi_addr)
{
	fi_addr_t a = fi_addr;
	return fi_av_remove(av, &a, 1, 0);
}

int xo_mr_reg(void *domain, const void *buf, size_t len, uint64_t access, uint64_t requested_key,
	      int iface, uint64_t device, void **mr, uint64_t *key, void **desc)
{
	struct fi_mr_attr attr;
	struct iovec iov;
	struct fid_mr *m;
	int dev = (int)device;
	int ret;

	memset(&attr, 0, sizeof attr);
	iov.iov_base = (void *)buf;
	iov.iov_len = len;
	attr.mr_iov = &iov;
	attr.iov_count = 1;
	attr.access = access;
	attr.requested_key = requested_key;
	attr.iface = (enum fi_hmem_iface)iface;
	/* Every member of the device union is an int at offset 0. */
	memcpy(&attr.device, &dev, sizeof dev);
	ret = fi_mr_regattr(domain, &attr, iface ? FI_HMEM_DEVICE_ONLY : 0, &m);
	if (ret)
		return ret;
	*mr = m;
	*key = fi_mr_key(m);
	*desc = fi_mr_desc(m);
	return 0;
}

/* Opens a CQ with a file descriptor the progress thread can sleep on
 * (*fd), or, where the provider has no such wait object, one without
 * (*fd = -1). */
int xo_cq_open(void *domain, size_t size, void **cq, int *fd)
{
	struct fi_cq_attr attr;
	int ret, wfd = -1;
	memset(&attr, 0, sizeof attr);
	attr.size = size;
	attr.format = FI_CQ_FORMAT_TAGGED;
	attr.wait_obj = FI_WAIT_FD;
	ret = fi_cq_open(domain, &attr, (struct fid_cq **)cq, NULL);
	if (ret == 0) {
		if (fi_control(&((struct fid_cq *)*cq)->fid, FI_GETWAIT, &wfd) == 0 && wfd >= 0) {
			*fd = wfd;
			return 0;
		}
		fi_close(&((struct fid_cq *)*cq)->fid);
	}
	attr.wait_obj = FI_WAIT_NONE;
	ret = fi_cq_open(domain, &attr, (struct fid_cq **)cq, NULL);
	if (ret == 0)
		*fd = -1;
	return ret;
}

/* 0 when the caller may block on the wait fds of `fids`, -FI_EAGAIN when
 * they have events to read first. */
int xo_trywait(void *fabric, void **fids, int count)
{
	return fi_trywait(fabric, (struct fid **)fids, count);
}

/* Whether libfabric moves data without the application's calls. */
int xo_info_auto_progress(const void *info)
{
	return ((const struct fi_info *)info)->domain_attr->data_progress == FI_PROGRESS_AUTO;
}

/* The largest write whose data the transport places before that of a
 * later write or atomic write (FI_ORDER_WAW and max_order_waw_size), and
 * capped by the transmit inject size: 0 when it promises no such order. */
size_t xo_info_ordered_inject(const void *info)
{
	const struct fi_info *i = info;
	size_t waw = i->ep_attr->max_order_waw_size, inj = i->tx_attr->inject_size;
	if (!(i->tx_attr->msg_order & FI_ORDER_WAW))
		return 0;
	return waw < inj ? waw : inj;
}

int xo_cntr_open(void *domain, void **cntr)
{
	struct fi_cntr_attr attr;
	memset(&attr, 0, sizeof attr);
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.wait_obj = FI_WAIT_NONE;
	return fi_cntr_open(domain, &attr, (struct fid_cntr **)cntr, NULL);
}

uint64_t xo_cntr_read(void *cntr) { return fi_cntr_read(cntr); }

uint64_t xo_cntr_readerr(void *cntr) { return fi_cntr_readerr(cntr); }

int xo_ep_open(void *domain, void *info, void **ep)
{
	return fi_endpoint(domain, info, (struct fid_ep **)ep, NULL);
}

/*
 * An endpoint whose source address is `src` (a NUL-terminated string in the
 * provider's address format): libfabric's shm provider names its shared
 * memory after it, instead of after the pid, which a later process may get.
 */
int xo_ep_open_src(void *domain, void *info, const char *src, void **ep)
{
	struct fi_info *dup = fi_dupinfo(info);
	int ret;

	if (!dup)
		return -FI_ENOMEM;
	free(dup->src_addr);
	dup->src_addr = strdup(src);
	dup->src_addrlen = dup->src_addr ? strlen(src) + 1 : 0;
	ret = dup->src_addr ? fi_endpoint(domain, dup, (struct fid_ep **)ep, NULL) : -FI_ENOMEM;
	fi_freeinfo(dup);
	return ret;
}

int xo_ep_bind(void *ep, void *fid, uint64_t flags) { return fi_ep_bind(ep, fid, flags); }

int xo_ep_enable(void *ep) { return fi_enable(ep); }

int xo_getname(void *ep, void *addr, size_t *len) { return fi_getname(ep, addr, len); }

/* `buf` holds `count` struct fi_cq_tagged_entry. */
long xo_cq_readfrom(void *cq, void *buf, size_t count, uint64_t *src)
{
	return (long)fi_cq_readfrom(cq, buf, count, (fi_addr_t *)src);
}

long xo_cq_readerr(void *cq, void *err_entry) { return (long)fi_cq_readerr(cq, err_entry, 0); }

long xo_writemsg(void *ep, const void *msg, uint64_t flags) { return fi_writemsg(ep, msg, flags); }

long xo_readmsg(void *ep, const void *msg, uint64_t flags) { return fi_readmsg(ep, msg, flags); }

long xo_sendmsg(void *ep, const void *msg, uint64_t flags) { return fi_sendmsg(ep, msg, flags); }

long xo_recvmsg(void *ep, const void *msg, uint64_t flags) { return fi_recvmsg(ep, msg, flags); }

long xo_tsendmsg(void *ep, const void *msg, uint64_t flags) { return fi_tsendmsg(ep, msg, flags); }

long xo_trecvmsg(void *ep, const void *msg, uint64_t flags) { return fi_trecvmsg(ep, msg, flags); }

long xo_atomicmsg(void *ep, const void *msg, uint64_t flags) { return fi_atomicmsg(ep, msg, flags); }

long xo_fetch_atomicmsg(void *ep, const void *msg, void *result, void **result_desc,
			uint64_t flags)
{
	return fi_fetch_atomicmsg(ep, msg, result, result_desc, 1, flags);
}

long xo_compare_atomicmsg(void *ep, const void *msg, const void *compare, void **compare_desc,
			  void *result, void **result_desc, uint64_t flags)
{
	return fi_compare_atomicmsg(ep, msg, compare, compare_desc, 1, result, result_desc, 1,
				    flags);
}

/* Whether the endpoint can do `op` on `datatype` (0 or a negative error). */
int xo_atomic_valid(void *ep, int kind, int datatype, int op)
{
	size_t count = 0;
	switch (kind) {
	case 0:
		return fi_atomicvalid(ep, datatype, op, &count);
	case 1:
		return fi_fetch_atomicvalid(ep, datatype, op, &count);
	default:
		return fi_compare_atomicvalid(ep, datatype, op, &count);
	}
}

/* Sizes and offsets of the structs the Rust side lays out by hand, for the
 * layout test: a flat list of (size_t) values in a fixed order. */
size_t xo_layout(size_t *out, size_t max)
{
	size_t v[] = {
		sizeof(struct iovec),
		sizeof(struct fi_rma_iov), offsetof(struct fi_rma_iov, len),
		offsetof(struct fi_rma_iov, key),
		sizeof(struct fi_ioc), offsetof(struct fi_ioc, count),
		sizeof(struct fi_rma_ioc), offsetof(struct fi_rma_ioc, count),
		offsetof(struct fi_rma_ioc, key),
		sizeof(struct fi_msg), offsetof(struct fi_msg, desc),
		offsetof(struct fi_msg, iov_count), offsetof(struct fi_msg, addr),
		offsetof(struct fi_msg, context), offsetof(struct fi_msg, data),
		sizeof(struct fi_msg_tagged), offsetof(struct fi_msg_tagged, addr),
		offsetof(struct fi_msg_tagged, tag), offsetof(struct fi_msg_tagged, ignore),
		offsetof(struct fi_msg_tagged, context), offsetof(struct fi_msg_tagged, data),
		sizeof(struct fi_msg_rma), offsetof(struct fi_msg_rma, addr),
		offsetof(struct fi_msg_rma, rma_iov), offsetof(struct fi_msg_rma, rma_iov_count),
		offsetof(struct fi_msg_rma, context), offsetof(struct fi_msg_rma, data),
		sizeof(struct fi_msg_atomic), offsetof(struct fi_msg_atomic, addr),
		offsetof(struct fi_msg_atomic, rma_iov), offsetof(struct fi_msg_atomic, rma_iov_count),
		offsetof(struct fi_msg_atomic, datatype), offsetof(struct fi_msg_atomic, op),
		offsetof(struct fi_msg_atomic, context), offsetof(struct fi_msg_atomic, data),
		sizeof(struct fi_cq_tagged_entry), offsetof(struct fi_cq_tagged_entry, tag),
		sizeof(struct fi_cq_err_entry), offsetof(struct fi_cq_err_entry, err),
		offsetof(struct fi_cq_err_entry, prov_errno),
		sizeof(struct fi_context2),
	};
	size_t n = sizeof v / sizeof v[0];
	for (size_t i = 0; i < n && i < max; i++)
		out[i] = v[i];
	return n;
}

#else /* XO_NO_LIBFABRIC */

#define XO_ENODEV (-19)
int xo_available(void) { return 0; }
uint32_t xo_version(void) { return 0; }
const char *xo_strerror(int err) { (void)err; return "libfabric not available"; }
int xo_open(const char *prov, const char *domain_name, uint64_t base_caps, uint64_t optional,
	    void **info_out, void **fabric_out, void **domain_out, uint64_t *got_caps)
{
	(void)prov; (void)domain_name; (void)base_caps; (void)optional; (void)info_out;
	(void)fabric_out; (void)domain_out; (void)got_caps;
	return XO_ENODEV;
}
void xo_freeinfo(void *info) { (void)info; }
const char *xo_info_prov_name(const void *info) { (void)info; return ""; }
const char *xo_info_domain_name(const void *info) { (void)info; return ""; }
uint64_t xo_info_mr_mode(const void *info) { (void)info; return 0; }
uint64_t xo_info_max_msg_size(const void *info) { (void)info; return 0; }
size_t xo_info_cq_data_size(const void *info) { (void)info; return 0; }
int xo_close(void *fid) { (void)fid; return XO_ENODEV; }
int xo_av_open(void *domain, size_t count, void **av) { (void)domain; (void)count; (void)av; return XO_ENODEV; }
int xo_av_insert(void *av, const void *addr, uint64_t *fi_addr) { (void)av; (void)addr; (void)fi_addr; return XO_ENODEV; }
int xo_av_remove(void *av, uint64_t fi_addr) { (void)av; (void)fi_addr; return XO_ENODEV; }
int xo_mr_reg(void *domain, const void *buf, size_t len, uint64_t access, uint64_t requested_key,
	      int iface, uint64_t device, void **mr, uint64_t *key, void **desc)
{
	(void)domain; (void)buf; (void)len; (void)access; (void)requested_key; (void)iface;
	(void)device; (void)mr; (void)key; (void)desc;
	return XO_ENODEV;
}
int xo_cq_open(void *domain, size_t size, void **cq, int *fd) { (void)domain; (void)size; (void)cq; (void)fd; return XO_ENODEV; }
int xo_trywait(void *fabric, void **fids, int count) { (void)fabric; (void)fids; (void)count; return XO_ENODEV; }
int xo_info_auto_progress(const void *info) { (void)info; return 0; }
size_t xo_info_ordered_inject(const void *info) { (void)info; return 0; }
int xo_cntr_open(void *domain, void **cntr) { (void)domain; (void)cntr; return XO_ENODEV; }
uint64_t xo_cntr_read(void *cntr) { (void)cntr; return 0; }
uint64_t xo_cntr_readerr(void *cntr) { (void)cntr; return 0; }
int xo_ep_open(void *domain, void *info, void **ep) { (void)domain; (void)info; (void)ep; return XO_ENODEV; }
int xo_ep_open_src(void *domain, void *info, const char *src, void **ep) { (void)domain; (void)info; (void)src; (void)ep; return XO_ENODEV; }
int xo_ep_bind(void *ep, void *fid, uint64_t flags) { (void)ep; (void)fid; (void)flags; return XO_ENODEV; }
int xo_ep_enable(void *ep) { (void)ep; return XO_ENODEV; }
int xo_getname(void *ep, void *addr, size_t *len) { (void)ep; (void)addr; (void)len; return XO_ENODEV; }
long xo_cq_readfrom(void *cq, void *buf, size_t count, uint64_t *src) { (void)cq; (void)buf; (void)count; (void)src; return XO_ENODEV; }
long xo_cq_readerr(void *cq, void *e) { (void)cq; (void)e; return XO_ENODEV; }
#define XO_NOMSG(name) long name(void *ep, const void *msg, uint64_t flags) { (void)ep; (void)msg; (void)flags; return XO_ENODEV; }
XO_NOMSG(xo_writemsg)
XO_NOMSG(xo_readmsg)
XO_NOMSG(xo_sendmsg)
XO_NOMSG(xo_recvmsg)
XO_NOMSG(xo_tsendmsg)
XO_NOMSG(xo_trecvmsg)
XO_NOMSG(xo_atomicmsg)
long xo_fetch_atomicmsg(void *ep, const void *msg, void *result, void **result_desc, uint64_t flags)
{
	(void)ep; (void)msg; (void)result; (void)result_desc; (void)flags;
	return XO_ENODEV;
}
long xo_compare_atomicmsg(void *ep, const void *msg, const void *compare, void **compare_desc,
			  void *result, void **result_desc, uint64_t flags)
{
	(void)ep; (void)msg; (void)compare; (void)compare_desc; (void)result; (void)result_desc;
	(void)flags;
	return XO_ENODEV;
}
int xo_atomic_valid(void *ep, int kind, int datatype, int op) { (void)ep; (void)kind; (void)datatype; (void)op; return XO_ENODEV; }
size_t xo_layout(size_t *out, size_t max) { (void)out; (void)max; return 0; }

#endif
