//! `cargo xtask install`: the installed tree works on its own. A C program
//! built with nothing but `pkg-config --cflags --libs fi_xpu` finds the
//! library, the library finds its plugins through the compiled-in provider
//! directory, and the soname, headers, man pages and fi_xpu_info are there.
mod common;

#[allow(dead_code)]
#[path = "../xtask/src/man.rs"]
mod man;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Exercises the installed library the way an application does; exits
/// non-zero with a message on any unexpected result.
const PROGRAM: &str = r#"
#include <fi_xpu.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call, want)                                                   \
    do {                                                                    \
        int ret_ = (call);                                                  \
        if (ret_ != (want)) {                                               \
            fprintf(stderr, "%s = %d (%s), want %d\n", #call, ret_,         \
                    fi_xpu_strerror(ret_), (want));                         \
            return 1;                                                       \
        }                                                                   \
    } while (0)

int main(void)
{
    struct fi_xpu_info *info, *i, *shm = NULL;
    struct fid_xpu_domain *domain;
    struct fid_xpu_ctx *ctx;
    struct fi_xpu_attr attr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
    void *buf;
    int fd = -1;
    uint64_t offset = 1;

    if (fi_xpu_version() != FI_XPU_API_VERSION) {
        fprintf(stderr, "header and library versions differ\n");
        return 1;
    }
    CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info), 0);
    for (i = info; i; i = i->next)
        if (strcmp(i->prov_name, "shm") == 0)
            shm = i;
    if (!shm) {
        fprintf(stderr, "the installed shm provider was not found\n");
        return 1;
    }
    CHECK(fi_xpu_domain(shm, NULL, &domain, NULL), 0);
    CHECK(fi_xpu_ctx(domain, &attr, &ctx, NULL), 0);
    CHECK(fi_xpu_alloc(ctx, 4096, 0, FI_XPU_ALLOC_DMABUF, &buf, &fd, &offset), 0);
    if (fd < 0 || offset != 0) {
        fprintf(stderr, "DMA-BUF allocation gave fd %d offset %llu\n", fd,
                (unsigned long long)offset);
        return 1;
    }
    memset(buf, 0x5a, 4096);
    close(fd);
    CHECK(fi_xpu_free(ctx, buf), 0);
    CHECK(fi_xpu_free(ctx, buf), -FI_EINVAL);
    CHECK(fi_xpu_close(&domain->fid), -FI_EBUSY);
    CHECK(fi_xpu_close(&ctx->fid), 0);
    CHECK(fi_xpu_close(&domain->fid), 0);
    fi_xpu_freeinfo(info);
    printf("installed fi_xpu works: %s\n", fi_xpu_strerror(-FI_EINVAL));
    return 0;
}
"#;

fn xtask_install(prefix: &Path, destdir: Option<&Path>) {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(common::root())
        .args(["run", "--quiet", "-p", "xtask", "--", "install", "--prefix"])
        .arg(prefix);
    if let Some(d) = destdir {
        cmd.arg("--destdir").arg(d);
    }
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    common::run_ok(&mut cmd);
}

