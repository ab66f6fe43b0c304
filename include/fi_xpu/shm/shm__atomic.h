/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: atomics: datatypes, operations, the
 * remote update.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_ATOMIC_H
#define FI_XPU_INCLUDED_SHM_SHM_ATOMIC_H

#include <fi_xpu/shm/shm__rma.h>

/* ---- atomics ------------------------------------------------------------ */
FI_XPU_FUNC int fi_xpu_shm_dt_size(int dt)
{
	switch (dt) {
	case FI_INT8: case FI_UINT8: return 1;
	case FI_INT16: case FI_UINT16: return 2;
	case FI_INT32: case FI_UINT32: case FI_FLOAT: return 4;
	case FI_INT64: case FI_UINT64: case FI_DOUBLE: return 8;
	default: return 0;
	}
}

FI_XPU_FUNC int fi_xpu_shm_op_ok(int op, int dt)
{
	int fp = dt == FI_FLOAT || dt == FI_DOUBLE;
	if (fi_xpu_shm_dt_size(dt) == 0 || op < 0 || op >= FI_ATOMIC_OP_LAST)
		return 0;
	if (fp && (op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP ||
		   op == FI_LOR || op == FI_LAND || op == FI_LXOR))
		return 0;
	return 1;
}

/* Values of any supported type, as a signed, unsigned or float number. */
struct fi_xpu_shm_num {
	int kind; /* 0 signed, 1 unsigned, 2 float */
	int64_t s;
	uint64_t u;
	double f;
};

FI_XPU_FUNC struct fi_xpu_shm_num fi_xpu_shm_decode(int dt, uint64_t bits)
{
	struct fi_xpu_shm_num n = {0, 0, 0, 0.0};
	union { uint32_t u; float f; } f32;
	union { uint64_t u; double f; } f64;
	switch (dt) {
	case FI_INT8: n.s = (int8_t)bits; break;
	case FI_INT16: n.s = (int16_t)bits; break;
	case FI_INT32: n.s = (int32_t)bits; break;
	case FI_INT64: n.s = (int64_t)bits; break;
	case FI_UINT8: n.kind = 1; n.u = (uint8_t)bits; break;
	case FI_UINT16: n.kind = 1; n.u = (uint16_t)bits; break;
	case FI_UINT32: n.kind = 1; n.u = (uint32_t)bits; break;
	case FI_UINT64: n.kind = 1; n.u = bits; break;
	case FI_FLOAT: n.kind = 2; f32.u = (uint32_t)bits; n.f = (double)f32.f; break;
	default: n.kind = 2; f64.u = bits; n.f = f64.f; break;
	}
	return n;
}

/* -1, 0, 1 as a compares to b. */
FI_XPU_FUNC int fi_xpu_shm_cmp(struct fi_xpu_shm_num a, struct fi_xpu_shm_num b)
{
	if (a.kind == 0)
		return a.s < b.s ? -1 : a.s > b.s;
	if (a.kind == 1)
		return a.u < b.u ? -1 : a.u > b.u;
	return a.f < b.f ? -1 : a.f > b.f;
}

FI_XPU_FUNC int fi_xpu_shm_truth(int dt, uint64_t bits)
{
	struct fi_xpu_shm_num n = fi_xpu_shm_decode(dt, bits);
	/* A float's truth as C's: not zero, NaN included (written without ==
	 * for builds with -Wfloat-equal). */
	return n.kind == 2 ? !(n.f >= 0.0 && n.f <= 0.0) : (n.kind == 0 ? n.s != 0 : n.u != 0);
}

FI_XPU_FUNC uint64_t fi_xpu_shm_mask(int dt)
{
	int sz = fi_xpu_shm_dt_size(dt);
	return sz == 8 ? ~0ULL : ((1ULL << (sz * 8)) - 1);
}

