//! Test support: the vendor backends' declarations checked against the
//! vendors' own headers by the C compiler.
use std::process::Command;

/// Compiles `includes`, then `protos` (declarations and `_Static_assert`s
/// that must agree with the headers), then a `main` printing each constant
/// of `consts` and running `extra_main`, with warnings as errors and
/// `cflags`; checks every constant's value and returns the lines
/// `extra_main` printed. `header` names the header in failure messages.
pub(crate) fn check_against_header(
    header: &str,
    includes: &str,
    protos: &str,
    consts: &[(&str, i64)],
    extra_main: &str,
    cflags: &[String],
) -> Vec<String> {
    let mut src = format!("{includes}{protos}int main(void) {{\n");
    for (expr, _) in consts {
        src += &format!("    printf(\"%lld\\n\", (long long)({expr}));\n");
    }
    src += extra_main;
    src += "    return 0;\n}\n";
    let dir = std::env::temp_dir().join(format!(
        "fi_xpu-{}-{}",
        header.replace(['/', '.'], "-"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("check.c");
    let exe = dir.join("check");
    std::fs::write(&c, src).unwrap();
    let o = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .args(cflags)
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the declarations differ from {header}:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    for (expr, want) in consts {
        let got: i64 = lines.next().unwrap().parse().unwrap();
        assert_eq!(got, *want, "{expr}");
    }
    lines.map(str::to_string).collect()
}

/// Whether the vendor header `path` is missing; the test is then skipped,
/// with a line naming the package that provides it.
pub(crate) fn missing(path: &str, package: &str) -> bool {
    let gone = !std::path::Path::new(path).is_file();
    if gone {
        eprintln!("skipped: no {path} (install {package})");
    }
    gone
}

/// `consts` entries for `check_against_header`: each constant under the
/// name the header gives it too.
macro_rules! consts {
    ($($c:ident),* $(,)?) => {
        [$((stringify!($c), $c as i64)),*]
    };
}

/// `consts` entries: `sizeof` of each type, named alike in the header.
macro_rules! sizes {
    ($($t:ident),* $(,)?) => {
        [$((concat!("sizeof(", stringify!($t), ")"), std::mem::size_of::<$t>() as i64)),*]
    };
}

/// `consts` entries: `offsetof` of each `type.field`, named alike in the
/// header.
macro_rules! offsets {
    ($($t:ident . $f:ident),* $(,)?) => {
        [$((
            concat!("offsetof(", stringify!($t), ", ", stringify!($f), ")"),
            std::mem::offset_of!($t, $f) as i64,
        )),*]
    };
}

pub(crate) use {consts, offsets, sizes};