fn pkg_config(prefix: &Path, args: &[&str]) -> Vec<String> {
    let o = common::run_ok(
        Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
            .args(args)
            .arg("fi_xpu"),
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Compiles `PROGRAM` with exactly the given flags (nothing from the source
/// tree) and runs it with an environment that cannot point anywhere else.
fn build_and_run(dir: &Path, name: &str, flags: &[String]) -> PathBuf {
    let src = dir.join("smoke.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    common::run_ok(
        Command::new(cc)
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"])
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .args(flags),
    );
    let o = common::run_ok(
        Command::new(&exe)
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("FI_XPU_PROVIDER_PATH")
            .env_remove("FI_XPU_PROVIDER"),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out, "installed fi_xpu works: Invalid argument\n");
    exe
}

fn readelf_dynamic(file: &Path) -> String {
    let o = common::run_ok(Command::new("readelf").arg("-d").arg(file));
    String::from_utf8(o.stdout).unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn installed_tree_works_alone() {
    assert!(
        common::have("pkg-config"),
        "pkg-config is required (apt-get install pkg-config; .ci/run installs it)"
    );
    // A fixed prefix: the compiled-in provider directory is part of the
    // install build, so a new path each run would rebuild the core.
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("install-test");
    let prefix = base.join("prefix");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    xtask_install(&prefix, None);
    let lib = prefix.join("lib");

    // Library files, soname and links.
    let version = env!("CARGO_PKG_VERSION");
    let real = lib.join(format!("libfi_xpu.so.{version}"));
    assert!(readelf_dynamic(&real).contains("Library soname: [libfi_xpu.so.0]"));
    assert_eq!(
        std::fs::read_link(lib.join("libfi_xpu.so.0")).unwrap(),
        Path::new(&format!("libfi_xpu.so.{version}"))
    );
    assert_eq!(
        std::fs::read_link(lib.join("libfi_xpu.so")).unwrap(),
        Path::new("libfi_xpu.so.0")
    );
    assert!(lib.join("libfi_xpu.a").is_file());
    let shm = lib.join("fi_xpu/libfi_xpu-shm.so");
    assert!(shm.is_file(), "{} missing", shm.display());
    // The loader refuses anything group- or world-writable.
    assert_eq!(mode(&lib.join("fi_xpu")), 0o755);
    assert_eq!(mode(&shm), 0o755);

    // pkg-config gives the prefix and nothing else.
    let cflags = pkg_config(&prefix, &["--cflags"]);
    assert_eq!(cflags, [format!("-I{}", prefix.join("include").display())]);
    let libs = pkg_config(&prefix, &["--libs"]);
    assert_eq!(libs, [format!("-L{}", lib.display()), "-lfi_xpu".into()]);
    assert_eq!(pkg_config(&prefix, &["--modversion"]), [version]);

    // A program linked against the shared library, rpath to the prefix only.
    let mut flags = pkg_config(&prefix, &["--cflags", "--libs"]);
    flags.push(format!("-Wl,-rpath,{}", lib.display()));
    let exe = build_and_run(&base, "smoke-shared", &flags);
    assert!(readelf_dynamic(&exe).contains("Shared library: [libfi_xpu.so.0]"));

    // The same program with libfi_xpu.a, linked with the private libraries
    // the .pc file lists: it must need no libfi_xpu.so at all.
    let flags: Vec<String> = pkg_config(&prefix, &["--cflags", "--static", "--libs"])
        .into_iter()
        .flat_map(|f| {
            if f == "-lfi_xpu" {
                vec!["-Wl,-Bstatic".into(), f, "-Wl,-Bdynamic".into()]
            } else {
                vec![f]
            }
        })
        .collect();
    let exe = build_and_run(&base, "smoke-static", &flags);
    assert!(!readelf_dynamic(&exe).contains("libfi_xpu"));

    // fi_xpu_info finds the installed plugin.
    let o = common::run_ok(
        Command::new(prefix.join("bin/fi_xpu_info"))
            .env_remove("FI_XPU_PROVIDER_PATH")
            .env_remove("FI_XPU_PROVIDER"),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("provider: shm"), "{out}");
    assert!(out.contains(&shm.display().to_string()), "{out}");

    // Headers, byte for byte, and one rendered man page per source.
    for (p, rel) in common::public_headers() {
        let installed = prefix.join("include").join(rel);
        assert_eq!(
            std::fs::read(&installed).unwrap(),
            std::fs::read(&p).unwrap(),
            "{}",
            installed.display()
        );
    }
    let mut pages = 0;
    for e in std::fs::read_dir(common::root().join("man")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let Some(page) = man::Page::from_file_name(&name) else {
            continue;
        };
        let installed = prefix.join("share/man").join(page.install_path());
        let text = std::fs::read_to_string(&installed)
            .unwrap_or_else(|e| panic!("{}: {e}", installed.display()));
        assert!(text.contains(".SH \"NAME\""), "{}", installed.display());
        pages += 1;
    }
    assert!(pages >= 4, "only {pages} man pages");

    // A staged install writes below DESTDIR but names the final prefix.
    let destdir = base.join("stage");
    xtask_install(&prefix, Some(&destdir));
    let staged = destdir.join(prefix.strip_prefix("/").unwrap());
    assert!(staged.join("lib/fi_xpu/libfi_xpu-shm.so").is_file());
    assert!(staged.join("bin/fi_xpu_info").is_file());
    let pc = std::fs::read_to_string(staged.join("lib/pkgconfig/fi_xpu.pc")).unwrap();
    assert!(
        pc.starts_with(&format!("prefix={}\n", prefix.display())),
        "{pc}"
    );
    assert!(!pc.contains(&destdir.display().to_string()), "{pc}");
}
