//! `fi_xpu_info`: which providers fi_xpu finds, what each offers, and why any
//! were refused. It lists what `fi_xpu_getinfo` returns, as an application
//! would see it, and adds what only the loader knows (paths, refusals, the
//! directories searched).
use fi_xpu::abi::*;
use fi_xpu::capi::info::providers;
use fi_xpu::memory::iface_name;
use fi_xpu::param;
use fi_xpu::provider::Provider;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::process::ExitCode;

// The public C API, called exactly as a C program would.
extern "C" {
    fn fi_xpu_getinfo(
        version: u32,
        hints: *const fi_xpu_info,
        flags: u64,
        info: *mut *mut fi_xpu_info,
    ) -> c_int;
    fn fi_xpu_freeinfo(info: *mut fi_xpu_info);
    fn fi_xpu_strerror(errnum: c_int) -> *const c_char;
    fn fi_xpu_domain(
        info: *const fi_xpu_info,
        attr: *const fi_xpu_domain_attr,
        domain: *mut *mut fid_xpu_domain,
        context: *mut c_void,
    ) -> c_int;
    fn fi_xpu_ctx_open(
        domain: *mut fid_xpu_domain,
        attr: *const fi_xpu_ctx_open_attr,
        ctx: *mut *mut fid_xpu_host_ctx,
        context: *mut c_void,
    ) -> c_int;
    fn fi_xpu_ctx_getinfo(ctx: *mut fid_xpu_host_ctx, attr: *mut fi_xpu_ctx_info) -> c_int;
    fn fi_xpu_close(obj: *mut fid) -> c_int;
}

const USAGE: &str = "\
usage: fi_xpu_info [-v] [-p NAME]
       fi_xpu_info -e [-p NAME]
       fi_xpu_info --version

Lists the fi_xpu providers found, their capabilities, the plugins that were
refused and why, and the directories searched.

  -p, --provider NAME  only this provider
  -v, --verbose        also the plugin ABI of each provider and the sizes an
                       XPU context on system memory reports
  -e, --env            the environment variables fi_xpu and its providers
                       read: default, description and value when set
                       (with -p: the core's and that provider's)
  -V, --version        the library's version, API version and plugin ABI
  -h, --help           this text

Exit status: 0 when at least one provider is usable, 1 when none is, 2 on a
usage error.";

/// One line: the package version, the C API version the library serves and
/// the plugin ABI it loads.
fn version_line() -> String {
    format!(
        "fi_xpu_info {} (fi_xpu API {}, plugin ABI {}.{})",
        env!("CARGO_PKG_VERSION"),
        version(FI_XPU_API_VERSION),
        FI_XPU_PROV_ABI_MAJOR,
        FI_XPU_PROV_ABI_MINOR
    )
}

struct Options {
    env: bool,
    version: bool,
    verbose: bool,
    provider: Option<String>,
}

