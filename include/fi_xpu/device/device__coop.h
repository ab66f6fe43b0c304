/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device API: cooperative single transfers (extensions): one
 * transfer split across the lanes of a group, or across several groups.
 * Part of <fi_xpu/device.h>, which states the contract and the dispatch;
 * included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_H
#include <fi_xpu/device.h>
#endif
#ifndef FI_XPU_INCLUDED_DEVICE_DEVICE_COOP_H
#define FI_XPU_INCLUDED_DEVICE_DEVICE_COOP_H

/* ---- cooperative single transfers (extensions) ------------------------- */

/* Expands to its arguments when `c` is 1, to nothing when it is 0. */
#define FI_XPU_I_DEVICE_WHEN(c) FI_XPU_I_DEVICE_WHEN_(c)
#define FI_XPU_I_DEVICE_WHEN_(c) FI_XPU_I_DEVICE_WHEN_##c
#define FI_XPU_I_DEVICE_WHEN_0(...)
#define FI_XPU_I_DEVICE_WHEN_1(...) __VA_ARGS__
/* A case for each provider that implements the cooperative form itself. */
#define FI_XPU_I_DEVICE_COOP_CASE(p)                                           \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_COOP_##p))(      \
		case FI_XPU_DEVICE_ID_##p: return FI_XPU_I_DEVICE_CALL(p);)
/* The same for the cooperative put-with-signal, which a provider may
 * implement apart (FI_XPU_DEVICE_COOP_SIGNAL_<name>, see "Adding a
 * provider" in fi_xpu/device.h). */
#define FI_XPU_I_DEVICE_COOP_SIGNAL_CASE(p)                                    \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_COOP_SIGNAL_##p))( \
		case FI_XPU_DEVICE_ID_##p: return FI_XPU_I_DEVICE_CALL(p);)
/* The others: the leader issues the one operation, the group shares its
 * status. */
#define FI_XPU_I_DEVICE_COOP(h, name, item_call)                               \
	FI_XPU_I_DEVICE_COOP_BY(h, name, item_call, FI_XPU_I_DEVICE_COOP_CASE)
#define FI_XPU_I_DEVICE_COOP_BY(h, name, item_call, case_of)                   \
	struct fi_xpu_group g;                                                \
	int rc;                                                               \
	if (!(h) || (unsigned)scope > (unsigned)FI_XPU_DEVICE)                \
		return -FI_EINVAL;                                            \
	switch ((h)->fid.prov_id) {                                           \
	FI_XPU_DEVICE_PROVIDERS(case_of)                                       \
	default:                                                              \
		break;                                                        \
	}                                                                     \
	rc = fi_xpu_group_enter(&g, scope, name);                             \
	if (rc)                                                               \
		return rc;                                                    \
	if (fi_xpu_group_leader(&g))                                          \
		rc = item_call;                                               \
	return (int)fi_xpu_group_share(&g, rc)

FI_XPU_FUNC int
fi_xpu_coop_write(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_write_##p(ep, buf, len, desc, data, dest_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_write",
			    fi_xpu_write(ep, buf, len, desc, data, dest_addr, addr, key, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_coop_read(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_read_##p(ep, buf, len, desc, src_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_read",
			    fi_xpu_read(ep, buf, len, desc, src_addr, addr, key, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_coop_send(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_send_##p(ep, buf, len, desc, data, dest_addr, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_send",
			    fi_xpu_send(ep, buf, len, desc, data, dest_addr, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_coop_tsend(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t tag, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_tsend_##p(ep, buf, len, desc, data, dest_addr, tag, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_tsend",
			    fi_xpu_tsend(ep, buf, len, desc, data, dest_addr, tag, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

/* The cooperative put-with-signal falls back on fi_xpu_put_signal. */
#include <fi_xpu/device/device__peer.h>

FI_XPU_FUNC int
fi_xpu_coop_put_signal(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, void *dest_addr, uint64_t addr, uint64_t key, uint64_t sig_addr, uint64_t sig_key, uint64_t signal, int sig_op, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_GROUP(ep, FI_CLASS_EP, fi_xpu_device_check_put_signal(flags, sig_addr, sig_op));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_put_signal_##p(ep, buf, len, desc, dest_addr, addr, key, sig_addr, sig_key, signal, sig_op, context, flags, scope)
	FI_XPU_I_DEVICE_COOP_BY(ep, "fi_xpu_coop_put_signal",
			       fi_xpu_put_signal(ep, buf, len, desc, dest_addr, addr, key, sig_addr, sig_key, signal, sig_op, context, flags, FI_XPU_WORK_ITEM),
			       FI_XPU_I_DEVICE_COOP_SIGNAL_CASE);
#undef FI_XPU_I_DEVICE_CALL
}

/* ---- one transfer split across groups (extensions) ----------------------
 * Each of `parts` groups (the work groups of a grid, say) performs its
 * share (fi_xpu_coop_part) as one cooperative transfer of its own: one
 * completion, one counter increment and, for a put-with-signal, one signal
 * update per share, empty shares included, so the counts come to `parts`.
 * Handle, class and scope errors first, then the flags (-FI_EBADFLAGS),
 * then the split (-FI_EINVAL for part >= parts, and for
 * FI_XPU_SIGNAL_SET with parts > 1: a set cannot be counted). */

/* `p` advanced by `off`, or NULL when it is NULL (only with no bytes). */
#define FI_XPU_I_DEVICE_AT(type, p, off) ((p) ? (type)(p) + (off) : (type)(p))

FI_XPU_FUNC int
fi_xpu_coop_write_part(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, uint32_t part, uint32_t parts, int scope)
{
	size_t off = 0, n = 0;
	int rc;

	if (!ep || ep->fid.fclass != (uint32_t)FI_CLASS_EP || (unsigned)scope > (unsigned)FI_XPU_DEVICE)
		return -FI_EINVAL;
	rc = fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_WRITE_FLAGS);
	if (!rc)
		rc = fi_xpu_coop_part(len, part, parts, &off, &n);
	if (rc)
		return rc;
	return fi_xpu_coop_write(ep, FI_XPU_I_DEVICE_AT(const unsigned char *, buf, off), n, desc,
				 data, dest_addr, addr + off, key, context, flags, scope);
}

FI_XPU_FUNC int
fi_xpu_coop_put_signal_part(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, void *dest_addr, uint64_t addr, uint64_t key, uint64_t sig_addr, uint64_t sig_key, uint64_t signal, int sig_op, void *context, uint64_t flags, uint32_t part, uint32_t parts, int scope)
{
	size_t off = 0, n = 0;
	int rc;

	if (!ep || ep->fid.fclass != (uint32_t)FI_CLASS_EP || (unsigned)scope > (unsigned)FI_XPU_DEVICE)
		return -FI_EINVAL;
	rc = fi_xpu_device_check_put_signal(flags, sig_addr, sig_op);
	if (!rc)
		rc = fi_xpu_coop_part(len, part, parts, &off, &n);
	if (!rc && parts > 1 && sig_op != FI_XPU_SIGNAL_ADD)
		rc = -FI_EINVAL;
	if (rc)
		return rc;
	return fi_xpu_coop_put_signal(ep, FI_XPU_I_DEVICE_AT(const unsigned char *, buf, off), n,
				      desc, dest_addr, addr + off, key, sig_addr, sig_key, signal,
				      sig_op, context, flags, scope);
}

#endif /* FI_XPU_INCLUDED_DEVICE_DEVICE_COOP_H */
