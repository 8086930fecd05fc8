//! The workspace's layering, enforced (ARCHITECTURE.md states the rules; this keeps them
//! true): which crate may depend on which, the GPU backends behind melkit's features, and
//! no environment reads or command-line flag names in library crates (the CLI reads the
//! environment and owns the words; a library used from Python or a cluster job must not
//! answer to `MELCTL_*` or advise `--loader`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .to_path_buf()
}

/// The library crates: (name, folder).
const LIBRARIES: [(&str, &str); 9] = [
    ("mel-core", "crates/mel-core"),
    ("mel-audio", "crates/mel-audio"),
    ("mel-loaders", "crates/mel-loaders"),
    ("mel-sinks", "crates/mel-sinks"),
    ("mel-cpu", "backends/mel-cpu"),
    ("mel-cuda", "backends/mel-cuda"),
    ("mel-wgpu", "backends/mel-wgpu"),
    ("melread", "crates/melread"),
    ("melkit", "crates/melkit"),
];

/// Which workspace crates each crate may depend on (normal dependencies). A crate not
/// listed may depend on none.
fn allowed() -> BTreeMap<&'static str, Vec<&'static str>> {
    BTreeMap::from([
        ("mel-core", vec![]),
        ("mel-audio", vec!["mel-core"]),
        ("mel-loaders", vec!["mel-core", "mel-audio"]),
        ("mel-sinks", vec!["mel-core"]),
        ("mel-cpu", vec!["mel-core"]),
        ("mel-cuda", vec!["mel-core"]),
        ("mel-wgpu", vec!["mel-core"]),
        ("melread", vec!["mel-core"]),
        (
            "melkit",
            vec![
                "mel-core",
                "mel-audio",
                "mel-loaders",
                "mel-sinks",
                "mel-cpu",
                "mel-cuda",
                "mel-wgpu",
                "melread",
            ],
        ),
        // The front ends use one facade: the CLI and the Python package build, extract,
        // read and list devices through melkit (its re-exports `core`, `audio`, `read`,
        // `backends::{cuda, wgpu}`), never a crate below it. The Python package's `melctl`
        // command is the CLI crate itself (`melctl_cli::main_with_args`), not a copy.
        ("melctl", vec!["melkit"]),
        ("melctl-python", vec!["melkit", "melctl"]),
    ])
}

const WORKSPACE_CRATES: [&str; 10] = [
    "mel-core",
    "mel-audio",
    "mel-loaders",
    "mel-sinks",
    "mel-cpu",
    "mel-cuda",
    "mel-wgpu",
    "melread",
    "melkit",
    "melctl",
];

/// The `[dependencies]` table of a Cargo.toml: (name, whether optional).
fn dependencies(manifest: &Path) -> Vec<(String, bool)> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut deps = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if !inside || line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((name, rest)) = line.split_once(['=', '.']) {
            deps.push((name.trim().to_string(), rest.contains("optional = true")));
        }
    }
    deps
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let allowed = allowed();
    let mut folders: Vec<(&str, &str)> = LIBRARIES.to_vec();
    folders.push(("melctl", "crates/melctl"));
    folders.push(("melctl-python", "python"));
    for (name, folder) in folders {
        let deps = dependencies(&root().join(folder).join("Cargo.toml"));
        assert!(
            !deps.is_empty() || name == "mel-core",
            "{name}: no dependencies read"
        );
        for (dep, _) in deps
            .iter()
            .filter(|(d, _)| WORKSPACE_CRATES.contains(&d.as_str()))
        {
            assert!(
                allowed[name].contains(&dep.as_str()),
                "{name} may not depend on {dep} (ARCHITECTURE.md: the crate map)"
            );
        }
    }
}

#[test]
fn the_backends_and_the_dataset_stages_are_behind_melkits_features() {
    let deps = dependencies(&root().join("crates/melkit/Cargo.toml"));
    for gated in [
        "mel-cpu",
        "mel-cuda",
        "mel-wgpu",
        "mel-loaders",
        "mel-sinks",
        "melread",
    ] {
        let found = deps.iter().find(|(d, _)| d == gated);
        assert!(
            matches!(found, Some((_, true))),
            "melkit's {gated} must be an optional dependency (a feature): {found:?}"
        );
    }
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// The lines of `file` outside `#[cfg(test)]` modules and comments, numbered.
fn code_lines(file: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim() == "#[cfg(test)]" {
            break; // test modules close the file in this workspace
        }
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        out.push((i + 1, line.to_string()));
    }
    out
}

#[test]
fn library_crates_read_no_environment() {
    for (name, folder) in LIBRARIES {
        for file in sources(&root().join(folder).join("src")) {
            for (n, line) in code_lines(&file) {
                let reads = ["env::var(", "env::var_os(", "env::vars("]
                    .iter()
                    .any(|r| line.contains(r));
                assert!(
                    !reads,
                    "{name}: {}:{n} reads the environment; only the CLI does: {}",
                    file.display(),
                    line.trim()
                );
            }
        }
    }
}

#[test]
fn library_crates_name_no_command_line_flag() {
    // Flags passed to other programs (NVRTC's compiler options, a tool's `--version`) are
    // not melctl's.
    let foreign = ["--gpu-architecture", "--std", "--ptxas-options"];
    let to_a_program = |line: &str| line.contains(".arg(") || line.contains(".args(");
    for (name, folder) in LIBRARIES {
        for file in sources(&root().join(folder).join("src")) {
            for (n, line) in code_lines(&file) {
                let Some(start) = line.find('"').filter(|_| !to_a_program(&line)) else {
                    continue;
                };
                let literal = &line[start..];
                let mut rest = literal;
                while let Some(at) = rest.find("--") {
                    let after = &rest[at + 2..];
                    let flag: String = after
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                        .collect();
                    let named = format!("--{flag}");
                    assert!(
                        flag.len() < 2
                            || !flag.starts_with(|c: char| c.is_ascii_lowercase())
                            || foreign.contains(&named.as_str()),
                        "{name}: {}:{n} names the flag {named}; flags are the CLI's words: {}",
                        file.display(),
                        line.trim()
                    );
                    rest = after;
                }
            }
        }
    }
}