fn parse_args() -> Result<Option<Options>, String> {
    let mut opts = Options {
        env: false,
        version: false,
        verbose: false,
        provider: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "-v" | "--verbose" => opts.verbose = true,
            "-V" | "--version" => opts.version = true,
            "-e" | "--env" => opts.env = true,
            "-p" | "--provider" => {
                let name = args.next().ok_or("-p needs a provider name")?;
                opts.provider = Some(name);
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(Some(opts))
}

fn strerror(code: c_int) -> String {
    // SAFETY: fi_xpu_strerror returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(fi_xpu_strerror(code)) }
        .to_string_lossy()
        .into_owned()
}

fn version(v: u32) -> String {
    format!("{}.{}", v >> 16, v & 0xffff)
}

fn caps_names(caps: u64) -> String {
    const NAMES: [(u64, &str); 4] = [
        (FI_XPU_CAP_EP, "FI_XPU_CAP_EP"),
        (FI_XPU_CAP_CQ, "FI_XPU_CAP_CQ"),
        (FI_XPU_CAP_CNTR, "FI_XPU_CAP_CNTR"),
        (FI_XPU_CAP_WR, "FI_XPU_CAP_WR"),
    ];
    let mut out: Vec<String> = NAMES
        .iter()
        .filter(|(bit, _)| caps & bit != 0)
        .map(|(_, name)| name.to_string())
        .collect();
    let unknown = NAMES.iter().fold(caps, |rest, (bit, _)| rest & !bit);
    if unknown != 0 {
        out.push(format!("{unknown:#x}"));
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(" | ")
    }
}

fn iface_names(ifaces: u64) -> String {
    let names: Vec<String> = (0..64)
        .filter(|bit| ifaces & (1u64 << bit) != 0)
        .map(|bit| match iface_name(bit) {
            "unknown" => format!("iface {bit}"),
            name => name.to_string(),
        })
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// `fi_xpu_getinfo`'s list, optionally for one provider, as owned entries.
struct InfoList(*mut fi_xpu_info);

impl InfoList {
    fn get(provider: Option<&str>) -> Result<InfoList, c_int> {
        let name = provider.map(|p| CString::new(p).unwrap_or_default());
        let hints = fi_xpu_info {
            next: std::ptr::null_mut(),
            prov_name: name
                .as_ref()
                .map_or(std::ptr::null_mut(), |n| n.as_ptr() as *mut c_char),
            prov_version: 0,
            prov_id: 0,
            caps: 0,
            ifaces: 0,
            addrlen: 0,
            handle: std::ptr::null_mut(),
            limits: fi_xpu_limits::default(),
        };
        let mut list = std::ptr::null_mut();
        // SAFETY: `hints` and the name it points to outlive the call; `list`
        // is a valid out-pointer.
        let ret = unsafe { fi_xpu_getinfo(FI_XPU_API_VERSION, &hints, 0, &mut list) };
        if ret != 0 {
            return Err(ret);
        }
        Ok(InfoList(list))
    }

    fn entries(&self) -> Vec<&fi_xpu_info> {
        let mut out = Vec::new();
        let mut cur = self.0;
        // SAFETY: the list from fi_xpu_getinfo is valid until freed in Drop.
        while let Some(info) = unsafe { cur.as_ref() } {
            out.push(info);
            cur = info.next;
        }
        out
    }
}

impl Drop for InfoList {
    fn drop(&mut self) {
        // SAFETY: the list came from fi_xpu_getinfo and is freed once.
        unsafe { fi_xpu_freeinfo(self.0) }
    }
}

fn name_of(info: &fi_xpu_info) -> String {
    // SAFETY: fi_xpu_getinfo fills prov_name with a NUL-terminated string.
    unsafe { CStr::from_ptr(info.prov_name) }
        .to_string_lossy()
        .into_owned()
}

/// What a context on system memory reports, through domain, ctx and query.
fn query_system_ctx(info: &fi_xpu_info) -> Result<fi_xpu_ctx_info, String> {
    if info.ifaces & (1u64 << FI_HMEM_SYSTEM) == 0 {
        return Err("not queried: the provider does not serve system memory".into());
    }
    let fail = |what: &str, ret: c_int| format!("{what} failed: {} ({ret})", strerror(ret));
    let mut domain = std::ptr::null_mut();
    // SAFETY: `info` is an entry of a live getinfo list; NULL attr means defaults.
    let ret = unsafe { fi_xpu_domain(info, std::ptr::null(), &mut domain, std::ptr::null_mut()) };
    if ret != 0 {
        return Err(fail("fi_xpu_domain", ret));
    }
    let attr = fi_xpu_ctx_open_attr {
        iface: FI_HMEM_SYSTEM,
        device: 0,
        ops: std::ptr::null_mut(),
    };
    let mut ctx = std::ptr::null_mut();
    // SAFETY: `domain` was just opened; `attr` is valid for the call.
    let ret = unsafe { fi_xpu_ctx_open(domain, &attr, &mut ctx, std::ptr::null_mut()) };
    let result = if ret != 0 {
        Err(fail("fi_xpu_ctx_open", ret))
    } else {
        let mut out = fi_xpu_ctx_info::default();
        // SAFETY: `ctx` was just opened; `out` is a valid out-pointer.
        let ret = unsafe { fi_xpu_ctx_getinfo(ctx, &mut out) };
        // SAFETY: closing the context opened above, once.
        unsafe { fi_xpu_close(ctx as *mut fid) };
        if ret != 0 {
            Err(fail("fi_xpu_ctx_getinfo", ret))
        } else {
            Ok(out)
        }
    };
    // SAFETY: closing the domain opened above, once; its context is closed.
    unsafe { fi_xpu_close(domain as *mut fid) };
    result
}

fn print_provider(info: &fi_xpu_info, loaded: Option<&Provider>, verbose: bool) {
    println!("provider: {}", name_of(info));
    println!("    version: {}", version(info.prov_version));
    println!("    prov_id: {}", info.prov_id);
    println!("    caps: {}", caps_names(info.caps));
    println!("    ifaces: {}", iface_names(info.ifaces));
    println!("    addrlen: {}", info.addrlen);
    let l = info.limits;
    for (what, v) in [
        ("max_cq_size", l.cq_size),
        ("max_tx_depth", l.tx_depth),
        ("max_rx_depth", l.rx_depth),
        ("max_msg_size", l.msg_size),
    ] {
        if v != 0 {
            println!("    {what}: {v}");
        } else {
            println!("    {what}: none of its own");
        }
    }
    if let Some(p) = loaded {
        println!("    path: {}", p.path.display());
    }
    // What the provider says when it opens a domain, such as the transport
    // the ofi provider chose.
    let name = name_of(info);
    let (ctx, notes) = fi_xpu::log::capture(|| query_system_ctx(info));
    for (_, msg) in notes.iter().filter(|(src, _)| *src == name) {
        if let Some(t) = msg.strip_prefix("transport: ") {
            println!("    transport: {t}");
        }
    }
    if !verbose {
        return;
    }
    if let Some(p) = loaded {
        let d = p.desc();
        println!(
            "    abi: {}.{} (descriptor {} bytes)",
            d.abi_major, d.abi_minor, d.size
        );
    }
    match ctx {
        Ok(a) => {
            println!("    system ctx caps: {}", caps_names(a.caps));
            println!("    system ctx av_addr_size: {}", a.av_addr_size);
            println!("    system ctx mr_desc_size: {}", a.mr_desc_size);
            println!(
                "    system ctx max_tx_wr_desc_size: {}",
                a.max_tx_wr_desc_size
            );
            println!(
                "    system ctx max_rx_wr_desc_size: {}",
                a.max_rx_wr_desc_size
            );
        }
        Err(why) => println!("    system ctx: {why}"),
    }
}

/// The parameter registry, after every provider was loaded (and so had
/// defined its parameters): the core's, then each provider's, or with
/// `only` the core's and that provider's.
fn print_params(only: Option<&str>) {
    for p in fi_xpu::param::all() {
        if only.is_some_and(|o| p.owner != param::CORE && p.owner != o) {
            continue;
        }
        println!("env: {}", p.var);
        println!("    owner: {}", p.owner);
        if p.default.is_empty() {
            println!("    default: (unset)");
        } else {
            println!("    default: {}", p.default);
        }
        if let Some(v) = p.value() {
            println!("    value: {v}");
        }
        println!("    description: {}", p.help);
    }
}

/// Whether a refused path concerns `name`: its plugin file, or a directory
/// (a refused directory may have hidden it).
fn concerns(path: &Path, name: &str) -> bool {
    path.is_dir()
        || path
            .file_name()
            .is_some_and(|f| f.to_string_lossy() == format!("libfi_xpu-{name}.so"))
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("fi_xpu_info: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if opts.version {
        println!("{}", version_line());
        return ExitCode::SUCCESS;
    }
    let all = providers();
    if opts.env {
        print_params(opts.provider.as_deref());
        return ExitCode::SUCCESS;
    }
    let list = InfoList::get(opts.provider.as_deref());
    let entries = list.as_ref().map(InfoList::entries).unwrap_or_default();
    for info in &entries {
        let name = name_of(info);
        let loaded = all.loaded.iter().find(|p| p.name == name);
        print_provider(info, loaded.map(|p| &**p), opts.verbose);
    }
    for s in &all.skipped {
        if opts
            .provider
            .as_deref()
            .is_some_and(|n| !concerns(&s.path, n))
        {
            continue;
        }
        println!("skipped: {}", s.path.display());
        println!("    reason: {}", s.reason);
    }
    for dir in &all.searched {
        let note = if dir.is_dir() { "" } else { " (not found)" };
        println!("searched: {}{note}", dir.display());
    }
    match list {
        Ok(_) => ExitCode::SUCCESS,
        Err(ret) => {
            let what = match &opts.provider {
                Some(name) => format!("provider '{name}' is not usable"),
                None => "no usable provider".to_string(),
            };
            eprintln!("fi_xpu_info: {what}: {} ({ret})", strerror(ret));
            ExitCode::from(1)
        }
    }
}
