/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What the examples of two processes share (hello.c, pingpong.c and the
 * CUDA ones): CHECK, which ends the process on a failed fi_xpu call; the
 * provider FI_XPU_PROVIDER selects; a process's host objects, opened and
 * closed; and the swap of what the two tell each other over their
 * socketpair.
 */
#ifndef FI_XPU_EXAMPLE_H
#define FI_XPU_EXAMPLE_H

#include <fi_xpu.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(expr)                                                                  \
	do {                                                                         \
		int rc_ = (int)(expr);                                               \
		if (rc_ < 0) {                                                       \
			fprintf(stderr, "[%d] %s:%d: %s failed: %s\n", (int)getpid(), \
				__FILE__, __LINE__, #expr, fi_xpu_strerror(rc_));    \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

/* The name of the provider FI_XPU_PROVIDER selects (e.g. "ofi"), by
 * default shm. */
static inline const char *example_provider_name(void)
{
	const char *want = getenv("FI_XPU_PROVIDER");
	if (!want || !*want || strchr(want, ',') || want[0] == '^')
		want = "shm";
	return want;
}

/* That provider's entry in `info`; ends the process when it has none. */
static inline struct fi_xpu_info *example_provider(struct fi_xpu_info *info)
{
	const char *want = example_provider_name();
	struct fi_xpu_info *i;
	for (i = info; i && strcmp(i->prov_name, want) != 0; i = i->next)
		;
	if (!i) {
		fprintf(stderr, "the %s provider is not available\n", want);
		exit(1);
	}
	return i;
}

/* One process's host objects: the domain, an XPU context, an AV, a CQ and
 * an endpoint on the context, and the registration of its heap. */
struct example_objs {
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_mr *mr;
};

/* Opens the domain of the provider FI_XPU_PROVIDER selects, a context, an
 * AV (`aattr` NULL: the defaults), a CQ on the context, and an endpoint
 * bound to both (the CQ for transmit and receive) and enabled, whose name
 * goes to `name` (`*len` bytes of room; its length comes back). */
static inline void example_open(struct example_objs *o, const struct fi_xpu_ctx_open_attr *xattr,
				const struct fi_xpu_av_attr *aattr, struct fi_xpu_cq_attr *cattr,
				void *name, size_t *len)
{
	struct fi_xpu_info *info;
	struct fi_xpu_ep_attr eattr;

	memset(&eattr, 0, sizeof(eattr));
	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info));
	CHECK(fi_xpu_domain(example_provider(info), NULL, &o->dom, NULL));
	fi_xpu_freeinfo(info);
	CHECK(fi_xpu_ctx_open(o->dom, xattr, &o->ctx, NULL));
	CHECK(fi_xpu_av_open(o->dom, aattr, &o->av, NULL));
	cattr->xpu_ctx = o->ctx;
	CHECK(fi_xpu_cq_open(o->dom, cattr, &o->hcq, NULL));
	eattr.xpu_ctx = o->ctx;
	CHECK(fi_xpu_endpoint(o->dom, &eattr, &o->hep, NULL));
	CHECK(fi_xpu_ep_bind(o->hep, &o->av->fid, 0));
	CHECK(fi_xpu_ep_bind(o->hep, &o->hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_enable(o->hep));
	CHECK(fi_xpu_getname(o->hep, name, len));
}

/* Closes the objects and frees `heap` (memory of the context, registered
 * as `mr`), newest first. */
static inline void example_close(struct example_objs *o, void *heap)
{
	CHECK(fi_xpu_close(&o->mr->fid));
	CHECK(fi_xpu_free(o->ctx, heap));
	CHECK(fi_xpu_close(&o->hep->fid));
	CHECK(fi_xpu_close(&o->hcq->fid));
	CHECK(fi_xpu_close(&o->av->fid));
	CHECK(fi_xpu_close(&o->ctx->fid));
	CHECK(fi_xpu_close(&o->dom->fid));
}

/* Sends `len` bytes of `out` to the other process and reads as many
 * into `in`. */
static inline void xfer(int sock, const void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len || read(sock, in, len) != (ssize_t)len) {
		perror("socketpair");
		exit(1);
	}
}

#endif
