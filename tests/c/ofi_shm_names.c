/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The shared memory of ofi endpoints over libfabric's shm provider, and
 * what is left of a process that died with one open. argv[1]:
 *
 * "pid": files named as libfabric names them by default for this pid
 * (`<pid>:<uid>:<n>`, what a process of that pid that _exit()ed leaves)
 * do not stop this process's endpoint: fi_xpu_enable succeeds.
 *
 * "ours": files at the names the provider gives this process's endpoints
 * (`fi_xpu-<pid>-<start time>:<uid>:<n>`) make fi_xpu_enable fail with
 * -FI_EBUSY, and everything then closes with 0, the AV included (the
 * endpoint was closed before it).
 *
 * Prints "ofi_shm_names MODE: ok".
 */
#include "ofi_common.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define LEFT 8

static void name_of(char *buf, size_t len, int ours, int n)
{
	if (!ours) {
		snprintf(buf, len, "/%d:%d:%d", (int)getpid(), (int)getuid(), n);
		return;
	}
	char stat[1024], *p;
	FILE *f = fopen("/proc/self/stat", "r");
	EXPECT(f != NULL);
	size_t got = fread(stat, 1, sizeof(stat) - 1, f);
	fclose(f);
	stat[got] = 0;
	p = strrchr(stat, ')');
	EXPECT(p != NULL);
	/* Field 22 (start time); p + 2 starts field 3. */
	p += 2;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		EXPECT(p != NULL);
		p++;
	}
	snprintf(buf, len, "/fi_xpu-%d-%.*s:%d:%d", (int)getpid(), (int)strcspn(p, " "), p,
		 (int)getuid(), n);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "pid";
	int ours = strcmp(mode, "ours") == 0;
	struct ofi_objs o;
	struct fid_xpu_host_ep *hep;
	struct fi_xpu_ep_attr eattr = { 0 };
	char names[LEFT][128];

	for (int n = 0; n < LEFT; n++) {
		name_of(names[n], sizeof(names[n]), ours, n);
		int fd = shm_open(names[n], O_RDWR | O_CREAT | O_EXCL, 0600);
		EXPECT(fd >= 0);
		CHECK(ftruncate(fd, 4096));
		close(fd);
	}

	ofi_open_objs(&o, 16, 0);
	eattr.xpu_ctx = o.ctx;
	CHECK(fi_xpu_endpoint(o.dom, &eattr, &hep, NULL));
	CHECK(fi_xpu_ep_bind(hep, &o.av->fid, 0));
	CHECK(fi_xpu_ep_bind(hep, &o.hcq->fid, FI_TRANSMIT | FI_RECV));
	EXPECT_EQ(fi_xpu_enable(hep), ours ? -FI_EBUSY : 0);
	CHECK(fi_xpu_close(&hep->fid));
	ofi_close_objs(&o);
	/* libfabric may have removed the one it tripped on. */
	for (int n = 0; n < LEFT; n++)
		EXPECT(shm_unlink(names[n]) == 0 || errno == ENOENT);
	printf("ofi_shm_names %s: ok\n", mode);
	return 0;
}
