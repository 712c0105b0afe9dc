//! Return addresses to function names, inlined calls included, remembered for the life of
//! the process (code does not move once loaded).

use std::collections::HashMap;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

/// Names already resolved, by address: outermost call first.
type Functions = Arc<[Arc<str>]>;

static RESOLVED: LazyLock<Mutex<HashMap<usize, Functions>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The functions at `address`, outermost first: the function the address is in, then each
/// call inlined into it down to the innermost. An address with no symbol is named by its
/// value in hex.
pub(crate) fn functions_at(address: usize) -> Functions {
    if let Some(names) = RESOLVED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&address)
    {
        return Arc::clone(names);
    }
    let started = std::time::Instant::now();
    let mut names: Vec<Arc<str>> = Vec::new();
    backtrace::resolve(address as *mut std::ffi::c_void, |symbol| {
        if let Some(name) = symbol.name() {
            // `{:#}` leaves out the hash Rust appends to its symbols
            let name = without_generic_arguments(&format!("{name:#}"));
            names.push(Arc::from(qualified(name, symbol.filename())));
        }
    });
    if names.is_empty() {
        names.push(Arc::from(format!("{address:#x}")));
    }
    // `resolve` reports the innermost inlined call first
    names.reverse();
    let names: Functions = names.into();
    RESOLVED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(address, Arc::clone(&names));
    RESOLVING_NANOS.fetch_add(
        u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    names
}

/// Time spent resolving addresses since the process started, in nanoseconds.
static RESOLVING_NANOS: AtomicU64 = AtomicU64::new(0);
/// Of that, the time spent by [`resolve_ahead`].
static RESOLVING_AHEAD_NANOS: AtomicU64 = AtomicU64::new(0);

