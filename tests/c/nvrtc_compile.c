/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Compiles a CUDA source file with NVRTC, the runtime compiler JIT users
 * call from their programs: no C library headers exist there, only what the
 * source includes through the given include paths. Needs no GPU.
 *
 *   nvrtc_compile SOURCE OUT.cubin OPTION...
 *
 * OPTIONs go to nvrtcCompileProgram as they are (--gpu-architecture=sm_90,
 * -I..., -D...). Exit status 0 only when the program compiles, NVRTC's log
 * is empty (no warning either) and a non-empty CUBIN comes back; the log
 * goes to stderr.
 */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		} else if (buf) {
			buf[n] = '\0';
		}
	}
	fclose(f);
	return buf;
}

#define CHECK(call)                                                                  \
	do {                                                                         \
		nvrtcResult r_ = (call);                                             \
		if (r_ != NVRTC_SUCCESS) {                                           \
			fprintf(stderr, "%s: %s\n", #call, nvrtcGetErrorString(r_)); \
			return 1;                                                    \
		}                                                                    \
	} while (0)

int main(int argc, char **argv)
{
	nvrtcProgram prog;
	nvrtcResult res;
	size_t log_size = 0, cubin_size = 0;
	char *src, *log, *cubin;
	FILE *out;
	int major = 0, minor = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s SOURCE OUT.cubin OPTION...\n", argv[0]);
		return 2;
	}
	src = read_file(argv[1]);
	if (!src) {
		perror(argv[1]);
		return 1;
	}
	CHECK(nvrtcVersion(&major, &minor));
	CHECK(nvrtcCreateProgram(&prog, src, argv[1], 0, NULL, NULL));
	res = nvrtcCompileProgram(prog, argc - 3, (const char *const *)(argv + 3));
	CHECK(nvrtcGetProgramLogSize(prog, &log_size));
	log = malloc(log_size + 1);
	if (!log)
		return 1;
	CHECK(nvrtcGetProgramLog(prog, log));
	log[log_size] = '\0';
	if (strlen(log))
		fprintf(stderr, "NVRTC %d.%d log:\n%s\n", major, minor, log);
	if (res != NVRTC_SUCCESS) {
		fprintf(stderr, "nvrtcCompileProgram: %s\n", nvrtcGetErrorString(res));
		return 1;
	}
	if (strlen(log)) {
		fprintf(stderr, "NVRTC reported diagnostics; warnings count as errors\n");
		return 1;
	}
	CHECK(nvrtcGetCUBINSize(prog, &cubin_size));
	if (cubin_size == 0) {
		fprintf(stderr, "NVRTC returned no CUBIN (is the architecture a real sm_XX?)\n");
		return 1;
	}
	cubin = malloc(cubin_size);
	if (!cubin)
		return 1;
	CHECK(nvrtcGetCUBIN(prog, cubin));
	out = fopen(argv[2], "wb");
	if (!out || fwrite(cubin, 1, cubin_size, out) != cubin_size || fclose(out) != 0) {
		perror(argv[2]);
		return 1;
	}
	printf("NVRTC %d.%d: %zu bytes of CUBIN\n", major, minor, cubin_size);
	CHECK(nvrtcDestroyProgram(&prog));
	free(cubin);
	free(log);
	free(src);
	return 0;
}
