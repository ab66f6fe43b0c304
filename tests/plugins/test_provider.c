/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A provider plugin written only against <fi_xpu/provider.h>, the way an
 * out-of-tree provider is. It moves no data, but every entry point keeps real
 * state: the test suite drives the whole object model through it and checks
 * what comes back, and the device state blocks come from the core's memory
 * services, so those are exercised from a plugin too.
 *
 * Build variants (all with -D), so that one source yields every case the
 * loader must refuse:
 *   TP_NAME="x"          descriptor name (default "test")
 *   TP_PROV_ID=n         prov_id (default 200)
 *   TP_ABI_MAJOR=n       claimed ABI major
 *   TP_ABI_MINOR=n       claimed ABI minor
 *   TP_SHORT             descriptor size one entry point short
 *   TP_NO_INI            exports a misspelt entry symbol instead of fi_xpu_prov_ini
 *   TP_NULL_DESC         fi_xpu_prov_ini returns NULL
 *   TP_NULL_ENTRY=field  that entry point is left NULL
 *   TP_INIT_FAIL         init logs and fails with -FI_ENODEV, or with
 *                        -TP_INIT_ERR when that is defined (an FI_E* name)
 *   TP_MARK="path"       a constructor appends the name to that file, so a
 *                        test can tell whether the loader opened the file
 *   TP_MARK_ID           ... followed by the prov_id
 *   TP_NO_NOTE           no fi_xpu ELF note (a plugin built before it)
 *   TP_NOTE_PROV_ID=n    the note's prov_id, when it is to differ
 *   TP_CTOR_ATFORK_MS=n  a constructor sleeps n ms, then registers (empty)
 *                        fork handlers: a dlopen that lasts, and registers
 *                        handlers, while another thread may be forking
 *   TP_SLOW_HOST_CALLS   host reads of CQs and counters sleep inside the
 *                        provider, so that a close racing them is likely
 *   TP_PARAM             init defines the parameter "depth" (default "4")
 *                        through the core's registry, checks the registry's
 *                        error codes, and logs "depth: <value>" or
 *                        "depth: unset"; a failed check refuses init
 *
 * Whatever the variant, a CQ or counter closed while one of its host calls
 * is still inside the provider aborts the process with a message: the core
 * must never let that happen.
 */
#include <fi_xpu/provider.h>

#include "test_provider.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* TP_IFACES: the memory interfaces served (bits 1 << enum fi_hmem_iface);
 * memory tests of the vendor backends add theirs. */
#ifndef TP_IFACES
#define TP_IFACES (1ULL << FI_HMEM_SYSTEM)
#endif

#ifndef TP_NAME
#define TP_NAME "test"
#endif
#ifndef TP_PROV_ID
#define TP_PROV_ID 200
#endif
#ifndef TP_ABI_MAJOR
#define TP_ABI_MAJOR FI_XPU_PROV_ABI_MAJOR
#endif
#ifndef TP_ABI_MINOR
#define TP_ABI_MINOR FI_XPU_PROV_ABI_MINOR
#endif
#ifdef TP_SHORT
/* As if built against an older header that ended before ep_close. */
#define TP_DESC_SIZE offsetof(struct fi_xpu_prov_desc, ep_close)
#elif defined(TP_ABI_14)
/* As if built against the ABI 1.4 header, which ended at ep_close: the
 * core must not read `limits`, which this build still fills. */
#define TP_DESC_SIZE offsetof(struct fi_xpu_prov_desc, limits)
#else
#define TP_DESC_SIZE sizeof(struct fi_xpu_prov_desc)
#endif

#define TP_VERSION FI_XPU_VERSION(1, 2)
#define TP_STATE_ALIGN 64

/* The plugin's identity as an ELF note (struct fi_xpu_prov_note in a
 * section named .note.fi_xpu, which the linker puts in a PT_NOTE segment):
 * the core reads it from the file before dlopen runs any of this code. */