/// The crate's top-level modules each module uses: `crate::name` paths and the names of
/// `use crate::{a, b::c}` groups, outside tests and comments. Keyed by module name (a
/// file `src/x.rs` or a folder `src/x/`); `lib.rs` and `main.rs` are the roots, not modules.
fn module_uses(src: &Path) -> BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut uses: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for file in sources(src) {
        let rel = file.strip_prefix(src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = top.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let code: String = code_lines(&file)
            .into_iter()
            .map(|(_, l)| l + "\n")
            .collect();
        let names = uses.entry(module.clone()).or_default();
        let ident = |s: &str| -> String {
            s.trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        };
        for (at, _) in code.match_indices("crate::") {
            let after = &code[at + "crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                // `crate::{a, b::{c, d}, e}`: the first name of each top-level item.
                let (mut depth, mut item_start) = (0, true);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => item_start = true,
                        _ if item_start && !c.is_whitespace() => {
                            names.insert(ident(&group[i..]));
                            item_start = false;
                        }
                        _ => {}
                    }
                }
            } else {
                names.insert(ident(after));
            }
        }
        names.remove(&module);
    }
    uses
}

/// A cycle among `uses`' modules, if any, as the path that closes it.
fn a_cycle(uses: &BTreeMap<String, std::collections::BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first search with the path on a stack: an edge back into the path is a cycle.
    fn visit(
        m: &str,
        uses: &BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut cycle = path[at..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in uses.get(m).into_iter().flatten() {
            if uses.contains_key(next)
                && let Some(c) = visit(next, uses, path, done)
            {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    uses.keys()
        .find_map(|m| visit(m, uses, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let crates = LIBRARIES
        .iter()
        .copied()
        .chain([("melctl", "crates/melctl")]);
    for (name, folder) in crates {
        let uses = module_uses(&root().join(folder).join("src"));
        assert!(
            uses.len() > 1 || name == "mel-cpu",
            "{name}: found no modules; the scan is broken"
        );
        if let Some(cycle) = a_cycle(&uses) {
            panic!(
                "{name}: its modules import each other in a cycle: {} (move what both need \
                 below both, so the dependency runs one way)",
                cycle.join(" -> ")
            );
        }
    }
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let uses = BTreeMap::from([
        ("a".to_string(), ["b".to_string()].into()),
        ("b".to_string(), ["c".to_string()].into()),
        ("c".to_string(), ["a".to_string()].into()),
        ("d".to_string(), ["a".to_string()].into()),
    ]);
    assert_eq!(
        a_cycle(&uses),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
    let mut acyclic = uses.clone();
    acyclic.insert("c".to_string(), Default::default());
    assert_eq!(a_cycle(&acyclic), None);
}

/// The functions still over clippy's `too_many_lines` threshold (`clippy.toml`; CI denies
/// the lint), as (file, function). A ratchet: a new long function fails CI, and a function
/// cut into named phases must leave this list, which only shrinks.
const LONG_FUNCTIONS: [(&str, &str); 0] = [];

/// Every function allowed `clippy::too_many_lines` in the workspace's sources, as (file
/// relative to the root, function name).
fn allowed_long_functions() -> std::collections::BTreeSet<(String, String)> {
    let mut found = std::collections::BTreeSet::new();
    let folders = [
        "crates",
        "backends",
        "python/src",
        "tests",
        "xtask",
        "benches",
    ];
    for folder in folders {
        for file in sources(&root().join(folder)) {
            let text = std::fs::read_to_string(&file).unwrap();
            let mut lines = text.lines();
            while let Some(line) = lines.next() {
                let attr = line.trim_start();
                if !(attr.starts_with("#[allow(") || attr.starts_with("#![allow("))
                    || !attr.contains("clippy::too_many_lines")
                {
                    continue;
                }
                // The function it is on: the next line that declares one.
                let name = lines
                    .by_ref()
                    .find_map(|l| {
                        let l = l.trim_start();
                        let at = l.find("fn ")?;
                        let rest = &l[at + 3..];
                        Some(rest[..rest.find(['(', '<'])?].to_string())
                    })
                    .unwrap_or_default();
                let rel = file.strip_prefix(root()).unwrap().display().to_string();
                found.insert((rel, name));
            }
        }
    }
    found
}

#[test]
fn long_functions_only_shrink_in_number() {
    let found = allowed_long_functions();
    let listed: std::collections::BTreeSet<(String, String)> = LONG_FUNCTIONS
        .iter()
        .map(|(f, n)| (f.to_string(), n.to_string()))
        .collect();
    let extra: Vec<_> = found.difference(&listed).collect();
    assert!(
        extra.is_empty(),
        "allowed clippy::too_many_lines but not on LONG_FUNCTIONS (cut them into named phases instead): {extra:?}"
    );
    let gone: Vec<_> = listed.difference(&found).collect();
    assert!(
        gone.is_empty(),
        "no longer allowed clippy::too_many_lines: take them off LONG_FUNCTIONS (the list only shrinks): {gone:?}"
    );
}
