//! `cargo xtask install`: a `make install`-style tree under a prefix.
//!
//! ```text
//! <prefix>/<libdir>/libfi_xpu.so.X.Y.Z   versioned symbols, stripped (symbols.rs)
//! <prefix>/<libdir>/libfi_xpu.so.X       soname link; libfi_xpu.so -> it
//! <prefix>/<libdir>/libfi_xpu.a          only fi_xpu_* global (symbols.rs)
//! <prefix>/<libdir>/fi_xpu/              provider plugins, stripped
//! <prefix>/<libdir>/pkgconfig/fi_xpu.pc  relocatable (${pcfiledir})
//! <prefix>/<libdir>/cmake/fi_xpu/        find_package(fi_xpu), relocatable
//! <prefix>/include/fi_xpu.h              the host header
//! <prefix>/include/fi_xpu/               device and provider headers
//! <prefix>/share/man/man{1,3,7}/         pages, and alias pages per function
//! <prefix>/share/fi_xpu/examples/        the C examples and their CMakeLists.txt
//! <prefix>/bin/fi_xpu_info               stripped
//! <prefix>/bin/fi_xpu_perf               C, public headers only (tools/fi_xpu_perf.c)
//! <prefix>/libexec/fi_xpu/               its libfabric baselines (benches/), with libfabric
//! ```
//!
//! Every installed binary is stripped and names its debug information with
//! a `.gnu_debuglink`; `--debug-info` also installs that information in
//! `.debug/` beside each binary (where gdb looks), so it can be shipped as a
//! package of its own.
use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::{
    abs, cargo, install_file, mkdir, profile, provider_artifacts, public_headers, render_man, root,
    run, symbols, symlink, target_dir, write_file, Opts, Result,
};

/// Replaces every `@key@` of `template`; an `@` left over is an error.
pub fn substitute(name: &str, template: &str, vars: &[(&str, &str)]) -> Result<String> {
    let mut text = template.to_string();
    for (k, v) in vars {
        text = text.replace(&format!("@{k}@"), v);
    }
    if let Some(pos) = text.find('@') {
        let rest: String = text[pos..].chars().take(20).collect();
        return Err(format!("{name}: unknown substitution near `{rest}`"));
    }
    Ok(text)
}

/// `../..` for `lib/pkgconfig`: the way back up from a directory below the
/// prefix.
fn up_from(rel: &Path) -> String {
    let n = rel.components().count();
    vec![".."; n].join("/")
}

/// The library directory relative to the prefix (`lib`, `lib64`,
/// `lib/x86_64-linux-gnu`); an absolute one must lie inside the prefix.
fn libdir_rel(prefix: &Path, libdir: &str) -> Result<PathBuf> {
    let p = Path::new(libdir);
    let rel = if p.is_absolute() {
        p.strip_prefix(prefix)
            .map_err(|_| format!("--libdir {libdir} is not inside the prefix"))?
            .to_path_buf()
    } else {
        p.to_path_buf()
    };
    let plain =
        rel.components().count() > 0 && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        return Err(format!(
            "--libdir {libdir}: give a directory below the prefix, such as lib64"
        ));
    }
    Ok(rel)
}

/// The `.pc` file: every path relative to `${pcfiledir}`.
pub fn pkg_config(template: &str, libdir: &Path, native: &[String]) -> Result<String> {
    let pcdir = libdir.join("pkgconfig");
    substitute(
        "fi_xpu.pc.in",
        template,
        &[
            ("pcdir_to_prefix", &up_from(&pcdir)),
            ("libdir", &libdir.to_string_lossy()),
            ("version", env!("CARGO_PKG_VERSION")),
            ("native_static_libs", &native.join(" ")),
        ],
    )
}

