//! The parameter registry: every environment variable fi_xpu reads, the
//! core's and the providers', is defined here with its default and a
//! description, and read here (with `secure_getenv`, so set-uid programs
//! ignore them). `fi_xpu_info -e` lists the registry.
//!
//! Providers define and read theirs through the core services
//! (`param_define`, `param_get`, as libfabric's `fi_param_define` and
//! `fi_param_get`) and never read the environment themselves. A provider's
//! parameter `name` is the variable `FI_XPU_<PROVIDER>_<NAME>`, so providers
//! cannot read or shadow each other's variables, nor the core's.
use crate::env;
use crate::error::Error;
use crate::fork::{self, ForkSafe, Rank};
use std::sync::MutexGuard;

/// Owner of the core's own parameters.
pub const CORE: &str = "core";

pub const PROVIDER_PATH: &str = "FI_XPU_PROVIDER_PATH";
pub const PROVIDER: &str = "FI_XPU_PROVIDER";
pub const LOG_LEVEL: &str = "FI_XPU_LOG_LEVEL";
pub const LOG_PROV: &str = "FI_XPU_LOG_PROV";
pub const HUGE_PAGES: &str = "FI_XPU_HUGE_PAGES";
pub const BOOTSTRAP: &str = "FI_XPU_BOOTSTRAP";
pub const BOOTSTRAP_ADDR: &str = "FI_XPU_BOOTSTRAP_ADDR";
pub const BOOTSTRAP_RANK: &str = "FI_XPU_BOOTSTRAP_RANK";
pub const BOOTSTRAP_SIZE: &str = "FI_XPU_BOOTSTRAP_SIZE";
pub const BOOTSTRAP_KEY: &str = "FI_XPU_BOOTSTRAP_KEY";
pub const BOOTSTRAP_TIMEOUT_MS: &str = "FI_XPU_BOOTSTRAP_TIMEOUT_MS";
pub const WORLD_NODE: &str = "FI_XPU_WORLD_NODE";
pub const HOST_GPU: &str = "FI_XPU_HOST_GPU";
pub const HOST_GPU_HANG_MS: &str = "FI_XPU_HOST_GPU_HANG_MS";
pub const HOST_GPU_SEED: &str = "FI_XPU_HOST_GPU_SEED";
pub const HOST_GPU_SUBGROUP: &str = "FI_XPU_HOST_GPU_SUBGROUP";
pub const HOST_GPU_GROUP_MS: &str = "FI_XPU_HOST_GPU_GROUP_MS";
pub const HOST_WEAK_ORDER: &str = "FI_XPU_HOST_WEAK_ORDER";
pub const HOST_WEAK_WINDOW_MS: &str = "FI_XPU_HOST_WEAK_WINDOW_MS";

/// The core's parameters: variable, default (as `fi_xpu_info -e` shows it),
/// description.
const CORE_PARAMS: [(&str, &str, &str); 19] = [
    (
        PROVIDER_PATH,
        "",
        "colon-separated directories searched for provider plugins before the installed ones",
    ),
    (
        PROVIDER,
        "",
        "providers to load: `shm,ofi` keeps only those, `^ofi` drops those (empty: all)",
    ),
    (
        LOG_LEVEL,
        "warn",
        "least severe message logged: none, warn, info or debug",
    ),
    (
        LOG_PROV,
        "",
        "sources whose messages are logged: `shm,core` keeps only those, `^ofi` drops those (empty: all)",
    ),
    (
        HUGE_PAGES,
        "try",
        "huge pages for FI_HMEM_SYSTEM memory of 2 MiB or more: `try` (hugetlb pages while the pool has them, else transparent huge pages where the kernel allows them for shared memory), `thp` (only the latter), `off`",
    ),
    (
        BOOTSTRAP,
        "tcp",
        "how the ranks of a world find each other: tcp (rendezvous at rank 0) or mpi (module)",
    ),
    (
        BOOTSTRAP_ADDR,
        "",
        "tcp bootstrap: host:port where rank 0 listens and the other ranks connect",
    ),
    (
        BOOTSTRAP_RANK,
        "",
        "this process's rank in the world (when fi_xpu_world_attr.rank is -1)",
    ),
    (
        BOOTSTRAP_SIZE,
        "",
        "number of ranks in the world (when fi_xpu_world_attr.nranks is 0)",
    ),
    (
        BOOTSTRAP_KEY,
        "",
        "tcp bootstrap: a job key all ranks share; a rank with another key is refused",
    ),
    (
        BOOTSTRAP_TIMEOUT_MS,
        "60000",
        "how long one world set-up step waits for the other ranks, in milliseconds",
    ),
    (
        WORLD_NODE,
        "",
        "this process's node name in a world (ranks with equal names use shm); empty: boot id, network namespace and host name",
    ),
    (
        HOST_GPU,
        "",
        "run every fi_xpu_host_launch in the GPU-like mode with this many groups resident at once (empty: only launches with FI_XPU_HOST_LAUNCH_GPU, with 2)",
    ),
    (
        HOST_GPU_HANG_MS,
        "5000",
        "GPU-like launches: how long resident groups may make no progress while others wait to become resident before the launch reports a hang",
    ),
    (
        HOST_GPU_SEED,
        "1",
        "GPU-like launches: seed of the order in which the lanes of a subgroup take turns",
    ),
    (
        HOST_GPU_SUBGROUP,
        "64",
        "GPU-like launches: subgroup width when the launch gives none",
    ),
    (
        HOST_GPU_GROUP_MS,
        "5000",
        "GPU-like launches: how long a subgroup or work-group call waits for missing members before the launch reports the partial group (0: never)",
    ),
    (
        HOST_WEAK_ORDER,
        "",
        "1: run every fi_xpu_host_launch in the weak-ordering mode (device code built with FI_XPU_HOST_WEAK_ORDER defined has its stores held back until a release of the right scope)",
    ),
    (
        HOST_WEAK_WINDOW_MS,
        "20",
        "weak-ordering launches: how long a work item stops after a store reached memory ahead of its earlier stores, so that observers can see the reorder",
    ),
];