/* New bits for `old` under op; returns 0 when nothing is to be written. */
FI_XPU_FUNC int fi_xpu_shm_apply(int op, int dt, uint64_t old, uint64_t v, uint64_t cmp,
				 uint64_t *out)
{
	struct fi_xpu_shm_num a = fi_xpu_shm_decode(dt, old), b = fi_xpu_shm_decode(dt, v);
	struct fi_xpu_shm_num c = fi_xpu_shm_decode(dt, cmp);
	uint64_t r = old;
	union { uint32_t u; float f; } f32;
	union { uint64_t u; double f; } f64;
	switch (op) {
	case FI_MIN: r = fi_xpu_shm_cmp(b, a) < 0 ? v : old; break;
	case FI_MAX: r = fi_xpu_shm_cmp(b, a) > 0 ? v : old; break;
	case FI_SUM:
	case FI_PROD:
		if (a.kind == 2) {
			double x = op == FI_SUM ? a.f + b.f : a.f * b.f;
			if (dt == FI_FLOAT) {
				f32.f = (float)x;
				r = f32.u;
			} else {
				f64.f = x;
				r = f64.u;
			}
		} else {
			r = op == FI_SUM ? old + v : old * v;
		}
		break;
	case FI_LOR: r = fi_xpu_shm_truth(dt, old) || fi_xpu_shm_truth(dt, v); break;
	case FI_LAND: r = fi_xpu_shm_truth(dt, old) && fi_xpu_shm_truth(dt, v); break;
	case FI_LXOR: r = fi_xpu_shm_truth(dt, old) != fi_xpu_shm_truth(dt, v); break;
	case FI_BOR: r = old | v; break;
	case FI_BAND: r = old & v; break;
	case FI_BXOR: r = old ^ v; break;
	case FI_ATOMIC_READ: return 0;
	case FI_ATOMIC_WRITE: r = v; break;
	case FI_CSWAP: if (fi_xpu_shm_cmp(c, a) != 0) return 0; r = v; break;
	case FI_CSWAP_NE: if (fi_xpu_shm_cmp(c, a) == 0) return 0; r = v; break;
	case FI_CSWAP_LE: if (fi_xpu_shm_cmp(c, a) > 0) return 0; r = v; break;
	case FI_CSWAP_LT: if (fi_xpu_shm_cmp(c, a) >= 0) return 0; r = v; break;
	case FI_CSWAP_GE: if (fi_xpu_shm_cmp(c, a) < 0) return 0; r = v; break;
	case FI_CSWAP_GT: if (fi_xpu_shm_cmp(c, a) <= 0) return 0; r = v; break;
	case FI_MSWAP: r = (v & cmp) | (old & ~cmp); break;
	default: return 0;
	}
	*out = r & fi_xpu_shm_mask(dt);
	return 1;
}

FI_XPU_FUNC uint64_t fi_xpu_shm_get(const void *p, int sz)
{
	switch (sz) {
	case 1: return *(const uint8_t *)p;
	case 2: return *(const uint16_t *)p;
	case 4: return *(const uint32_t *)p;
	default: return *(const uint64_t *)p;
	}
}

FI_XPU_FUNC void fi_xpu_shm_put(void *p, int sz, uint64_t v)
{
	switch (sz) {
	case 1: *(uint8_t *)p = (uint8_t)v; break;
	case 2: *(uint16_t *)p = (uint16_t)v; break;
	case 4: *(uint32_t *)p = (uint32_t)v; break;
	default: *(uint64_t *)p = v; break;
	}
}

/* One element, atomic against every other atomic from any process: a
 * system-scope CAS loop on the naturally aligned word that holds it (the
 * 32-bit word around 8- and 16-bit elements). Returns the old bits. */
FI_XPU_FUNC uint64_t fi_xpu_shm_atomic1(unsigned char *p, int op, int dt, uint64_t v, uint64_t cmp)
{
	int sz = fi_xpu_shm_dt_size(dt);
	uint64_t old, nv;
	if (sz == 8) {
		uint64_t *w = (uint64_t *)(void *)p;
		old = fi_xpu_arch_load_u64(w, FI_XPU_ARCH_ACQUIRE, FI_XPU_SHM_SYS);
		for (;;) {
			uint64_t seen;
			if (!fi_xpu_shm_apply(op, dt, old, v, cmp, &nv))
				return old;
			seen = fi_xpu_arch_cas_u64(w, old, nv, FI_XPU_ARCH_ACQ_REL, FI_XPU_SHM_SYS);
			if (seen == old)
				return old;
			old = seen;
		}
	} else {
		uint32_t *w = (uint32_t *)(void *)((uintptr_t)p & ~(uintptr_t)3);
		unsigned shift = (unsigned)(((uintptr_t)p & 3) * 8);
		uint32_t emask = sz == 4 ? 0xffffffffu : (uint32_t)(((1u << (sz * 8)) - 1) << shift);
		uint32_t word = fi_xpu_arch_load_u32(w, FI_XPU_ARCH_ACQUIRE, FI_XPU_SHM_SYS);
		for (;;) {
			uint32_t seen, nw;
			old = (uint64_t)((word & emask) >> shift);
			if (!fi_xpu_shm_apply(op, dt, old, v, cmp, &nv))
				return old;
			nw = (word & ~emask) | (((uint32_t)nv << shift) & emask);
			seen = fi_xpu_arch_cas_u32(w, word, nw, FI_XPU_ARCH_ACQ_REL, FI_XPU_SHM_SYS);
			if (seen == word)
				return old;
			word = seen;
		}
	}
}