#ifndef TP_NOTE_PROV_ID
#define TP_NOTE_PROV_ID TP_PROV_ID
#endif
#ifndef TP_NO_NOTE
__attribute__((section(".note.fi_xpu"), used, aligned(4))) static const struct fi_xpu_prov_note
	tp_note = {
		.namesz = FI_XPU_PROV_NOTE_NAMESZ,
		.descsz = FI_XPU_PROV_NOTE_DESCSZ,
		.type_ = FI_XPU_PROV_NOTE_TYPE,
		.owner = "fi_xpu",
		.abi_major = TP_ABI_MAJOR,
		.abi_minor = TP_ABI_MINOR,
		.prov_id = TP_NOTE_PROV_ID,
		.version = TP_VERSION,
		.name = TP_NAME,
	};
#endif

#ifdef TP_CTOR_ATFORK_MS
__attribute__((constructor)) static void tp_ctor_atfork(void)
{
	struct timespec ts = { TP_CTOR_ATFORK_MS / 1000, (TP_CTOR_ATFORK_MS % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	pthread_atfork(NULL, NULL, NULL);
}
#endif

#ifdef TP_MARK
__attribute__((constructor)) static void tp_mark(void)
{
	FILE *f = fopen(TP_MARK, "a");
	if (f) {
#ifdef TP_MARK_ID
		fprintf(f, "%s %u\n", TP_NAME, (unsigned)TP_PROV_ID);
#else
		fputs(TP_NAME "\n", f);
#endif
		fclose(f);
	}
}
#endif

struct tp_prov {
	const struct fi_xpu_core *core;
	atomic_uint next_ep;
};

struct tp_mr;

struct tp_domain {
	struct tp_prov *prov;
	pthread_mutex_t lock; /* mrs, next_key */
	struct tp_mr *mrs;
	uint64_t next_key;
	atomic_int children;
};

struct tp_ctx {
	struct tp_domain *dom;
	enum fi_hmem_iface iface;
	uint64_t device;
	struct fid_xpu_host_ctx *core_ctx;
	atomic_int users;
};

struct tp_av_entry {
	bool used;
	uint8_t addr[TP_ADDRLEN];
};

struct tp_av {
	struct tp_domain *dom;
	pthread_mutex_t lock;
	struct tp_av_entry *entries;
	size_t count, cap;
};

struct tp_mr {
	struct tp_domain *dom;
	struct tp_mr *next;
	struct tp_mr_desc desc;
};

struct tp_cq {
	struct tp_domain *dom;
	struct tp_ctx *ctx; /* NULL: host CQ */
	struct tp_cq_state *state;
	atomic_int in_call; /* host calls inside the provider */
};

struct tp_cntr {
	struct tp_domain *dom;
	struct tp_ctx *ctx; /* NULL: host counter */
	struct tp_cntr_state *state;
	atomic_uint_least64_t value, err;
	atomic_int in_call; /* host calls inside the provider */
};

/* A host call of a CQ or counter enters and leaves through these. */
static void tp_call_enter(atomic_int *in_call)
{
	atomic_fetch_add(in_call, 1);
#ifdef TP_SLOW_HOST_CALLS
	usleep(200);
#endif
}

static void tp_call_leave(atomic_int *in_call)
{
	atomic_fetch_sub(in_call, 1);
}

static void tp_check_idle(atomic_int *in_call, const char *what)
{
	if (atomic_load(in_call) != 0) {
		fprintf(stderr, "test provider: %s closed while a host call is inside it\n",
			what);
		abort();
	}
}

struct tp_ep {
	struct tp_domain *dom;
	struct tp_ctx *ctx;
	struct tp_ep_state *state;
	struct tp_av *av;
	struct tp_cq *tx_cq, *rx_cq;
	struct tp_cntr *cntr;
};

static void tp_log(struct tp_prov *prov, int level, const char *msg)
{
	prov->core->log(level, TP_NAME, msg);
}

/* Device state lives in memory the core allocates for the context, exactly
 * as a GPU provider would place its queues in device memory. */
static int tp_state_alloc(struct tp_ctx *ctx, size_t size, void **out)
{
	const struct fi_xpu_core *core = ctx->dom->prov->core;
	void *addr = NULL;
	int ret = core->mem_alloc(ctx->core_ctx, size, TP_STATE_ALIGN, 0, &addr, NULL, NULL);
	if (ret)
		return ret;
	memset(addr, 0, size);
	*out = addr;
	return 0;
}

static int tp_state_free(struct tp_ctx *ctx, void *addr)
{
	int ret = ctx->dom->prov->core->mem_free(ctx->core_ctx, addr);
	if (ret) {
		char msg[96];
		snprintf(msg, sizeof(msg), "cannot free device state at %p: error %d", addr, ret);
		tp_log(ctx->dom->prov, FI_XPU_LOG_WARN, msg);
	}
	return ret;
}

#ifdef TP_PARAM
#define TP_PARAM_FAIL(what, got)                                                   \
	do {                                                                       \
		snprintf(msg, sizeof(msg), "param check failed: %s = %d", what, got); \
		core->log(FI_XPU_LOG_WARN, TP_NAME, msg);                          \
		return -FI_EINVAL;                                                 \
	} while (0)

/* Defines and reads a parameter through the core only, as every provider
 * must (no getenv here). */
static int tp_params(const struct fi_xpu_core *core)
{
	char msg[160], value[64], tiny[1];
	size_t len;
	int ret;

	if (core->size < offsetof(struct fi_xpu_core, param_get) + sizeof(core->param_get))
		return -FI_ENOSYS;
	ret = core->param_define(TP_NAME, "depth", "4", "queue depth of the test provider");
	if (ret != 0)
		TP_PARAM_FAIL("define depth", ret);
	ret = core->param_define(TP_NAME, "depth", "4", "queue depth of the test provider");
	if (ret != 0)
		TP_PARAM_FAIL("define depth again", ret);
	ret = core->param_define(TP_NAME, "depth", "5", "another default");
	if (ret != -FI_EALREADY)
		TP_PARAM_FAIL("define depth, other default", ret);
	ret = core->param_define(TP_NAME, "Bad-Name", "1", "x");
	if (ret != -FI_EINVAL)
		TP_PARAM_FAIL("define Bad-Name", ret);
	len = sizeof(value);
	ret = core->param_get(TP_NAME, "undefined", value, &len);
	if (ret != -FI_ENOENT)
		TP_PARAM_FAIL("get undefined", ret);
	len = sizeof(tiny);
	ret = core->param_get(TP_NAME, "depth", tiny, &len);
	if (ret == -FI_ENODATA) {
		core->log(FI_XPU_LOG_WARN, TP_NAME, "depth: unset");
		return 0;
	}
	if (ret != -FI_ETOOSMALL || len < 2)
		TP_PARAM_FAIL("get depth into one byte", ret);
	len = sizeof(value);
	ret = core->param_get(TP_NAME, "depth", value, &len);
	if (ret != 0)
		TP_PARAM_FAIL("get depth", ret);
	if (strlen(value) + 1 != len)
		TP_PARAM_FAIL("length of depth", (int)len);
	snprintf(msg, sizeof(msg), "depth: %s", value);
	core->log(FI_XPU_LOG_WARN, TP_NAME, msg);
	return 0;
}
#endif

static int tp_init(const struct fi_xpu_core *core, fi_xpu_prov_handle *out)
{
	/* The services used below must all be present in the core's table. */
	if (core->abi_major != FI_XPU_PROV_ABI_MAJOR ||
	    core->size < offsetof(struct fi_xpu_core, mem_export) + sizeof(core->mem_export))
		return -FI_ENOSYS;
#ifdef TP_INIT_FAIL
	core->log(FI_XPU_LOG_WARN, TP_NAME, "refusing to initialise (built with TP_INIT_FAIL)");
	(void)out;
#ifdef TP_INIT_ERR
	return -TP_INIT_ERR;
#else
	return -FI_ENODEV;
#endif
#else
#ifdef TP_PARAM
	int pret = tp_params(core);
	if (pret != 0)
		return pret;
#endif
	struct tp_prov *prov = calloc(1, sizeof(*prov));
	if (!prov)
		return -FI_ENOMEM;
	prov->core = core;
	atomic_init(&prov->next_ep, 0);
	*out = prov;
	return 0;
#endif
}

static void tp_fini(fi_xpu_prov_handle prov)
{
	free(prov);
}

static int tp_domain_open(fi_xpu_prov_handle prov, const struct fi_xpu_domain_attr *attr,
			  fi_xpu_prov_handle *out)
{
	if (attr->fabric_prov)
		return -FI_ENODATA; /* no underlying fabric to choose from */
	struct tp_domain *dom = calloc(1, sizeof(*dom));
	if (!dom)
		return -FI_ENOMEM;
	dom->prov = prov;
	pthread_mutex_init(&dom->lock, NULL);
	dom->next_key = 1;
	atomic_init(&dom->children, 0);
	*out = dom;
	return 0;
}

static int tp_domain_close(fi_xpu_prov_handle h)
{
	struct tp_domain *dom = h;
	if (atomic_load(&dom->children) != 0)
		return -FI_EBUSY;
	pthread_mutex_destroy(&dom->lock);
	free(dom);
	return 0;
}

static int tp_ctx_open(fi_xpu_prov_handle h, const struct fi_xpu_prov_ctx_args *args,
		       fi_xpu_prov_handle *out)
{
	struct tp_domain *dom = h;
	if (!(TP_IFACES & (1ULL << args->iface)))
		return -FI_EOPNOTSUPP;
	if (!args->core_ctx)
		return -FI_EINVAL;
	struct tp_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -FI_ENOMEM;
	ctx->dom = dom;
	ctx->iface = args->iface;
	ctx->device = args->device;
	ctx->core_ctx = args->core_ctx;
	atomic_init(&ctx->users, 0);
	atomic_fetch_add(&dom->children, 1);
	*out = ctx;
	return 0;
}

static int tp_ctx_query(fi_xpu_prov_handle h, struct fi_xpu_ctx_info *attr)
{
	(void)h;
	attr->caps = FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR;
	attr->av_addr_size = TP_ADDRLEN;
	attr->mr_desc_size = sizeof(struct tp_mr_desc);
	/* No work-request capability: kernels cannot build raw descriptors. */
	attr->max_tx_wr_desc_size = 0;
	attr->max_rx_wr_desc_size = 0;
	return 0;
}

static int tp_ctx_close(fi_xpu_prov_handle h)
{
	struct tp_ctx *ctx = h;
	if (atomic_load(&ctx->users) != 0)
		return -FI_EBUSY;
	atomic_fetch_sub(&ctx->dom->children, 1);
	free(ctx);
	return 0;
}

static int tp_av_open(fi_xpu_prov_handle h, const struct fi_xpu_av_attr *attr,
		      fi_xpu_prov_handle *out)
{
	struct tp_domain *dom = h;
	struct tp_av *av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->cap = attr->count ? attr->count : 8;
	av->entries = calloc(av->cap, sizeof(*av->entries));
	if (!av->entries) {
		free(av);
		return -FI_ENOMEM;
	}
	av->dom = dom;
	pthread_mutex_init(&av->lock, NULL);
	atomic_fetch_add(&dom->children, 1);
	*out = av;
	return 0;
}

static int tp_av_insert(fi_xpu_prov_handle h, const void *addr, fi_addr_t *fi_addr,
			uint64_t flags)
{
	struct tp_av *av = h;
	if (flags)
		return -FI_EBADFLAGS;
	pthread_mutex_lock(&av->lock);
	if (av->count == av->cap) {
		size_t cap = av->cap * 2;
		struct tp_av_entry *e = realloc(av->entries, cap * sizeof(*e));
		if (!e) {
			pthread_mutex_unlock(&av->lock);
			return -FI_ENOMEM;
		}
		memset(e + av->cap, 0, (cap - av->cap) * sizeof(*e));
		av->entries = e;
		av->cap = cap;
	}
	struct tp_av_entry *e = &av->entries[av->count];
	e->used = true;
	memcpy(e->addr, addr, TP_ADDRLEN);
	*fi_addr = av->count++;
	pthread_mutex_unlock(&av->lock);
	return 0;
}

/* With the AV's lock held: the entry for fi_addr, or NULL. */
static struct tp_av_entry *tp_av_entry(struct tp_av *av, fi_addr_t fi_addr)
{
	if (fi_addr >= av->count || !av->entries[fi_addr].used)
		return NULL;
	return &av->entries[fi_addr];
}

static int tp_av_remove(fi_xpu_prov_handle h, fi_addr_t fi_addr, uint64_t flags)
{
	struct tp_av *av = h;
	if (flags)
		return -FI_EBADFLAGS;
	pthread_mutex_lock(&av->lock);
	struct tp_av_entry *e = tp_av_entry(av, fi_addr);
	if (e)
		e->used = false;
	pthread_mutex_unlock(&av->lock);
	return e ? 0 : -FI_EINVAL;
}

static int tp_av_lookup(fi_xpu_prov_handle h, fi_addr_t fi_addr, fi_xpu_prov_handle ctx,
			void *buf, size_t *len, uint64_t flags)
{
	struct tp_av *av = h;
	(void)ctx; /* every context of this provider sees the same bytes */
	if (flags)
		return -FI_EBADFLAGS;
	pthread_mutex_lock(&av->lock);
	struct tp_av_entry *e = tp_av_entry(av, fi_addr);
	int ret = 0;
	if (!e) {
		ret = -FI_EINVAL;
	} else if (*len < TP_ADDRLEN) {
		*len = TP_ADDRLEN;
		ret = -FI_ETOOSMALL;
	} else {
		memcpy(buf, e->addr, TP_ADDRLEN);
		*len = TP_ADDRLEN;
	}
	pthread_mutex_unlock(&av->lock);
	return ret;
}

static int tp_av_close(fi_xpu_prov_handle h)
{
	struct tp_av *av = h;
	atomic_fetch_sub(&av->dom->children, 1);
	pthread_mutex_destroy(&av->lock);
	free(av->entries);
	free(av);
	return 0;
}

/* With the domain's lock held. */
static bool tp_key_used(struct tp_domain *dom, uint64_t key)
{
	for (struct tp_mr *m = dom->mrs; m; m = m->next)
		if (m->desc.key == key)
			return true;
	return false;
}

/* A requested key of 0 lets the provider choose. */
static int tp_mr_reg(fi_xpu_prov_handle h, fi_xpu_prov_handle ctx,
		     const struct fi_xpu_prov_mr_args *args, fi_xpu_prov_handle *out)
{
	struct tp_domain *dom = h;
	if (ctx && args->iface != FI_HMEM_SYSTEM)
		return -FI_EOPNOTSUPP;
	struct tp_mr *mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	mr->dom = dom;
	mr->desc.addr = (uint64_t)(uintptr_t)args->buf;
	mr->desc.len = args->len;
	pthread_mutex_lock(&dom->lock);
	uint64_t key = args->requested_key;
	if (key) {
		if (tp_key_used(dom, key)) {
			pthread_mutex_unlock(&dom->lock);
			free(mr);
			return -FI_ENOKEY;
		}
	} else {
		do
			key = dom->next_key++;
		while (key == 0 || tp_key_used(dom, key));
	}
	mr->desc.key = key;
	mr->next = dom->mrs;
	dom->mrs = mr;
	pthread_mutex_unlock(&dom->lock);
	atomic_fetch_add(&dom->children, 1);
	*out = mr;
	return 0;
}

static int tp_mr_key(fi_xpu_prov_handle h, uint64_t *key)
{
	struct tp_mr *mr = h;
	*key = mr->desc.key;
	return 0;
}

static int tp_mr_desc(fi_xpu_prov_handle h, fi_xpu_prov_handle ctx, void *buf, size_t *len,
		      uint64_t flags)
{
	struct tp_mr *mr = h;
	(void)ctx;
	if (flags)
		return -FI_EBADFLAGS;
	if (*len < sizeof(mr->desc)) {
		*len = sizeof(mr->desc);
		return -FI_ETOOSMALL;
	}
	memcpy(buf, &mr->desc, sizeof(mr->desc));
	*len = sizeof(mr->desc);
	return 0;
}

static int tp_mr_close(fi_xpu_prov_handle h)
{
	struct tp_mr *mr = h;
	struct tp_domain *dom = mr->dom;
	pthread_mutex_lock(&dom->lock);
	for (struct tp_mr **p = &dom->mrs; *p; p = &(*p)->next) {
		if (*p == mr) {
			*p = mr->next;
			break;
		}
	}
	pthread_mutex_unlock(&dom->lock);
	atomic_fetch_sub(&dom->children, 1);
	free(mr);
	return 0;
}

static size_t tp_cq_entry_size(int format)
{
	switch (format) {
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return sizeof(struct fi_cq_entry);
	}
}

static int tp_cq_open(fi_xpu_prov_handle h, fi_xpu_prov_handle ctx_h,
		      const struct fi_xpu_cq_attr *attr, fi_xpu_prov_handle *out)
{
	struct tp_domain *dom = h;
	struct tp_ctx *ctx = ctx_h;
	struct tp_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->dom = dom;
	cq->ctx = ctx;
	if (ctx) {
		size_t n = attr->size ? attr->size : TP_CQ_DEFAULT_SIZE;
		size_t esize = tp_cq_entry_size(attr->format);
		void *state;
		int ret = tp_state_alloc(ctx, sizeof(*cq->state) + n * esize, &state);
		if (ret) {
			free(cq);
			return ret;
		}
		cq->state = state;
		cq->state->size = n;
		cq->state->entry_size = esize;
		cq->state->magic = TP_MAGIC_CQ;
		atomic_fetch_add(&ctx->users, 1);
	}
	atomic_fetch_add(&dom->children, 1);
	*out = cq;
	return 0;
}

static int tp_cq_export(fi_xpu_prov_handle h, uint64_t flags, struct fid_xpu *out)
{
	struct tp_cq *cq = h;
	if (flags)
		return -FI_EBADFLAGS;
	if (!cq->ctx)
		return -FI_EOPNOTSUPP;
	out->fclass = FI_CLASS_CQ;
	out->prov_id = TP_PROV_ID;
	out->prov_ctx = (uint64_t)(uintptr_t)cq->state;
	return 0;
}

/* Nothing in this provider produces completions, so a host CQ stays empty. */
static ptrdiff_t tp_cq_host_read(fi_xpu_prov_handle h, void *buf, size_t count,
				 fi_addr_t *src_addr)
{
	struct tp_cq *cq = h;
	(void)buf;
	(void)count;
	(void)src_addr;
	tp_call_enter(&cq->in_call);
	ptrdiff_t ret = cq->ctx ? -FI_EOPNOTSUPP : -FI_EAGAIN;
	tp_call_leave(&cq->in_call);
	return ret;
}

static ptrdiff_t tp_cq_host_readerr(fi_xpu_prov_handle h, struct fi_cq_err_entry *buf,
				    uint64_t flags)
{
	struct tp_cq *cq = h;
	(void)buf;
	if (flags)
		return -FI_EBADFLAGS;
	return cq->ctx ? -FI_EOPNOTSUPP : -FI_EAGAIN;
}

static int tp_cq_close(fi_xpu_prov_handle h)
{
	struct tp_cq *cq = h;
	tp_check_idle(&cq->in_call, "CQ");
	if (cq->ctx) {
		int ret = tp_state_free(cq->ctx, cq->state);
		if (ret)
			return ret;
		atomic_fetch_sub(&cq->ctx->users, 1);
	}
	atomic_fetch_sub(&cq->dom->children, 1);
	free(cq);
	return 0;
}

static int tp_cntr_open(fi_xpu_prov_handle h, fi_xpu_prov_handle ctx_h,
			const struct fi_xpu_cntr_attr *attr, fi_xpu_prov_handle *out)
{
	struct tp_domain *dom = h;
	struct tp_ctx *ctx = ctx_h;
	(void)attr;
	struct tp_cntr *cntr = calloc(1, sizeof(*cntr));
	if (!cntr)
		return -FI_ENOMEM;
	cntr->dom = dom;
	cntr->ctx = ctx;
	atomic_init(&cntr->value, 0);
	atomic_init(&cntr->err, 0);
	if (ctx) {
		void *state;
		int ret = tp_state_alloc(ctx, sizeof(*cntr->state), &state);
		if (ret) {
			free(cntr);
			return ret;
		}
		cntr->state = state;
		cntr->state->magic = TP_MAGIC_CNTR;
		atomic_fetch_add(&ctx->users, 1);
	}
	atomic_fetch_add(&dom->children, 1);
	*out = cntr;
	return 0;
}

static int tp_cntr_export(fi_xpu_prov_handle h, uint64_t flags, struct fid_xpu *out)
{
	struct tp_cntr *cntr = h;
	if (flags)
		return -FI_EBADFLAGS;
	if (!cntr->ctx)
		return -FI_EOPNOTSUPP;
	out->fclass = FI_CLASS_CNTR;
	out->prov_id = TP_PROV_ID;
	out->prov_ctx = (uint64_t)(uintptr_t)cntr->state;
	return 0;
}

static int tp_cntr_host_read(fi_xpu_prov_handle h, uint64_t *value, uint64_t *err)
{
	struct tp_cntr *cntr = h;
	tp_call_enter(&cntr->in_call);
	int ret = -FI_EOPNOTSUPP;
	if (!cntr->ctx) {
		*value = atomic_load(&cntr->value);
		*err = atomic_load(&cntr->err);
		ret = 0;
	}
	tp_call_leave(&cntr->in_call);
	return ret;
}

static int tp_cntr_host_update(fi_xpu_prov_handle h, uint32_t how, uint64_t value)
{
	struct tp_cntr *cntr = h;
	if (cntr->ctx)
		return -FI_EOPNOTSUPP;
	atomic_uint_least64_t *target = (how & FI_XPU_CNTR_ERR) ? &cntr->err : &cntr->value;
	switch (how & ~(uint32_t)FI_XPU_CNTR_ERR) {
	case FI_XPU_CNTR_ADD:
		atomic_fetch_add(target, value);
		return 0;
	case FI_XPU_CNTR_SET:
		atomic_store(target, value);
		return 0;
	default:
		return -FI_EINVAL;
	}
}

static int tp_cntr_close(fi_xpu_prov_handle h)
{
	struct tp_cntr *cntr = h;
	tp_check_idle(&cntr->in_call, "counter");
	if (cntr->ctx) {
		int ret = tp_state_free(cntr->ctx, cntr->state);
		if (ret)
			return ret;
		atomic_fetch_sub(&cntr->ctx->users, 1);
	}
	atomic_fetch_sub(&cntr->dom->children, 1);
	free(cntr);
	return 0;
}

static int tp_ep_open(fi_xpu_prov_handle h, fi_xpu_prov_handle ctx_h,
		      const struct fi_xpu_ep_attr *attr, fi_xpu_prov_handle *out)
{
	struct tp_domain *dom = h;
	struct tp_ctx *ctx = ctx_h;
	(void)attr;
	struct tp_ep *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	void *state;
	int ret = tp_state_alloc(ctx, sizeof(*ep->state), &state);
	if (ret) {
		free(ep);
		return ret;
	}
	ep->dom = dom;
	ep->ctx = ctx;
	ep->state = state;
	ep->state->magic = TP_MAGIC_EP;
	ep->state->name.magic = TP_NAME_MAGIC;
	ep->state->name.prov_id = TP_PROV_ID;
	ep->state->name.pid = (uint32_t)getpid();
	ep->state->name.seq = atomic_fetch_add(&dom->prov->next_ep, 1);
	atomic_fetch_add(&ctx->users, 1);
	atomic_fetch_add(&dom->children, 1);
	*out = ep;
	return 0;
}

static int tp_ep_bind(fi_xpu_prov_handle h, size_t fclass, fi_xpu_prov_handle obj,
		      uint64_t flags)
{
	struct tp_ep *ep = h;
	if (ep->state->enabled)
		return -FI_EOPBADSTATE;
	switch (fclass) {
	case FI_CLASS_AV:
		if (ep->av)
			return -FI_EINVAL;
		ep->av = obj;
		return 0;
	case FI_CLASS_CQ: {
		struct tp_cq *cq = obj;
		if (cq->ctx && cq->ctx != ep->ctx)
			return -FI_EINVAL;
		if (!(flags & (FI_TRANSMIT | FI_RECV)))
			return -FI_EBADFLAGS;
		if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq))
			return -FI_EINVAL;
		if (flags & FI_TRANSMIT)
			ep->tx_cq = cq;
		if (flags & FI_RECV)
			ep->rx_cq = cq;
		return 0;
	}
	case FI_CLASS_CNTR: {
		struct tp_cntr *cntr = obj;
		if (cntr->ctx && cntr->ctx != ep->ctx)
			return -FI_EINVAL;
		if (ep->cntr)
			return -FI_EINVAL;
		ep->cntr = cntr;
		return 0;
	}
	default:
		return -FI_EINVAL;
	}
}