/// One defined parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// `core` or the provider's name.
    pub owner: String,
    /// The provider's name for it (`heap_size`); the variable for the core's.
    pub name: String,
    /// The environment variable (`FI_XPU_SHM_HEAP_SIZE`).
    pub var: String,
    /// The value used when the variable is unset, as text.
    pub default: String,
    pub help: String,
}

impl Param {
    /// The variable's value, when it is set and not empty.
    pub fn value(&self) -> Option<String> {
        value_of(&self.var)
    }
}

/// The value of the variable `var`, when it is set and not empty.
fn value_of(var: &str) -> Option<String> {
    env::var(var).filter(|v| !v.is_empty())
}

/// The parameters defined so far; a leaf lock (nothing else is locked
/// under it), held by a forking thread (`crate::fork`).
static REGISTRY: ForkSafe<Vec<Param>> = ForkSafe::new(Rank::Params);

fn registry() -> MutexGuard<'static, Vec<Param>> {
    REGISTRY.lock(|| {
        CORE_PARAMS
            .iter()
            .map(|(var, default, help)| Param {
                owner: CORE.into(),
                name: (*var).into(),
                var: (*var).into(),
                default: (*default).into(),
                help: (*help).into(),
            })
            .collect()
    })
}

/// Made at load (`crate::fork`).
fn make() {
    drop(registry());
}
fork::at_load!(make);

fn plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `FI_XPU_<OWNER>_<NAME>` for a provider's parameter; `None` unless both
/// are made of `[a-z0-9_]`.
pub fn var_name(owner: &str, name: &str) -> Option<String> {
    (plain_name(owner) && plain_name(name) && owner != CORE)
        .then(|| format!("FI_XPU_{owner}_{name}").to_ascii_uppercase())
}

/// Defines the provider `owner`'s parameter `name`. Defining the same
/// parameter again with the same default is harmless. `-FI_EINVAL` for a
/// malformed name or one-line text with a newline; `-FI_EALREADY` when the
/// variable is already defined otherwise (by the core, another provider, or
/// with another default).
pub fn define(owner: &str, name: &str, default: &str, help: &str) -> Result<String, Error> {
    let var = var_name(owner, name).ok_or(Error::INVAL)?;
    if default.contains('\n') || help.contains('\n') {
        return Err(Error::INVAL);
    }
    let mut reg = registry();
    if let Some(p) = reg.iter().find(|p| p.var == var) {
        return if p.owner == owner && p.name == name && p.default == default {
            Ok(var)
        } else {
            Err(Error::ALREADY)
        };
    }
    reg.push(Param {
        owner: owner.into(),
        name: name.into(),
        var: var.clone(),
        default: default.into(),
        help: help.into(),
    });
    Ok(var)
}

/// The value of `owner`'s parameter `name`: `None` when unset (the caller
/// uses its default), `-FI_ENOENT` when `owner` never defined it.
pub fn get(owner: &str, name: &str) -> Result<Option<String>, Error> {
    let var = registry()
        .iter()
        .find(|p| p.owner == owner && p.name == name)
        .ok_or(Error::NOENT)?
        .var
        .clone();
    // Read outside the lock: a parameter read holds it only for the search.
    Ok(value_of(&var))
}

/// The value of one of the core's parameters (`param::LOG_LEVEL`, ...).
pub fn core(var: &str) -> Option<String> {
    debug_assert!(CORE_PARAMS.iter().any(|(v, _, _)| *v == var), "{var}");
    get(CORE, var).ok().flatten()
}

/// Every defined parameter: the core's, then each provider's in the order
/// they were defined.
pub fn all() -> Vec<Param> {
    registry().clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_variables_are_namespaced() {
        assert_eq!(
            var_name("shm", "heap_size").as_deref(),
            Some("FI_XPU_SHM_HEAP_SIZE")
        );
        assert_eq!(var_name("shm", "Heap"), None);
        assert_eq!(var_name("shm", ""), None);
        assert_eq!(var_name("sh-m", "x"), None);
        assert_eq!(var_name(CORE, "x"), None);
    }

    #[test]
    fn define_then_get() {
        assert_eq!(
            define("ptest", "depth", "4", "queue depth").unwrap(),
            "FI_XPU_PTEST_DEPTH"
        );
        // Again, identically: fine. Another default: refused.
        assert!(define("ptest", "depth", "4", "queue depth").is_ok());
        assert_eq!(
            define("ptest", "depth", "5", "queue depth"),
            Err(Error::ALREADY)
        );
        assert_eq!(define("ptest", "x", "1", "two\nlines"), Err(Error::INVAL));
        // Provider `log`, parameter `level`, would be the core's variable.
        assert_eq!(define("log", "level", "x", "shadow"), Err(Error::ALREADY));
        assert_eq!(get("ptest", "undefined"), Err(Error::NOENT));
        assert_eq!(get("other", "depth"), Err(Error::NOENT));
        let all = all();
        assert_eq!(all[0].var, PROVIDER_PATH);
        let p = all.iter().find(|p| p.var == "FI_XPU_PTEST_DEPTH").unwrap();
        assert_eq!((p.owner.as_str(), p.default.as_str()), ("ptest", "4"));
    }
}
