/*
 * Exportable memory shared between two processes through fi_xpu_alloc and
 * fi_xpu_import with FI_XPU_IMPORT_DMABUF, once with the built-in
 * FI_HMEM_SYSTEM backend and once with application memory callbacks (both
 * the current struct fi_xpu_mem_ops and its first, shorter version). Then a
 * hostile exporter: memory it got from fi_xpu_alloc cannot be resized, and
 * the descriptors it makes itself are refused unless sealed against
 * shrinking (-FI_EPERM) and long enough (-FI_EINVAL), so that its
 * ftruncate can never make the importer take SIGBUS.
 *
 * usage: dmabuf_share <provider-name>
 */
#include <fi_xpu.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "expect.h"

#define SIZE (1u << 20)

/* Application memory callbacks: memfd-backed, counting their calls. */
static int calls_alloc, calls_import, calls_unimport, calls_free;

static int app_alloc(uint64_t device, uint64_t size, uint64_t alignment,
		     uint64_t flags, void **addr, int *fd, uint64_t *offset)
{
	(void)device;
	(void)alignment;
	int mfd = memfd_create("app", MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, (off_t)size) != 0)
		return -errno;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*addr = p;
	if (flags & FI_XPU_ALLOC_DMABUF) {
		*fd = mfd;
		*offset = 0;
	} else {
		close(mfd);
	}
	calls_alloc++;
	return 0;
}

static int app_import(uint64_t device, void *host_addr, int fd,
		      uint64_t offset, uint64_t size, uint64_t flags,
		      void **dev_addr)
{
	(void)device;
	calls_import++;
	if (!(flags & FI_XPU_IMPORT_DMABUF)) {
		*dev_addr = host_addr;
		return 0;
	}
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       (off_t)offset);
	if (p == MAP_FAILED)
		return -errno;
	*dev_addr = p;
	return 0;
}

static int app_unimport(uint64_t device, void *dev_addr)
{
	(void)device;
	calls_unimport++;
	return munmap(dev_addr, SIZE) == 0 ? 0 : -errno;
}

static void app_free(uint64_t device, void *addr)
{
	(void)device;
	calls_free++;
	munmap(addr, SIZE);
}

/* The first version of struct fi_xpu_mem_ops: everything through `free`. */
struct app_ops_v1 {
	size_t size;
	int (*alloc)(uint64_t, uint64_t, uint64_t, uint64_t, void **, int *,
		     uint64_t *);
	int (*import)(uint64_t, void *, int, uint64_t, uint64_t, uint64_t,
		      void **);
	int (*unimport)(uint64_t, void *);
	void (*free)(uint64_t, void *);
};

/* The callbacks, the same in both versions of the struct. */
#define APP_CALLBACKS \
	.alloc = app_alloc, .import = app_import, .unimport = app_unimport, .free = app_free

static struct fi_xpu_mem_ops ops_current = {
	.size = sizeof(struct fi_xpu_mem_ops),
	APP_CALLBACKS,
	.export_dmabuf = NULL,
};

static struct app_ops_v1 ops_v1 = { .size = sizeof(struct app_ops_v1), APP_CALLBACKS };

static struct fi_xpu_info *provider(const char *name)
{
	struct fi_xpu_info hints;
	memset(&hints, 0, sizeof(hints));
	hints.prov_name = (char *)name;
	struct fi_xpu_info *info = NULL;
	REQUIRE(fi_xpu_getinfo(FI_XPU_VERSION(FI_XPU_MAJOR_VERSION, FI_XPU_MINOR_VERSION),
			     &hints, 0, &info), 0);
	return info;
}

static void open_ctx(struct fi_xpu_info *info, struct fi_xpu_mem_ops *ops,
		     struct fid_xpu_domain **dom, struct fid_xpu_host_ctx **ctx)
{
	struct fi_xpu_ctx_open_attr attr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = ops };
	REQUIRE(fi_xpu_domain(info, NULL, dom, NULL), 0);
	REQUIRE(fi_xpu_ctx_open(*dom, &attr, ctx, NULL), 0);
}

static void send_fd(int sock, int fd, uint64_t offset)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &offset, .iov_len = sizeof(offset) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctrl, .msg_controllen = sizeof(ctrl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	REQUIRE(sendmsg(sock, &msg, 0), (long long)sizeof(offset));
}