/// `fi_xpu-config.cmake`: every path relative to the file's own directory.
pub fn cmake_config(template: &str, libdir: &Path, native: &[String]) -> Result<String> {
    let cmakedir = libdir.join("cmake/fi_xpu");
    let libs: Vec<&str> = native
        .iter()
        .map(|l| l.strip_prefix("-l").unwrap_or(l))
        .collect();
    let version = env!("CARGO_PKG_VERSION");
    substitute(
        "fi_xpu-config.cmake.in",
        template,
        &[
            ("cmakedir_to_prefix", &up_from(&cmakedir)),
            ("libdir", &libdir.to_string_lossy()),
            ("version", version),
            ("major", version.split('.').next().unwrap()),
            ("native_static_libs", &libs.join(";")),
        ],
    )
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Strips `built` into a scratch copy and installs it at `to` with `mode`;
/// with `debug`, also its debug information as `.debug/<file>.debug`.
/// What precedes the installed provider directory in the core's files
/// (`PROVIDER_DIR_MARKER` in src/provider/loader.rs), and the room after it.
const PROVIDER_DIR_MARKER: &[u8] = b"fi_xpu installed provider directory:";
const PROVIDER_DIR_ROOM: usize = 4096;

/// Writes `dir`, NUL-terminated, after every copy of the core's marker in
/// the installed `file` (a library, archive or program the core is in), so
/// that the library finds its plugins where the prefix put them. The
/// archive keeps its members' sizes, so its index stays true.
fn patch_provider_dir(file: &Path, dir: &Path) -> Result {
    use std::os::unix::ffi::OsStrExt;
    let dir = dir.as_os_str().as_bytes();
    if dir.len() >= PROVIDER_DIR_ROOM || dir.contains(&0) {
        return Err(format!(
            "{}: too long a provider directory for the library's room",
            dir.escape_ascii()
        ));
    }
    let mut bytes = fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut found = 0;
    let mut at = 0;
    while let Some(i) = bytes[at..]
        .windows(PROVIDER_DIR_MARKER.len())
        .position(|w| w == PROVIDER_DIR_MARKER)
    {
        let start = at + i + PROVIDER_DIR_MARKER.len();
        let room = bytes
            .get_mut(start..start + PROVIDER_DIR_ROOM)
            .ok_or_else(|| {
                format!(
                    "{}: the provider directory's room is cut short",
                    file.display()
                )
            })?;
        // Zeros, or a directory written before: anything else is not the
        // core's slot, and is left alone.
        let end = room.iter().position(|&b| b == 0).unwrap_or(room.len());
        if room[end..].iter().any(|&b| b != 0) || end == room.len() {
            return Err(format!(
                "{}: a copy of the provider directory marker at {} is not the library's slot",
                file.display(),
                start - PROVIDER_DIR_MARKER.len()
            ));
        }
        room.fill(0);
        room[..dir.len()].copy_from_slice(dir);
        found += 1;
        at = start + PROVIDER_DIR_ROOM;
    }
    if found == 0 {
        return Err(format!(
            "{}: no provider directory marker: was the core built from this tree?",
            file.display()
        ));
    }
    fs::write(file, &bytes).map_err(|e| format!("{}: {e}", file.display()))
}

fn install_stripped(built: &Path, to: &Path, mode: u32, scratch: &Path, debug: bool) -> Result {
    let name = to.file_name().unwrap().to_string_lossy().into_owned();
    let copy = scratch.join(&name);
    let dbg = scratch.join(format!("{name}.debug"));
    install_file(built, &copy, 0o644)?;
    symbols::split_debug(&copy, &dbg)?;
    install_file(&copy, to, mode)?;
    if debug {
        install_file(
            &dbg,
            &to.parent()
                .unwrap()
                .join(".debug")
                .join(dbg.file_name().unwrap()),
            0o644,
        )?;
    }
    Ok(())
}

/// The examples a user builds against the prefix (examples/CMakeLists.txt
/// lists the programs), relative to `examples/`.
pub const EXAMPLES: [&str; 10] = [
    "CMakeLists.txt",
    "example.h",
    "two_process.c",
    "hello.c",
    "pingpong.c",
    "device_all_ops.c",
    "moe/moe.c",
    "moe/moe.h",
    "moe/world.h",
    "moe/allreduce.c",
];

/// Compiles a C program of the source tree against the just installed
/// `libfi_xpu.so` (in `lib`), with the public headers and the examples'
/// world and MoE code, found at run time relative to the program
/// (`$ORIGIN`, `up` directories below the prefix) so that the prefix stays
/// relocatable.
fn build_tool(src: &str, exe: &Path, lib: &Path, librel: &Path, up: &str, libs: &[&str]) -> Result {
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    run(std::process::Command::new(cc)
        .args(["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", root().display()))
        .arg(format!("-I{}", root().join("include").display()))
        .arg(format!("-I{}", root().join("examples/moe").display()))
        .arg(root().join(src))
        .arg("-o")
        .arg(exe)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,$ORIGIN/{up}/{}", librel.display()))
        .args(libs))
}

/// Whether libfabric's development files are installed (pkg-config).
fn have_libfabric() -> bool {
    std::process::Command::new("pkg-config")
        .args(["--exists", "libfabric"])
        .status()
        .is_ok_and(|s| s.success())
}

pub fn install(o: Opts) -> Result {
    let prefix = abs(o.value("--prefix").ok_or("--prefix is required")?);
    let destdir = o.value("--destdir").map(abs);
    let release = o.release();
    let debug = o.flag("--debug-info");
    let librel = libdir_rel(&prefix, o.value("--libdir").unwrap_or("lib"))?;
    let libdir = prefix.join(&librel);
    let includedir = prefix.join("include");
    let provdir = libdir.join("fi_xpu");
    // Staged installs (packaging) write below DESTDIR but the library must
    // look for plugins where they will finally live.
    let dest = |p: &Path| match &destdir {
        Some(d) => d.join(p.strip_prefix("/").unwrap_or(p)),
        None => p.to_path_buf(),
    };

    // A target directory of its own, whatever the prefix: the prefix's
    // provider directory is written into the installed files afterwards
    // (`patch_provider_dir`), so one build serves every prefix.
    let install_target = target_dir().join("install");
    let mut cmd = cargo();
    cmd.args(["build", "--workspace", "--exclude", "xtask", "--target-dir"])
        .arg(&install_target);
    if release {
        cmd.arg("--release");
    }
    run(&mut cmd)?;
    let built = install_target.join(profile(release));
    let scratch = install_target.join(format!("stage-{}", profile(release)));
    let _ = fs::remove_dir_all(&scratch);
    mkdir(&scratch)?;

    let version = env!("CARGO_PKG_VERSION");
    let major = version.split('.').next().unwrap();
    let real = format!("libfi_xpu.so.{version}");
    let soname = format!("libfi_xpu.so.{major}");
    let native = symbols::native_static_libs(&scratch.join("probe"))?;
    let libs = symbols::build(
        &built.join("libfi_xpu.a"),
        &root().join("libfi_xpu.map"),
        &native,
        &scratch.join("link"),
        &real,
        &soname,
    )?;
    let lib = dest(&libdir);
    install_stripped(&libs.shared_lib, &lib.join(&real), 0o755, &scratch, debug)?;
    patch_provider_dir(&lib.join(&real), &provdir)?;
    symlink(&real, &lib.join(&soname))?;
    symlink(&soname, &lib.join("libfi_xpu.so"))?;
    symbols::strip_archive(&libs.static_lib)?;
    install_file(&libs.static_lib, &lib.join("libfi_xpu.a"), 0o644)?;
    patch_provider_dir(&lib.join("libfi_xpu.a"), &provdir)?;

    let mut plugins = Vec::new();
    for (name, path) in provider_artifacts(&built)? {
        let file = format!("libfi_xpu-{name}.so");
        install_stripped(&path, &dest(&provdir).join(&file), 0o755, &scratch, debug)?;
        plugins.push(file);
    }
    if let Some(m) = crate::mpi_module(&scratch)? {
        install_stripped(
            &m,
            &dest(&provdir).join(crate::stage::MPI_MODULE),
            0o755,
            &scratch,
            debug,
        )?;
        plugins.push(crate::stage::MPI_MODULE.into());
    }

    let headers = public_headers()?;
    let count = headers.len();
    for (path, rel) in &headers {
        install_file(path, &dest(&includedir).join(rel), 0o644)?;
    }

    let pages = render_man(&dest(&prefix.join("share/man")))?;
    let examples = dest(&prefix.join("share/fi_xpu/examples"));
    for rel in EXAMPLES {
        install_file(
            &root().join("examples").join(rel),
            &examples.join(rel),
            0o644,
        )?;
    }

    let pc = pkg_config(
        &read(&root().join("pkgconfig/fi_xpu.pc.in"))?,
        &librel,
        &native,
    )?;
    write_file(&lib.join("pkgconfig/fi_xpu.pc"), pc.as_bytes(), 0o644)?;
    // Device flags: the headers and the directory that maps libfabric's
    // <rdma/fi_xpu_device.h> to fi_xpu's.
    let pc = pkg_config(
        &read(&root().join("pkgconfig/fi_xpu-device.pc.in"))?,
        &librel,
        &native,
    )?;
    write_file(
        &lib.join("pkgconfig/fi_xpu-device.pc"),
        pc.as_bytes(),
        0o644,
    )?;
    let cmake = lib.join("cmake/fi_xpu");
    let config = cmake_config(
        &read(&root().join("cmake/fi_xpu-config.cmake.in"))?,
        &librel,
        &native,
    )?;
    write_file(&cmake.join("fi_xpu-config.cmake"), config.as_bytes(), 0o644)?;
    let cversion = substitute(
        "fi_xpu-config-version.cmake.in",
        &read(&root().join("cmake/fi_xpu-config-version.cmake.in"))?,
        &[("version", version), ("major", major)],
    )?;
    write_file(
        &cmake.join("fi_xpu-config-version.cmake"),
        cversion.as_bytes(),
        0o644,
    )?;

    install_stripped(
        &built.join("fi_xpu_info"),
        &dest(&prefix.join("bin/fi_xpu_info")),
        0o755,
        &scratch,
        debug,
    )?;
    patch_provider_dir(&dest(&prefix.join("bin/fi_xpu_info")), &provdir)?;

    let perf = scratch.join("fi_xpu_perf");
    let libs = ["-lfi_xpu", "-lpthread"];
    build_tool("tools/fi_xpu_perf.c", &perf, &lib, &librel, "..", &libs)?;
    install_stripped(
        &perf,
        &dest(&prefix.join("bin/fi_xpu_perf")),
        0o755,
        &scratch,
        debug,
    )?;
    // fi_xpu_perf -B: the host-driven libfabric baselines of the
    // benchmarks, where libfabric's headers are there to build them.
    let baselines = if have_libfabric() {
        for (src, name) in [
            ("benches/libfabric_rma.c", "libfabric_rma"),
            ("benches/moe_host.c", "moe_host"),
        ] {
            let exe = scratch.join(name);
            let libs = ["-D_GNU_SOURCE", "-lfi_xpu", "-lfabric", "-lpthread"];
            build_tool(src, &exe, &lib, &librel, "../..", &libs)?;
            let to = dest(&prefix.join("libexec/fi_xpu")).join(name);
            install_stripped(&exe, &to, 0o755, &scratch, debug)?;
        }
        ", libexec/fi_xpu/{libfabric_rma,moe_host}"
    } else {
        println!("libfabric's headers are missing: fi_xpu_perf -B will have no baselines");
        ""
    };

    println!(
        "installed into {}{}: {lr}/{real} (+ {soname}, libfi_xpu.so, libfi_xpu.a), \
         {lr}/fi_xpu/{{{}}}, {count} header(s), {} man page(s), {lr}/pkgconfig/fi_xpu{{,-device}}.pc, \
         {lr}/cmake/fi_xpu/, bin/fi_xpu_{{info,perf}}{baselines}, share/fi_xpu/examples/{}",
        destdir
            .as_ref()
            .map_or(String::new(), |d| format!("{} + ", d.display())),
        prefix.display(),
        plugins.join(","),
        pages.len(),
        if debug { ", debug information" } else { "" },
        lr = librel.display(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pc_substitution() {
        let t = "prefix=${pcfiledir}/@pcdir_to_prefix@\nlibdir=${prefix}/@libdir@\n\
                 Version: @version@\nLibs.private: @native_static_libs@\n";
        let native = ["-lm".to_string(), "-lc".to_string()];
        let pc = pkg_config(t, Path::new("lib/x86_64-linux-gnu"), &native).unwrap();
        assert_eq!(
            pc,
            format!(
                "prefix=${{pcfiledir}}/../../..\nlibdir=${{prefix}}/lib/x86_64-linux-gnu\n\
                 Version: {}\nLibs.private: -lm -lc\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert!(pkg_config("x=@bindir@", Path::new("lib"), &[]).is_err());
    }

    #[test]
    fn libdir_must_stay_below_the_prefix() {
        let p = Path::new("/opt/x");
        assert_eq!(libdir_rel(p, "lib64").unwrap(), Path::new("lib64"));
        assert_eq!(
            libdir_rel(p, "/opt/x/lib/x86_64-linux-gnu").unwrap(),
            Path::new("lib/x86_64-linux-gnu")
        );
        assert!(libdir_rel(p, "/usr/lib").is_err());
        assert!(libdir_rel(p, "../lib").is_err());
        assert!(libdir_rel(p, "").is_err());
    }

    #[test]
    fn shipped_templates_are_complete() {
        let native = ["-lgcc_s".to_string(), "-lc".to_string()];
        let t = read(&root().join("pkgconfig/fi_xpu.pc.in")).unwrap();
        let pc = pkg_config(&t, Path::new("lib64"), &native).unwrap();
        assert!(pc.contains("\nprefix=${pcfiledir}/../..\n"), "{pc}");
        assert!(pc.contains("\nlibdir=${prefix}/lib64\n"), "{pc}");
        assert!(pc.contains("\nLibs: -L${libdir} -lfi_xpu\n"), "{pc}");
        assert!(pc.contains("\nLibs.private: -lgcc_s -lc\n"), "{pc}");
        let t = read(&root().join("cmake/fi_xpu-config.cmake.in")).unwrap();
        let c = cmake_config(&t, Path::new("lib64"), &native).unwrap();
        assert!(c.contains("/../../..\" ABSOLUTE)"), "{c}");
        assert!(c.contains("\"gcc_s;c\""), "{c}");
    }
}
