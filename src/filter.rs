//! A list of names to keep or to drop, in libfabric's `FI_PROVIDER` syntax:
//! `a,b` keeps only those, `^a,b` drops those. Used for `FI_XPU_PROVIDER`
//! (which plugins load) and `FI_XPU_LOG_PROV` (whose messages are logged).

pub struct Filter {
    names: Vec<String>,
    exclude: bool,
}

impl Filter {
    /// `None` for an empty specification (no filter).
    pub fn parse(spec: &str) -> Option<Filter> {
        let spec = spec.trim();
        if spec.is_empty() {
            return None;
        }
        let (exclude, list) = match spec.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, spec),
        };
        let names = list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        Some(Filter { names, exclude })
    }

    pub fn allows(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name) != self.exclude
    }

    /// Whether this is a keep-list naming `name` (the user asked for it).
    pub fn requests(&self, name: &str) -> bool {
        !self.exclude && self.names.iter().any(|n| n == name)
    }

    /// The names a keep-list gives that are not among `found` (none for a
    /// drop-list: dropping what is absent changes nothing).
    pub fn unmatched<'a>(&'a self, found: &[String]) -> Vec<&'a str> {
        if self.exclude {
            return Vec::new();
        }
        self.names
            .iter()
            .filter(|n| !found.contains(n))
            .map(String::as_str)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_and_drop() {
        assert!(Filter::parse(" ").is_none());
        let keep = Filter::parse("shm, core").unwrap();
        assert!(keep.allows("shm") && keep.allows("core") && !keep.allows("ofi"));
        let drop = Filter::parse("^ofi").unwrap();
        assert!(drop.allows("shm") && !drop.allows("ofi"));
        let found = vec!["shm".to_string()];
        assert_eq!(keep.unmatched(&found), vec!["core"]);
        assert!(drop.unmatched(&found).is_empty());
        assert!(keep.requests("shm") && !keep.requests("ofi"));
        assert!(!drop.requests("ofi") && !drop.requests("shm"));
    }
}