static int recv_fd(int sock, uint64_t *offset)
{
	char ctrl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = offset, .iov_len = sizeof(*offset) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctrl, .msg_controllen = sizeof(ctrl) };
	REQUIRE(recvmsg(sock, &msg, 0), (long long)sizeof(*offset));
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS) {
		fprintf(stderr, "no fd received\n");
		exit(1);
	}
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* Child: import the parent's memory, check its bytes, answer in the second half. */
static int child(const char *prov, struct fi_xpu_mem_ops *ops, int sock)
{
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fi_xpu_info *info = provider(prov);
	open_ctx(info, ops, &dom, &ctx);
	uint64_t offset;
	int fd = recv_fd(sock, &offset);
	void *dev = NULL;

	REQUIRE(fi_xpu_import(ctx, NULL, fd, offset, SIZE, 0, &dev), -FI_EINVAL);
	REQUIRE(fi_xpu_import(ctx, NULL, -1, offset, SIZE, FI_XPU_IMPORT_DMABUF, &dev), -FI_EBADF);
	REQUIRE(dev == NULL, 1);
	REQUIRE(fi_xpu_import(ctx, NULL, fd, offset, SIZE, FI_XPU_IMPORT_DMABUF, &dev), 0);

	unsigned char *p = dev;
	for (size_t i = 0; i < SIZE / 2; i++)
		REQUIRE(p[i], (unsigned char)(i * 7 + 1));
	for (size_t i = SIZE / 2; i < SIZE; i++)
		p[i] = (unsigned char)(i * 13 + 5);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	REQUIRE(write(sock, "k", 1), 1);

	REQUIRE(fi_xpu_unimport(ctx, dev), 0);
	REQUIRE(fi_xpu_unimport(ctx, dev), -FI_EINVAL);
	close(fd);
	REQUIRE(fi_xpu_close(&ctx->fid), 0);
	REQUIRE(fi_xpu_close(&dom->fid), 0);
	fi_xpu_freeinfo(info);

	return 0;
}

static void share(const char *prov, struct fi_xpu_mem_ops *ops, const char *what)
{
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fi_xpu_info *info = provider(prov);
	open_ctx(info, ops, &dom, &ctx);

	void *addr = NULL;
	int fd = -1;
	uint64_t offset = 1;
	REQUIRE(fi_xpu_alloc(ctx, SIZE, 4096, FI_XPU_ALLOC_DMABUF, &addr, &fd, &offset), 0);
	REQUIRE(fd >= 0, 1);
	REQUIRE(offset, 0);
	unsigned char *p = addr;
	for (size_t i = 0; i < SIZE / 2; i++)
		p[i] = (unsigned char)(i * 7 + 1);

	int sv[2];
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		exit(child(prov, ops, sv[1]));
	}
	close(sv[1]);
	send_fd(sv[0], fd, offset);
	char ack;
	REQUIRE(read(sv[0], &ack, 1), 1);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (size_t i = SIZE / 2; i < SIZE; i++)
		REQUIRE(p[i], (unsigned char)(i * 13 + 5));
	int status = 0;
	REQUIRE(waitpid(pid, &status, 0), pid);
	REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, 1);
	close(sv[0]);
	close(fd);

	REQUIRE(fi_xpu_free(ctx, addr), 0);
	REQUIRE(fi_xpu_free(ctx, addr), -FI_EINVAL);
	REQUIRE(fi_xpu_close(&ctx->fid), 0);
	REQUIRE(fi_xpu_close(&dom->fid), 0);
	fi_xpu_freeinfo(info);
	printf("%s: both processes saw the same %u bytes\n", what, SIZE);
}