static uint64_t tp_cq_state_addr(struct tp_cq *cq)
{
	return cq ? (uint64_t)(uintptr_t)cq->state : 0;
}

/* A kernel needs somewhere to report completions before it may post. */
static int tp_ep_enable(fi_xpu_prov_handle h)
{
	struct tp_ep *ep = h;
	if (ep->state->enabled)
		return -FI_EOPBADSTATE;
	if (!ep->tx_cq && !ep->rx_cq)
		return -FI_ENOCQ;
	ep->state->tx_cq = tp_cq_state_addr(ep->tx_cq);
	ep->state->rx_cq = tp_cq_state_addr(ep->rx_cq);
	ep->state->cntr = ep->cntr ? (uint64_t)(uintptr_t)ep->cntr->state : 0;
	ep->state->enabled = 1;
	return 0;
}

static int tp_ep_getname(fi_xpu_prov_handle h, void *addr, size_t *len)
{
	struct tp_ep *ep = h;
	if (*len < sizeof(ep->state->name)) {
		*len = sizeof(ep->state->name);
		return -FI_ETOOSMALL;
	}
	memcpy(addr, &ep->state->name, sizeof(ep->state->name));
	*len = sizeof(ep->state->name);
	return 0;
}

static int tp_ep_export(fi_xpu_prov_handle h, uint64_t flags, struct fid_xpu *out)
{
	struct tp_ep *ep = h;
	if (flags)
		return -FI_EBADFLAGS;
	if (!ep->state->enabled)
		return -FI_EOPBADSTATE;
	out->fclass = FI_CLASS_EP;
	out->prov_id = TP_PROV_ID;
	out->prov_ctx = (uint64_t)(uintptr_t)ep->state;
	return 0;
}