FI_XPU_FUNC int fi_xpu_shm_atomic_any(const struct fid_xpu_ep *hep, const void *buf, size_t count,
				      const void *compare, void *result, const void *dest_addr,
				      uint64_t addr, uint64_t key, int datatype, int op,
				      uint64_t flags, void *context, int scope)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	unsigned char *mem = FI_XPU_I_NULL;
	int64_t rc = 0;
	int sz = fi_xpu_shm_dt_size(datatype);
	int is_cmp = op >= FI_CSWAP && op <= FI_MSWAP;
	uint64_t need, cflags = FI_ATOMIC | (result ? FI_READ : FI_WRITE), old1 = 0;
	size_t i;
	FI_XPU_GROUP_ENTER_RANK(scope, rank);
	(void)flags;
	if (!ep)
		return -FI_EINVAL;
	if (!fi_xpu_shm_op_ok(op, datatype))
		return -FI_EOPNOTSUPP;
	if ((is_cmp && (!compare || !result)) || (op != FI_ATOMIC_READ && !buf && count) ||
	    (op == FI_ATOMIC_READ && !result))
		return -FI_EINVAL;
	if (addr % (uint64_t)sz || count > (size_t)-1 / (size_t)sz)
		return -FI_EINVAL;
	need = op == FI_ATOMIC_READ ? FI_REMOTE_READ
				    : (result ? FI_REMOTE_READ | FI_REMOTE_WRITE : FI_REMOTE_WRITE);
	if (rank == 0) {
		rc = fi_xpu_shm_target_of(ep, dest_addr, &t);
		if (rc == 0)
			rc = fi_xpu_shm_rkey(&t, addr, count * (size_t)sz, key, need, &mem);
		/* The registration's base comes from the target: the element
		 * must be aligned where it is mapped here, too. */
		if (rc == 0 && (uintptr_t)mem % (uintptr_t)sz)
			rc = -FI_EINVAL;
		if (t.ep && (rc == -FI_EACCES || rc == -FI_EINVAL)) {
			fi_xpu_shm_complete(ep, result ? FI_XPU_SHM_CNTR_READ : FI_XPU_SHM_CNTR_WRITE,
					    cflags, context, count * (size_t)sz, (int)rc);
			rc = 1;
		}
		if (rc == 0) {
			for (i = 0; i < count; i++) {
				size_t off = i * (size_t)sz;
				uint64_t v = buf ? fi_xpu_shm_get((const unsigned char *)buf + off, sz) : 0;
				uint64_t c = compare ? fi_xpu_shm_get((const unsigned char *)compare + off, sz) : 0;
				uint64_t old = fi_xpu_shm_atomic1(mem + off, op, datatype, v, c);
				if (result)
					fi_xpu_shm_put((unsigned char *)result + off, sz, old);
				old1 = old;
			}
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(fi_xpu_shm_tcntr(&t, op == FI_ATOMIC_READ ? &t.info->rem_read_cntr
										  : &t.info->rem_write_cntr),
				       1));
			fi_xpu_shm_complete(ep, result ? FI_XPU_SHM_CNTR_READ : FI_XPU_SHM_CNTR_WRITE,
					    cflags, context, count * (size_t)sz, 0);
		}
	}
	rc = fi_xpu_group_scope_bcast(scope, rc);
	/* Every work item gets a single fetched value, even when each passed
	 * a result buffer of its own. */
	if (rc == 0 && result && count == 1 && scope != FI_XPU_WORK_ITEM) {
		old1 = (uint64_t)fi_xpu_group_scope_bcast(scope, (int64_t)old1);
		if (rank != 0)
			fi_xpu_shm_put(result, sz, old1);
	}
	return rc == 1 ? 0 : (int)rc;
}

#endif /* FI_XPU_INCLUDED_SHM_SHM_ATOMIC_H */