static int own_memfd(unsigned int flags, off_t size, int seals)
{
	int fd = memfd_create("hostile", MFD_CLOEXEC | flags);
	REQUIRE(fd >= 0, 1);
	REQUIRE(ftruncate(fd, size), 0);
	if (seals)
		REQUIRE(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

/* Victim: imports what the hostile parent sends; answers each import's
 * result, waits until the parent tried to truncate, then touches every
 * byte it mapped. A SIGBUS here kills it, and the parent sees that. */
static int victim(const char *prov, int sock)
{
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fi_xpu_info *info = provider(prov);
	uint64_t size;
	int32_t rc;
	char go;

	open_ctx(info, NULL, &dom, &ctx);
	for (;;) {
		void *dev = NULL;
		int fd = recv_fd(sock, &size);
		if (size == 0)
			break;
		rc = fi_xpu_import(ctx, NULL, fd, 0, size, FI_XPU_IMPORT_DMABUF, &dev);
		close(fd);
		REQUIRE(write(sock, &rc, sizeof(rc)), (long long)sizeof(rc));
		REQUIRE(read(sock, &go, 1), 1);
		if (rc == 0) {
			volatile unsigned char *p = dev;
			for (uint64_t i = 0; i < size; i++)
				p[i] = (unsigned char)(p[i] + 1);
			REQUIRE(fi_xpu_unimport(ctx, dev), 0);
		}
	}
	REQUIRE(fi_xpu_close(&ctx->fid), 0);
	REQUIRE(fi_xpu_close(&dom->fid), 0);
	fi_xpu_freeinfo(info);
	return 0;
}

/* Sends fd to the victim for an import of `size` bytes; checks the result,
 * then truncates (or tries to) before the victim touches the memory. */
static void offer(int sock, int fd, uint64_t size, int32_t want)
{
	int32_t rc = 1;
	send_fd(sock, fd, size);
	REQUIRE(read(sock, &rc, sizeof(rc)), (long long)sizeof(rc));
	if (ftruncate(fd, 0) == 0)
		printf("hostile: truncated a descriptor the victim was offered\n");
	else
		REQUIRE(errno, EPERM);
	REQUIRE(write(sock, "g", 1), 1);
	REQUIRE(rc, want);
	close(fd);
}

static void hostile(const char *prov)
{
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fi_xpu_info *info = provider(prov);
	void *addr = NULL;
	uint64_t offset;
	int fd = -1, sv[2], status = 0;

	open_ctx(info, NULL, &dom, &ctx);
	/* Exportable memory is sealed: nobody holding its fd can resize it
	 * or add a seal that would keep others from mapping it. */
	REQUIRE(fi_xpu_alloc(ctx, SIZE, 0, FI_XPU_ALLOC_DMABUF, &addr, &fd, &offset), 0);
	REQUIRE(fcntl(fd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	REQUIRE(ftruncate(fd, 0), -1);
	REQUIRE(errno, EPERM);
	REQUIRE(ftruncate(fd, 2 * SIZE), -1);
	REQUIRE(errno, EPERM);
	REQUIRE(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
	REQUIRE(errno, EPERM);

	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		/* The parent's list, which this copy of it never uses again (an
		 * optimised build may keep no pointer to it LeakSanitizer sees). */
		fi_xpu_freeinfo(info);
		exit(victim(prov, sv[1]));
	}
	close(sv[1]);
	/* The library's own memory: imported, then truncation fails. */
	offer(sv[0], dup(fd), SIZE, 0);
	/* Descriptors that can shrink under the mapping are refused. */
	offer(sv[0], own_memfd(0, SIZE, 0), SIZE, -FI_EPERM);
	offer(sv[0], own_memfd(MFD_ALLOW_SEALING, SIZE, 0), SIZE, -FI_EPERM);
	offer(sv[0], own_memfd(MFD_ALLOW_SEALING, SIZE, F_SEAL_GROW), SIZE, -FI_EPERM);
	/* Sealed but shorter than the range asked for. */
	offer(sv[0], own_memfd(MFD_ALLOW_SEALING, 4096, F_SEAL_SHRINK), 8192, -FI_EINVAL);
	/* Sealed and long enough: mapped, and the truncation fails. */
	offer(sv[0], own_memfd(MFD_ALLOW_SEALING, 8192, F_SEAL_SHRINK), 8192, 0);
	send_fd(sv[0], fd, 0);
	REQUIRE(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fprintf(stderr, "victim killed by signal %d\n", WTERMSIG(status));
	REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, 1);
	close(sv[0]);
	close(fd);
	REQUIRE(fi_xpu_free(ctx, addr), 0);
	REQUIRE(fi_xpu_close(&ctx->fid), 0);
	REQUIRE(fi_xpu_close(&dom->fid), 0);
	fi_xpu_freeinfo(info);
	printf("hostile exporter: every resize refused, the importer survived\n");
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "test";

	share(prov, NULL, "built-in system memory");

	calls_alloc = calls_import = calls_free = 0;
	share(prov, &ops_current, "application callbacks");
	REQUIRE(calls_alloc, 1);
	REQUIRE(calls_free, 1);

	calls_alloc = calls_free = 0;
	share(prov, (struct fi_xpu_mem_ops *)&ops_v1, "application callbacks, first struct version");
	REQUIRE(calls_alloc, 1);

	/* A struct shorter than the first version is refused. */
	struct fi_xpu_mem_ops short_ops = ops_current;
	short_ops.size = sizeof(size_t) * 2;
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx = NULL;
	struct fi_xpu_info *info = provider(prov);
	struct fi_xpu_ctx_open_attr attr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = &short_ops };
	REQUIRE(fi_xpu_domain(info, NULL, &dom, NULL), 0);
	REQUIRE(fi_xpu_ctx_open(dom, &attr, &ctx, NULL), -FI_EINVAL);
	REQUIRE(ctx == NULL, 1);
	REQUIRE(fi_xpu_close(&dom->fid), 0);
	fi_xpu_freeinfo(info);

	hostile(prov);
	return 0;
}
