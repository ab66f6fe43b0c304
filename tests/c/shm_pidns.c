/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * shm peers in two pid namespaces (same uid, same network namespace, as
 * containers of one pod): `shm_pidns ROLE DIR`, ROLE "a" or "b", the two
 * started together, one of them in a pid namespace of its own. Each opens
 * an shm endpoint, leaves its name in DIR/ROLE.name, inserts the other's
 * and prints "shm_pidns ROLE: av_insert = CODE"; both wait for the other
 * to finish before closing.
 */
#include <fi_xpu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static void put_file(const char *dir, const char *role, const char *what, const void *buf,
		     size_t len)
{
	char tmp[4096], path[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s/%s.%s.tmp", dir, role, what);
	snprintf(path, sizeof(path), "%s/%s.%s", dir, role, what);
	f = fopen(tmp, "wb");
	CHECK(f != NULL);
	CHECK(fwrite(buf, 1, len, f) == len);
	CHECK(fclose(f) == 0);
	CHECK(rename(tmp, path) == 0);
}

/* Waits up to 20 s for DIR/ROLE.WHAT; returns its length. */
static size_t get_file(const char *dir, const char *role, const char *what, void *buf,
		       size_t max)
{
	char path[4096];
	FILE *f = NULL;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, role, what);
	for (int i = 0; i < 2000 && !(f = fopen(path, "rb")); i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	CHECK(f != NULL);
	n = fread(buf, 1, max, f);
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	CHECK(argc == 3);
	const char *role = argv[1], *dir = argv[2];
	const char *other = strcmp(role, "a") == 0 ? "b" : "a";
	struct fi_xpu_info *info, *i;
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_ep *hep;
	struct fi_xpu_ctx_open_attr xattr = { FI_HMEM_SYSTEM, 0, NULL };
	struct fi_xpu_cq_attr cattr;
	struct fi_xpu_ep_attr eattr;
	uint8_t name[256], peer[256];
	size_t len = sizeof(name);
	fi_addr_t fa;
	int r;

	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info) == 0);
	for (i = info; i && strcmp(i->prov_name, "shm") != 0; i = i->next)
		;
	CHECK(i != NULL);
	CHECK(fi_xpu_domain(i, NULL, &dom, NULL) == 0);
	fi_xpu_freeinfo(info);
	CHECK(fi_xpu_ctx_open(dom, &xattr, &ctx, NULL) == 0);
	CHECK(fi_xpu_av_open(dom, NULL, &av, NULL) == 0);
	memset(&cattr, 0, sizeof(cattr));
	cattr.size = 16;
	cattr.xpu_ctx = ctx;
	CHECK(fi_xpu_cq_open(dom, &cattr, &hcq, NULL) == 0);
	memset(&eattr, 0, sizeof(eattr));
	eattr.xpu_ctx = ctx;
	CHECK(fi_xpu_endpoint(dom, &eattr, &hep, NULL) == 0);
	CHECK(fi_xpu_ep_bind(hep, &av->fid, 0) == 0);
	CHECK(fi_xpu_ep_bind(hep, &hcq->fid, FI_TRANSMIT | FI_RECV) == 0);
	CHECK(fi_xpu_enable(hep) == 0);
	CHECK(fi_xpu_getname(hep, name, &len) == 0);
	put_file(dir, role, "name", name, len);
	CHECK(get_file(dir, other, "name", peer, sizeof(peer)) == len);
	r = fi_xpu_av_insert(av, peer, 1, &fa, 0, NULL);
	printf("shm_pidns %s: av_insert = %d\n", role, r);
	fflush(stdout);
	put_file(dir, role, "done", "", 0);
	(void)get_file(dir, other, "done", peer, sizeof(peer));
	CHECK(fi_xpu_close(&hep->fid) == 0);
	CHECK(fi_xpu_close(&hcq->fid) == 0);
	CHECK(fi_xpu_close(&av->fid) == 0);
	CHECK(fi_xpu_close(&ctx->fid) == 0);
	CHECK(fi_xpu_close(&dom->fid) == 0);
	return 0;
}