static int tp_ep_close(fi_xpu_prov_handle h)
{
	struct tp_ep *ep = h;
	int ret = tp_state_free(ep->ctx, ep->state);
	if (ret)
		return ret;
	atomic_fetch_sub(&ep->ctx->users, 1);
	atomic_fetch_sub(&ep->dom->children, 1);
	free(ep);
	return 0;
}

/* Not const: the TP_NULL_ENTRY variant clears one field before handing it out. */
static struct fi_xpu_prov_desc tp_desc = {
	.abi_major = TP_ABI_MAJOR,
	.abi_minor = TP_ABI_MINOR,
	.size = TP_DESC_SIZE,
	.name = TP_NAME,
	.version = TP_VERSION,
	.prov_id = TP_PROV_ID,
	.caps = FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR,
	.ifaces = TP_IFACES,
	.addrlen = TP_ADDRLEN,
	.init = tp_init,
	.fini = tp_fini,
	.domain_open = tp_domain_open,
	.domain_close = tp_domain_close,
	.ctx_open = tp_ctx_open,
	.ctx_query = tp_ctx_query,
	.ctx_close = tp_ctx_close,
	.av_open = tp_av_open,
	.av_insert = tp_av_insert,
	.av_remove = tp_av_remove,
	.av_lookup = tp_av_lookup,
	.av_close = tp_av_close,
	.mr_reg = tp_mr_reg,
	.mr_key = tp_mr_key,
	.mr_desc = tp_mr_desc,
	.mr_close = tp_mr_close,
	.cq_open = tp_cq_open,
	.cq_export = tp_cq_export,
	.cq_host_read = tp_cq_host_read,
	.cq_host_readerr = tp_cq_host_readerr,
	.cq_close = tp_cq_close,
	.cntr_open = tp_cntr_open,
	.cntr_export = tp_cntr_export,
	.cntr_host_read = tp_cntr_host_read,
	.cntr_host_update = tp_cntr_host_update,
	.cntr_close = tp_cntr_close,
	.ep_open = tp_ep_open,
	.ep_bind = tp_ep_bind,
	.ep_enable = tp_ep_enable,
	.ep_getname = tp_ep_getname,
	.ep_export = tp_ep_export,
	.ep_close = tp_ep_close,
	.limits = { .cq_size = 4096, .rx_depth = 32 },
};

#ifdef TP_NO_INI
/* The misspelling a plugin author could make: the loader must refuse it. */
#define TP_INI_SYMBOL fi_xpu_prov_init
#else
#define TP_INI_SYMBOL fi_xpu_prov_ini
#endif

__attribute__((visibility("default"))) const struct fi_xpu_prov_desc *TP_INI_SYMBOL(void);

const struct fi_xpu_prov_desc *TP_INI_SYMBOL(void)
{
#ifdef TP_NULL_ENTRY
	tp_desc.TP_NULL_ENTRY = NULL;
#endif
#ifdef TP_NULL_DESC
	(void)tp_desc;
	return NULL;
#else
	return &tp_desc;
#endif
}