/// Resolves those of `addresses` not resolved yet, so that taking a query's samples finds
/// their names ready; stops early when `stop` says so.
pub(crate) fn resolve_ahead(addresses: &[usize], stop: impl Fn() -> bool) {
    let started = std::time::Instant::now();
    for &address in addresses {
        if stop() {
            break;
        }
        // a name already resolved is only looked up
        functions_at(address);
    }
    RESOLVING_AHEAD_NANOS.fetch_add(
        u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

/// Time [`resolve_ahead`] spent since the process started, in nanoseconds.
pub(crate) fn resolving_ahead_nanos() -> u64 {
    RESOLVING_AHEAD_NANOS.load(Ordering::Relaxed)
}

/// Time spent resolving addresses to names since the process started, in nanoseconds
/// (each address is resolved once).
pub(crate) fn resolving_nanos() -> u64 {
    RESOLVING_NANOS.load(Ordering::Relaxed)
}

/// `name` with the module it is in, if it has none: the debug information of an inlined
/// call names the function alone (`take_impl`), and its file tells the crate and module
/// (`…/arrow-select-59.0.0/src/take.rs`: `arrow_select::take::take_impl`).
fn qualified(name: String, file: Option<&Path>) -> String {
    if name.contains("::") {
        return name;
    }
    match file.and_then(module_of) {
        Some(module) => format!("{module}::{name}"),
        None => name,
    }
}

/// The Rust module a source file holds, from its path: the crate is the directory holding
/// `src` (a package's directory, its version cut off; a workspace's `crates/NAME` is
/// `qprof_NAME`), the module the path under `src`.
pub(crate) fn module_of(file: &Path) -> Option<String> {
    let parts: Vec<&str> = file
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect();
    // a package's library or binary under `src`; a test, example or benchmark is a crate
    // of its own, named after its file (or directory)
    let (src, mut module) = match parts.iter().rposition(|p| *p == "src") {
        Some(src) => {
            let package = *parts.get(src.checked_sub(1)?)?;
            // a workspace member's `crates/NAME/src/…`, not the standard library's
            // `/rustc/HASH/library/stdarch/crates/core_arch/src/…`
            let in_workspace =
                src >= 2 && parts[src - 2] == "crates" && !file.starts_with("/rustc");
            let package = if in_workspace {
                format!("qprof_{package}")
            } else {
                without_version(package).replace('-', "_")
            };
            (src, vec![package])
        }
        None => (
            parts
                .iter()
                .rposition(|p| matches!(*p, "tests" | "examples" | "benches"))?,
            Vec::new(),
        ),
    };
    let under = &parts[src + 1..];
    for (i, part) in under.iter().enumerate() {
        if i + 1 == under.len() {
            let stem = part.strip_suffix(".rs")?;
            if !matches!(stem, "mod" | "lib" | "main") {
                module.push(stem.to_string());
            }
        } else {
            module.push((*part).to_string());
        }
    }
    (!module.is_empty()).then(|| module.join("::"))
}

/// A package directory's name without its version: `arrow-select-59.0.0` is `arrow-select`.
fn without_version(directory: &str) -> &str {
    directory
        .char_indices()
        .find(|&(i, c)| {
            c == '-'
                && directory[i + 1..]
                    .chars()
                    .next()
                    .is_some_and(|d| d.is_ascii_digit())
        })
        .map_or(directory, |(i, _)| &directory[..i])
}

/// `name` without its generic argument lists (`try_binary<&PrimitiveArray<..>, ..>` is
/// `try_binary`), which make up most of a Rust name and tell little in a flame graph; a
/// qualified path (`<HashJoinStream as Stream>::poll_next`) keeps its brackets.
pub(crate) fn without_generic_arguments(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut skipping = 0usize;
    let mut previous = ' ';
    for c in name.chars() {
        if skipping > 0 {
            match c {
                '<' => skipping += 1,
                '>' if previous != '-' => skipping -= 1,
                _ => {}
            }
        } else if c == '<' && (previous.is_alphanumeric() || matches!(previous, '_' | ':' | '}')) {
            skipping = 1;
            if out.ends_with("::") {
                out.truncate(out.len() - 2);
            }
        } else {
            out.push(c);
        }
        previous = c;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::without_generic_arguments;

    #[test]
    fn generic_arguments_are_dropped_and_qualified_paths_kept() {
        assert_eq!(
            without_generic_arguments(
                "try_binary<&arrow_array::array::PrimitiveArray<arrow_array::types::Decimal128Type>, fn(u8) -> u8>"
            ),
            "try_binary"
        );
        assert_eq!(
            without_generic_arguments(
                "<datafusion_physical_plan::joins::hash_join::exec::HashJoinStream as futures_core::stream::Stream>::poll_next"
            ),
            "<datafusion_physical_plan::joins::hash_join::exec::HashJoinStream as futures_core::stream::Stream>::poll_next"
        );
        assert_eq!(
            without_generic_arguments("<alloc::vec::Vec<u8> as core::clone::Clone>::clone"),
            "<alloc::vec::Vec as core::clone::Clone>::clone"
        );
        assert_eq!(
            without_generic_arguments("core::ptr::drop_in_place::<arrow_array::RecordBatch>"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(without_generic_arguments("{closure#20}<T>"), "{closure#20}");
    }

    #[test]
    fn a_source_path_names_its_crate_and_module() {
        use super::module_of;
        use std::path::Path;
        let module = |p: &str| module_of(Path::new(p));
        assert_eq!(
            module(
                "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/arrow-select-59.0.0/src/take.rs"
            ),
            Some("arrow_select::take".to_string())
        );
        assert_eq!(
            module("/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/ptr/mod.rs"),
            Some("core::ptr".to_string())
        );
        assert_eq!(
            module("crates/datafusion/src/exec.rs"),
            Some("qprof_datafusion::exec".to_string())
        );
        assert_eq!(
            module("/x/datafusion-physical-plan-55.2.0/src/joins/hash_join/exec.rs"),
            Some("datafusion_physical_plan::joins::hash_join::exec".to_string())
        );
        assert_eq!(
            module("crates/datafusion/tests/stacks.rs"),
            Some("stacks".to_string())
        );
        assert_eq!(
            module("crates/cli/tests/cli/main.rs"),
            Some("cli".to_string())
        );
        assert_eq!(
            module(
                "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/stdarch/crates/core_arch/src/x86/sse2.rs"
            ),
            Some("core_arch::x86::sse2".to_string())
        );
        assert_eq!(module("/usr/include/string.h"), None);
    }
}
